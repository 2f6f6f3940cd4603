/** What every view is given: who signed in, and the page's parts a view may use (its heading, the alert, the status). */
import { ApiError } from './api.js';
import { button, type Child, form, h } from './dom.js';
import { routeHash, type View } from './logic.js';

export interface Me {
  name: string;
  role: 'viewer' | 'operator';
  expiresAt: number;
}

export interface App {
  me: Me;
  /** An operator: a viewer is shown no action. */
  canAct: boolean;
  /** Shows the view under its heading (focused); false when the user has moved on since it began. */
  show(title: string, ...nodes: Child[]): boolean;
  /** An error in the alert region: the API's `{code, msg}`, or what went wrong. */
  fail(err: unknown): void;
  /** A line in the status region (what an action did). */
  say(msg: string): void;
  /** To a route: the hash changes (or, the same hash, the view is drawn again). */
  go(hash: string): void;
  /** Draws the view again, then says `msg` in the status region. */
  reload(msg: string): void;
  /** Closes the confirmation that is open, if any, and makes `close` the one to close next: one open at a time. */
  exclusive(close: () => void): void;
}

export function faultText(err: unknown): string {
  if (err instanceof ApiError) return `${err.fault.msg} (${err.fault.code})`;
  return err instanceof Error ? err.message : String(err);
}

/** A link to the list's next page (its cursor), and back to its first when on a later one. */
export function pager(view: View, query: Record<string, string>, next: string | null): HTMLElement {
  const { cursor, ...filters } = query;
  return h(
    'p',
    { class: 'pager' },
    cursor !== undefined && h('a', { href: routeHash(view, undefined, filters) }, 'First page'),
    ' ',
    next !== null && h('a', { href: routeHash(view, undefined, { ...filters, cursor: next }) }, 'Next page'),
  );
}

/** A filter form: its fields become the route's query (the cursor dropped), so Back and a copied link keep them. */
export function filters(app: App, view: View, controls: [HTMLElement, ...(HTMLInputElement | HTMLSelectElement)[]]): HTMLFormElement {
  const [row, ...inputs] = controls;
  return form(
    `Filter ${view}`,
    () => app.go(routeHash(view, undefined, Object.fromEntries(inputs.map((i) => [i.name, i.value.trim()])))),
    row,
    h('button', { type: 'submit' }, 'Filter'),
  );
}

/**
 * A confirmation in the page (never window.confirm): its text and fields, `Confirm` (Enter, too) and `Back`
 * (Escape, too). `act` runs once per Confirm; the panel stays open when it throws, the error in the alert region.
 */
export function confirmPanel(
  app: App,
  label: string,
  opener: HTMLElement,
  body: Child[],
  act: () => Promise<void> | void,
): { panel: HTMLElement; close(): void } {
  const confirm = h('button', { type: 'submit' }, 'Confirm');
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    // A row's confirmation sits in a row of its own (Pending): the row goes with it.
    (panel.closest('tr.panel') ?? panel).remove();
    opener.setAttribute('aria-expanded', 'false');
  };
  const back = button('Back', () => {
    close();
    opener.focus();
  });
  const panel = form(
    label,
    async () => {
      confirm.disabled = true;
      try {
        await act();
      } catch (err) {
        app.fail(err);
      } finally {
        confirm.disabled = false;
      }
    },
    ...body,
    h('div', { class: 'actions' }, confirm, back),
  );
  panel.classList.add('confirm');
  panel.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    close();
    opener.focus();
  });
  app.exclusive(close);
  opener.setAttribute('aria-expanded', 'true');
  return { panel, close };
}

/** A button that runs an API action once at a time (disabled meanwhile), its error in the alert region. */
export function action(app: App, text: string, act: () => Promise<void>, props: Record<string, string> = {}): HTMLButtonElement {
  const b: HTMLButtonElement = button(
    text,
    () => {
      b.disabled = true;
      act()
        .catch((err: unknown) => app.fail(err))
        .finally(() => {
          b.disabled = false;
        });
    },
    props,
  );
  return b;
}
