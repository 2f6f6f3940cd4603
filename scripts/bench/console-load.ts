// The broker bench's console row (issue 34, DESIGN §3.8): the console's first load in Debian's headless Chromium.
// Each load is a fresh browser context (no cache, no cookie but the session's): the page, its script and style,
// and its first API calls, until the Summary view shows the fleet's counts. Alternating with it, two more in the
// same browser: signing in by the form (the page, the token typed, the Summary), and the baseline, a blank page from
// a node:http server on the same loopback. The first load's transferred bytes (headers and bodies, as sent) beside.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { createTestService } from '../../src/service/testing.js';
import { launchChromium } from '../lib/chromium.js';
import { cleanEnv } from '../lib/env.js';
import { exec } from '../lib/exec.js';
import { median, quantile } from '../lib/stats.js';
import { ACCESS_KEY_ID, makeDevices, SECRET, VENDOR } from './broker-load.js';
import type { BrokerRig } from './broker-rig.js';
import { ms, spreads, times, verdict } from './report.js';
import { alternate } from './sample.js';

/** The first load's transferred bytes: the goal. */
export const CONSOLE_BYTES_GOAL = 100 * 1024;
/** The enrolled devices the Summary counts. */
const DEVICES = 3;

export interface ConsoleMeasured {
  /** Navigation start of /admin/ with a session cookie → the Summary's counts shown, ms (the page's clock). */
  signedIn: number[];
  /** Navigation start of /admin/ → the token typed and sent → the Summary's counts shown, ms. */
  signIn: number[];
  /** Navigation start of a blank page from node:http → its load event's end, ms. */
  blank: number[];
  /** The first signed-in load's bytes on the wire, and per response. */
  bytes: number;
  responses: { path: string; bytes: number }[];
  /** Each signed-in load's parts done, ms since its navigation began. */
  phases: Phases[];
}

/**
 * Marks, in the page's own clock (ms since its navigation began), the first moment #main shows the Summary's count
 * of active devices: a MutationObserver added before any of the page's scripts, so the figure has no polling in it.
 */
const SUMMARY_MARK = `new MutationObserver((_, observer) => {
  const main = document.getElementById('main');
  const text = main === null ? '' : main.textContent;
  if (/active/i.test(text) && text.includes(${JSON.stringify(String(DEVICES))})) {
    observer.disconnect();
    window.__botlinkSummary(performance.now());
  }
}).observe(document, { subtree: true, childList: true, characterData: true });`;

/** When each part of a load was done, from the page's own timing entries (ms since the navigation began). */
const PHASES = `(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const end = (path) => performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname.startsWith(path)).map((e) => e.responseEnd)[0] ?? NaN;
  return { html: nav.responseEnd, script: end('/admin/console.'), domReady: nav.domContentLoadedEventEnd, me: end('/admin/v1/me'), summary: end('/admin/v1/summary') };
})()`;
type Phases = Record<'html' | 'script' | 'domReady' | 'me' | 'summary', number>;

/** The ms from the navigation's start to its load event's end. */
async function loaded(page: Page): Promise<number> {
  return Number(await page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"));
}

/** A blank page on another loopback port: the browser's own cost of a context, a navigation and one response. */
async function serveBlank(): Promise<{ url: string; close(): void }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>blank</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, close: () => server.close() };
}

/** A new console session as the browser gets one (POST /admin/session from the console's own Origin): its cookie value. */
async function newSession(admin: string, token: string): Promise<string> {
  const res = await fetch(`${admin}/admin/session`, {
    method: 'POST',
    headers: { origin: admin, 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  const m = /^botlink_admin=([^;]*);/.exec(res.headers.get('set-cookie') ?? '');
  if (res.status !== 200 || !m?.[1]) throw new Error(`POST /admin/session answered ${res.status}, no session cookie`);
  return m[1];
}

/** Rejects after 15 s, naming what did not come. */
function within15s<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within 15 s`)), 15_000);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * One load in a fresh context: what `run` measures in the page's clock, after `before` has set the context up.
 * `shown()` is the ms from the navigation's start to the Summary's count, as the page's observer reports it through
 * a binding of the context's (CDP's, not a script's: the console's policy allows no eval, so no polled predicate).
 */
async function timed(
  browser: Browser,
  before: (page: Page) => Promise<void>,
  run: (page: Page, shown: () => Promise<number>) => Promise<number>,
): Promise<number> {
  const context = await browser.newContext();
  try {
    context.setDefaultTimeout(15_000);
    let report: (at: number) => void = () => {};
    const shown = new Promise<number>((resolve) => {
      report = resolve;
    });
    await context.exposeBinding('__botlinkSummary', (_source, at: number) => report(at));
    await context.addInitScript({ content: SUMMARY_MARK });
    const page = await context.newPage();
    // What the page was answered, for the error when its Summary never shows.
    const answered: string[] = [];
    page.on('response', (r) => answered.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`));
    await before(page);
    return await run(page, () =>
      within15s('the Summary view showed no count of active devices', shown).catch(async (err: Error) => {
        const main = await page
          .locator('#main')
          .textContent({ timeout: 1000 })
          .catch(() => null);
        throw new Error(`${err.message}; the page was answered ${answered.join(', ')}; #main says ${JSON.stringify(main?.slice(0, 300))}`);
      }),
    );
  } finally {
    await context.close();
  }
}

