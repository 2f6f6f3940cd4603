import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type LaunchOptions } from 'playwright-core';
import { requireTool } from './tools.js';

/**
 * Debian's Chromium as the console's tests and benchmark drive it (DESIGN §3.8): headless, and quiet, so that every
 * request it makes is the page's own — no component updates, sync, field trials or QUIC probes to other hosts.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** playwright-core's options for the system's chromium: it downloads no browser, it is told where one is. */
export function chromiumOptions(): LaunchOptions {
  return { executablePath: requireTool('chromium'), args: CHROMIUM_ARGS, headless: true };
}

/** A browser whose incognito contexts (browser.newContext()) each start empty: for the benchmark's fresh loads. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch(chromiumOptions());
}

/** A browser on a profile folder of its own, made here and removed by close(), whatever the browser left in it. */
export interface ProfiledBrowser {
  context: BrowserContext;
  profile: string;
  close(): Promise<void>;
}

export async function launchProfiledChromium(viewport = { width: 1100, height: 700 }): Promise<ProfiledBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'botlink-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, { ...chromiumOptions(), viewport });
    return {
      context,
      profile,
      async close() {
        await context.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}
