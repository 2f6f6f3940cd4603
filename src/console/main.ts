/**
 * The operator's console (DESIGN §3.8): a page over the admin API at /admin/, hash-routed (`#/devices`), built by
 * scripts/lib/console-build.mjs and served by src/broker/admin/console-route.ts. Sign-in makes the session cookie;
 * a 401 on any request brings the sign-in back.
 */
import { ApiError, call, onSignedOut } from './api.js';
import { type App, faultText, type Me } from './app.js';
import { append, button, type Child, field, form, h, input } from './dom.js';
import { NAV, parseRoute, type Route, type View } from './logic.js';
import { codesView, preauthView } from './views-codes.js';
import { auditView, devicesView, deviceView, summaryView } from './views-fleet.js';
import { pendingView } from './views-pending.js';

const VIEWS: Record<View, (app: App, route: Route) => Promise<void>> = {
  summary: summaryView,
  devices: devicesView,
  device: deviceView,
  key: deviceView,
  pending: pendingView,
  codes: codesView,
  preauth: preauthView,
  audit: auditView,
};
const TITLES: Record<View, string> = { ...Object.fromEntries(NAV), device: 'Device', key: 'Key' } as Record<View, string>;

const header = h('header', { class: 'top' });
const alertRegion = h('div', { role: 'alert', class: 'alert' });
const statusRegion = h('div', { role: 'status', class: 'status' });
const main = h('main', { id: 'main' });
document.body.append(header, alertRegion, statusRegion, main);

let me: Me | null = null;
/** The render in progress: a view whose data arrives after the user moved on draws nothing. */
let seq = 0;
let closeOpen: (() => void) | undefined;

function show(mine: number, title: string, ...nodes: Child[]): boolean {
  if (mine !== seq) return false;
  const heading = h('h1', { tabindex: -1 }, title);
  main.replaceChildren(heading);
  append(main, nodes);
  document.title = `${title} - botlink console`;
  heading.focus();
  return true;
}

function fail(err: unknown): void {
  alertRegion.textContent = faultText(err);
}

function drawHeader(route: Route | null): void {
  header.replaceChildren(h('span', { class: 'brand' }, 'botlink console'));
  if (!me) return;
  const links = NAV.map(([name, title]) => {
    const current = route !== null && (route.view === name || (name === 'devices' && (route.view === 'device' || route.view === 'key')));
    return h('li', {}, h('a', { href: `#/${name}`, 'aria-current': current ? 'page' : undefined }, title));
  });
  header.append(
    h('nav', { 'aria-label': 'Views' }, h('ul', {}, ...links)),
    h('span', { class: 'who' }, `${me.name} (${me.role})`),
    button('Sign out', () => void signOut()),
  );
}

function appFor(mine: number, signedIn: Me): App {
  return {
    me: signedIn,
    canAct: signedIn.role === 'operator',
    show: (title, ...nodes) => show(mine, title, ...nodes),
    fail: (err) => {
      if (mine === seq) fail(err);
    },
    say: (msg) => {
      if (mine === seq) statusRegion.textContent = msg;
    },
    go: (hash) => {
      if (location.hash === hash) void render();
      else location.hash = hash;
    },
    reload: (msg) => {
      void render().then((drawn) => {
        if (drawn === seq) statusRegion.textContent = msg;
      });
    },
    exclusive: (close) => {
      closeOpen?.();
      closeOpen = close;
    },
  };
}

/** Draws the route's view; the render's number, which a later render or sign-in outdates. */
async function render(): Promise<number> {
  if (!me) {
    signIn();
    return seq;
  }
  const mine = ++seq;
  closeOpen = undefined;
  alertRegion.textContent = '';
  statusRegion.textContent = '';
  const route = parseRoute(location.hash);
  drawHeader(route);
  try {
    await VIEWS[route.view](appFor(mine, me), route);
  } catch (err) {
    if (mine !== seq) return mine;
    if (main.querySelector('h1')?.textContent !== TITLES[route.view]) show(mine, TITLES[route.view]);
    fail(err);
  }
  return mine;
}

function signIn(note?: string): void {
  me = null;
  const mine = ++seq;
  drawHeader(null);
  const token = input('token', '', 'password');
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const signInForm = form(
    'Sign in',
    async () => {
      submit.disabled = true;
      try {
        await call<Me>('POST', '/admin/session', { token: token.value.trim() }, true);
        token.value = '';
        // Who the session is, read as every later request will be: with the cookie alone.
        me = await call<Me>('GET', '/admin/v1/me', undefined, true).catch((err: unknown) => {
          if (!(err instanceof ApiError && err.fault.status === 401)) throw err;
          throw new Error("Signed in, but the browser did not keep the session cookie: open the console at the broker's adminOrigin.");
        });
        await render();
      } catch (err) {
        fail(err);
        token.focus();
      } finally {
        submit.disabled = false;
      }
    },
    field('Admin token', token),
    submit,
  );
  show(mine, 'Sign in', note !== undefined && h('p', {}, note), signInForm);
}

async function signOut(): Promise<void> {
  try {
    await call('DELETE', '/admin/session', undefined, true);
    alertRegion.textContent = '';
    signIn('Signed out.');
  } catch (err) {
    fail(err);
  }
}

onSignedOut(() => signIn('The session ended (signed out, expired or its token revoked): sign in again.'));
window.addEventListener('hashchange', () => void render());

call<Me>('GET', '/admin/v1/me', undefined, true).then(
  (who) => {
    me = who;
    void render();
  },
  (err: unknown) => {
    signIn();
    if (!(err instanceof ApiError && err.fault.status === 401)) fail(err);
  },
);
