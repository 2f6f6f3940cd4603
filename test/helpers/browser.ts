// The console (DESIGN §3.8) in a real browser: Debian's headless Chromium through playwright-core, on a profile
// folder of its own. Every request a watched page makes is recorded, with its console errors, uncaught errors and
// Content-Security-Policy violations, so that a test can prove the page asked nothing of another origin and broke
// no rule of its policy.
import { expect } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { launchProfiledChromium } from '../../scripts/lib/chromium.js';

/** Chromium's console line for an HTTP error answer: a test provokes those on purpose and checks them as responses. */
const HTTP_ERROR_LINE = /^Failed to load resource: the server responded with a status of \d+/;

/** Reported to the console by the listener added to every document, before any of the page's own scripts run. */
const CSP_MARK = 'botlink-test CSP violation:';
const CSP_LISTENER = `document.addEventListener('securitypolicyviolation', (e) => {
  console.error(${JSON.stringify(CSP_MARK)} + ' ' + e.violatedDirective + ' ' + e.blockedURI);
});`;

export interface Answer {
  method: string;
  url: string;
  status: number;
}

export interface BrowserSession {
  context: BrowserContext;
  /** The first page, watched. */
  page: Page;
  /** Every request of the watched pages: method and URL, in order. */
  requests: { method: string; url: string }[];
  /** Every answer of the watched pages. */
  answers: Answer[];
  /** Console errors, uncaught exceptions and CSP violations of the watched pages. */
  problems: string[];
  /** Records the requests and problems of another page too (the first is watched already). */
  watch(page: Page): void;
  /** Fails the test on any problem, or on any request of a watched page to an origin other than `origin`. */
  expectClean(): void;
  close(): Promise<void>;
}

/** A browser whose watched pages may speak only to `origin`. */
export async function openBrowser(origin: string): Promise<BrowserSession> {
  const browser = await launchProfiledChromium();
  const { context } = browser;
  // A bounded wait for every locator: a missing name fails in seconds, naming what it waited for.
  context.setDefaultTimeout(15_000);
  await context.addInitScript({ content: CSP_LISTENER });
  const requests: BrowserSession['requests'] = [];
  const answers: Answer[] = [];
  const problems: string[] = [];
  const watch = (page: Page): void => {
    page.on('request', (r) => requests.push({ method: r.method(), url: r.url() }));
    page.on('response', (r) => answers.push({ method: r.request().method(), url: r.url(), status: r.status() }));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText ?? ''}`));
    page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !HTTP_ERROR_LINE.test(m.text())) problems.push(`console error: ${m.text()}`);
    });
  };
  const page = context.pages()[0] ?? (await context.newPage());
  watch(page);
  return {
    context,
    page,
    requests,
    answers,
    problems,
    watch,
    expectClean() {
      const elsewhere = requests.filter((r) => new URL(r.url).origin !== origin);
      expect(elsewhere, `requests to an origin other than ${origin}`).toEqual([]);
      expect(problems).toEqual([]);
    },
    close: () => browser.close(),
  };
}