export async function measureConsole(rig: BrokerRig, bundle: string, loads: number): Promise<ConsoleMeasured> {
  const cloud = await createTestService({
    seed: { accounts: [{ accessKeyId: ACCESS_KEY_ID, secretKey: SECRET, vendors: [{ vendorId: VENDOR, bots: [] }] }] },
  });
  const store = rig.sqliteStore('console');
  await rig.preload(store, makeDevices(DEVICES, 'console'));
  const broker = await rig.broker({ name: 'console', cloud: cloud.url, store, extra: { adminListen: '127.0.0.1:0' } });
  const blank = await serveBlank();
  let browser: Browser | undefined;
  try {
    const admin = broker.adminUrl;
    if (admin === undefined) throw new Error('the console broker printed no `admin on` line');
    const made = await exec(
      process.execPath,
      [bundle, 'broker', 'admin-token', 'create', '--config', broker.configFile, '--name', 'bench', '--role', 'viewer'],
      { env: cleanEnv(), timeoutMs: 60_000 },
    );
    const token = made.stdout.trim().split('\n').at(-1) ?? '';
    if (made.code !== 0 || !token.startsWith('blk_')) throw new Error(`admin-token create exited ${made.code}: ${made.stderr}`);
    browser = await launchChromium();
    const b = browser;
    const withCookie = async (page: Page): Promise<void> => {
      const value = await newSession(admin, token);
      await page.context().addCookies([{ name: 'botlink_admin', value, url: `${admin}/admin/` }]);
    };
    const nothing = async (): Promise<void> => {};

    // The first load's bytes, apart from the timed runs: every response's headers and body as sent.
    const responses: ConsoleMeasured['responses'] = [];
    await timed(b, withCookie, async (page, shown) => {
      const finished: Promise<void>[] = [];
      page.on('requestfinished', (r) => {
        finished.push(
          r
            .sizes()
            .then((s) => void responses.push({ path: new URL(r.url()).pathname, bytes: s.responseHeadersSize + s.responseBodySize })),
        );
      });
      await page.goto(`${admin}/admin/`);
      const ms = await shown();
      await page.waitForLoadState('networkidle');
      await Promise.all(finished);
      return ms;
    });

    const phases: Phases[] = [];
    const [signedIn, signIn, blankMs] = await alternate(loads, [
      () =>
        timed(b, withCookie, async (page, shown) => {
          await page.goto(`${admin}/admin/`, { waitUntil: 'commit' });
          const ms = await shown();
          phases.push((await page.evaluate(PHASES)) as Phases);
          return ms;
        }),
      () =>
        timed(b, nothing, async (page, shown) => {
          await page.goto(`${admin}/admin/`);
          await page.getByLabel('Admin token', { exact: true }).fill(token);
          await page.getByRole('button', { name: 'Sign in', exact: true }).click();
          return shown();
        }),
      () =>
        timed(b, nothing, async (page) => {
          await page.goto(blank.url);
          return loaded(page);
        }),
    ]);
    return {
      signedIn: signedIn!,
      signIn: signIn!,
      blank: blankMs!,
      bytes: responses.reduce((sum, r) => sum + r.bytes, 0),
      responses,
      // The warm-up round's load is measured too: the last `loads` are the sample's.
      phases: phases.slice(-loads),
    };
  } finally {
    await browser?.close();
    blank.close();
    await broker.stop();
    await cloud.close();
  }
}

const pair = (xs: readonly number[]): string => `${ms(quantile(xs, 0.5))} / ${ms(quantile(xs, 0.99))}`;

/** The rows of the broker table, and the first load's responses printed above it. */
export function consoleRows(m: ConsoleMeasured): string[][] {
  console.log(`\nthe console's first load, ${m.signedIn.length} fresh contexts each (p50 / p99):`);
  for (const r of m.responses) console.log(`  ${r.path.padEnd(28)} ${(r.bytes / 1024).toFixed(1)} KiB on the wire`);
  const part = (k: keyof Phases): string => ms(median(m.phases.map((p) => p[k])));
  console.log(
    `signed-in load, medians since the navigation began: HTML ${part('html')}, script ${part('script')}, ` +
      `DOMContentLoaded ${part('domReady')}, /admin/v1/me ${part('me')}, /admin/v1/summary ${part('summary')}, Summary shown ${ms(quantile(m.signedIn, 0.5))}`,
  );
  const ratio = (xs: readonly number[]): string => `${times(median(xs) / median(m.blank))} (p50)`;
  const kib = m.bytes / 1024;
  return [
    [
      'console: signed in, /admin/ → Summary shown, p50 / p99',
      pair(m.signedIn),
      pair(m.blank),
      ratio(m.signedIn),
      'info',
      '',
      spreads(m.signedIn, m.blank),
      '',
    ],
    [
      'console: the form, /admin/ → token → Summary, p50 / p99',
      pair(m.signIn),
      pair(m.blank),
      ratio(m.signIn),
      'info',
      '',
      spreads(m.signIn, m.blank),
      '',
    ],
    [
      "console: the first load's bytes on the wire",
      `${kib.toFixed(1)} KiB`,
      '—',
      '—',
      '< 100 KiB',
      verdict(m.bytes < CONSOLE_BYTES_GOAL),
      '',
      '',
    ],
  ];
}
