import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adminCall } from '../helpers/admin-client.js';
import { type AdminRig, startAdminRig } from '../helpers/admin-rig.js';
import { TestDevice } from '../helpers/broker-device.js';
import { type BrowserSession, openBrowser } from '../helpers/browser.js';

// The console (DESIGN §3.8) in Debian's headless Chromium against a real `botlink broker` and its admin listener,
// found by the contract's accessible names alone: the test checks the contract, not one page's markup. Devices are
// real signed clients of the broker (TestDevice); the ones waiting ask code-less under the rig's pendingEnrollment.
let a: AdminRig;
let admin: string;
let s: BrowserSession;
const BOUND = 10_000;

beforeAll(async () => {
  a = await startAdminRig('test-browser-console-');
  admin = a.admin;
  const code = await a.rig.code(['--uses', '10']);
  for (const [i, name] of ['kitchen', 'hall', 'garage'].entries()) {
    const device = new TestDevice();
    await device.mustEnroll(a.broker.url, { code, deviceId: `DEV-${i + 1}`, name });
    expect((await device.token(a.broker.url, { agent: { version: '1.4.2' } })).status).toBe(200);
  }
}, 120_000);

afterAll(() => a?.close());

beforeEach(async () => {
  s = await openBrowser(admin);
});

afterEach(async () => {
  try {
    s.expectClean();
  } finally {
    await s.close();
  }
});

const api = (path: string, token = a.operator) => adminCall(admin, path, { token });
const apiPost = (path: string, body: unknown) => adminCall(admin, path, { method: 'POST', token: a.operator, body });
const main = (page: Page): Locator => page.locator('#main');
const mainText = async (page: Page): Promise<string> => (await main(page).textContent()) ?? '';
const button = (scope: Page | Locator, name: string): Locator => scope.getByRole('button', { name, exact: true });
/** A table row of the main view holding `text` (its botId, deviceId, keyId or name). */
const row = (page: Page, text: string): Locator => main(page).getByRole('row').filter({ hasText: text });
const isFocused = (l: Locator): Promise<boolean> => l.evaluate((el) => el === el.ownerDocument.activeElement);

async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(`${admin}/admin/`);
  await page.getByLabel('Admin token', { exact: true }).fill(token);
  await button(page, 'Sign in').click();
  await page.getByRole('link', { name: 'Summary', exact: true }).waitFor();
}

/**
 * Opens a view from the navigation, and waits until the view before it is gone (when the link led elsewhere): what is
 * checked next is never the last view's content.
 */
async function view(page: Page, name: string): Promise<void> {
  const before = page.url();
  const shown = await main(page).locator(':scope > *').first().elementHandle();
  await page.getByRole('link', { name, exact: true }).click();
  if (page.url() !== before) await shown?.waitForElementState('hidden');
}

/** Follows a link of a list's row, and waits until the list is gone: what is checked next is the page it opened. */
async function openFromList(page: Page, link: Locator): Promise<void> {
  const list = await main(page).getByRole('table').first().elementHandle();
  await link.click();
  await list?.waitForElementState('hidden');
}

/** A device asking code-less: 202 pending under the rig's devicePattern SN-WAIT-[0-9]+. */
async function pendingDevice(deviceId: string, name = 'porch'): Promise<TestDevice> {
  const device = new TestDevice();
  const asked = await device.enroll(a.broker.url, { vendorId: 'V1', deviceId, name });
  expect(asked.status, JSON.stringify(asked.json)).toBe(202);
  return device;
}

/** The POSTs and DELETEs the page sent, as "METHOD path". */
const actions = (): string[] =>
  s.requests.filter((r) => r.method !== 'GET' && r.method !== 'HEAD').map((r) => `${r.method} ${new URL(r.url).pathname}`);

describe('the console in a browser', () => {
  it('signs in with the keyboard alone; Summary shows the counts; the cookie is HttpOnly, SameSite=Strict, Path=/admin', async () => {
    const { page } = s;
    await page.goto(`${admin}/admin/`);
    const field = page.getByLabel('Admin token', { exact: true });
    await field.waitFor();
    expect(await field.getAttribute('type')).toBe('password');
    await button(page, 'Sign in').waitFor();
    for (let tabs = 0; tabs < 20 && !(await isFocused(field)); tabs++) await page.keyboard.press('Tab');
    expect(await isFocused(field)).toBe(true);
    await page.keyboard.type(a.operator);
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'Summary', exact: true }).waitFor();

    const summary = (await api('/admin/v1/summary')).json as { devices: Record<string, number> };
    expect(summary.devices['active']).toBeGreaterThanOrEqual(3);
    await expect.poll(() => mainText(page), { timeout: BOUND }).toMatch(/active/i);
    expect(await mainText(page)).toContain(String(summary.devices['active']));
    expect(await mainText(page)).toContain('1.4.2');

    expect(await page.evaluate('document.cookie')).not.toContain('botlink_admin');
    const cookies = await s.context.cookies(`${admin}/admin/`);
    expect(cookies.map((c) => [c.name, c.httpOnly, c.sameSite, c.path, c.secure])).toEqual([
      ['botlink_admin', true, 'Strict', '/admin', false],
    ]);
  });

  it('takes the README’s picture of the Devices view', async () => {
    const { page } = s;
    await signIn(page, a.operator);
    await view(page, 'Devices');
    await row(page, 'DEV-1').waitFor();
    // At the picture's 1100 px, no state, time or version breaks inside a word ("activ/e"): each stays on one line,
    // only ids may wrap. A cell's text on one line is one client rect of its contents.
    const broken = await main(page)
      .getByRole('table')
      .evaluate((table) => {
        const heads = [...table.querySelectorAll('th')].map((th) => th.textContent);
        const columns = ['state', 'last seen', 'agent version'].map((name) => heads.indexOf(name));
        const lines = (cell: (typeof table.children)[number]): number => {
          const range = table.ownerDocument.createRange();
          range.selectNodeContents(cell);
          return range.getClientRects().length;
        };
        return [...table.querySelectorAll('tbody tr')].flatMap((tr) =>
          columns.map((i) => tr.children[i]).flatMap((cell) => (cell && lines(cell) !== 1 ? [cell.textContent] : [])),
        );
      });
    expect(broken).toEqual([]);
    const dir = mkdtempSync(join(tmpdir(), 'botlink-console-png-'));
    try {
      const file = join(dir, 'console.png');
      await page.screenshot({ path: file });
      const png = readFileSync(file);
      expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
      if (process.env['BOTLINK_UPDATE_SCREENSHOT'] === '1') copyFileSync(file, join(import.meta.dirname, 'console.png'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('shows a waiting device with its whole keyId; Accept acts only on the keyId read right, then the device enrolls and is seen', async () => {
    const { page } = s;
    const device = await pendingDevice('SN-WAIT-1');
    await signIn(page, a.operator);
    await view(page, 'Pending');
    const waiting = row(page, 'SN-WAIT-1');
    await waiting.waitFor();
    expect(await waiting.textContent()).toContain(device.keyId);
    await button(waiting, 'Accept').click();
    const keyId = page.getByLabel('keyId', { exact: true });
    const wrong = `${device.keyId.slice(0, 31)}${device.keyId.endsWith('A') ? 'B' : 'A'}`;
    await keyId.fill(wrong);
    await button(page, 'Confirm').click();
    // Told in a region a screen reader announces (an alert or a live region), whatever its words.
    await page.locator('[role=alert], [aria-live]').filter({ hasText: /\S/ }).first().waitFor({ timeout: BOUND });
    expect(actions()).toEqual(['POST /admin/session']);
    expect(((await api(`/admin/v1/keys/${device.keyId}`)).json as { state: string }).state).toBe('pending');

    await keyId.fill(device.keyId);
    await button(page, 'Confirm').click();
    await expect
      .poll(() => s.answers.find((r) => r.url.endsWith(`/admin/v1/pending/${device.keyId}/accept`))?.status, { timeout: BOUND })
      .toBe(200);
    expect(actions()).toEqual(['POST /admin/session', `POST /admin/v1/pending/${device.keyId}/accept`]);
    // The device's next ask finds its key accepted, and its first token is its first sight.
    const enrolled = await device.enroll(a.broker.url, { vendorId: 'V1', deviceId: 'SN-WAIT-1' });
    expect(enrolled.status, JSON.stringify(enrolled.json)).toBe(200);
    expect((await device.token(a.broker.url)).status).toBe(200);
    const botId = enrolled.json['botId'] as string;
    const item = async () => (await api(`/admin/v1/keys/${device.keyId}`)).json as { state: string; lastSeen: number | null };
    await expect.poll(async () => (await item()).lastSeen, { timeout: BOUND }).toEqual(expect.any(Number));
    expect((await item()).state).toBe('active');
    // Devices drawn afresh (from another view) until its row says so.
    await expect
      .poll(
        async () => {
          await view(page, 'Summary');
          await view(page, 'Devices');
          return (await row(page, botId).textContent()) ?? '';
        },
        { timeout: BOUND },
      )
      .toMatch(/active/);
    expect(await row(page, botId).textContent()).toContain(device.keyId);
    expect(await row(page, botId).textContent()).toContain('SN-WAIT-1');
  });

  it('makes a code shown once with its copy button, lists it without the code, and Cancel ends it at the broker', async () => {
    const { page } = s;
    await s.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: admin });
    await signIn(page, a.operator);
    await view(page, 'Codes');
    const answer = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/admin/v1/codes');
    await makeCode(page);
    const made = await answer;
    expect(made.status()).toBe(201);
    const { id } = (await made.json()) as { id: string };
    const shown = page.getByTestId('new-code');
    await shown.waitFor({ timeout: BOUND });
    const code = ((await shown.textContent()) ?? '').trim();
    expect(code).toMatch(/\S{8,}/);
    await button(page, 'Copy').click();
    await expect.poll(() => page.evaluate('navigator.clipboard.readText()'), { timeout: BOUND }).toBe(code);

    // Listed by its id, never its code, once the view is drawn again.
    await view(page, 'Summary');
    await view(page, 'Codes');
    await row(page, id).waitFor();
    expect(await page.getByTestId('new-code').count()).toBe(0);
    expect(await page.locator('body').textContent()).not.toContain(code);

    await button(row(page, id), 'Cancel').click();
    await expect.poll(() => row(page, id).count(), { timeout: BOUND }).toBe(0);
    const late = await new TestDevice().enroll(a.broker.url, { code, deviceId: 'DEV-LATE' });
    expect(late.status).toBe(403);
  });

  it('revokes a device from its page after an in-page confirmation, displacing by default', async () => {
    const { page } = s;
    const device = new TestDevice();
    const botId = await device.mustEnroll(a.broker.url, { code: await a.rig.code(), deviceId: 'DEV-REVOKE', name: 'attic' });
    await signIn(page, a.operator);
    await view(page, 'Devices');
    await openFromList(page, row(page, botId).getByRole('link').first());
    await main(page).getByText(device.keyId).first().waitFor();
    expect(await mainText(page)).toContain('DEV-REVOKE');
    await button(page, 'Revoke').click();
    // Nothing is sent before the page's own confirmation.
    expect(actions().filter((x) => x.includes('/revoke'))).toEqual([]);
    await confirmRevoke(page);
    await expect
      .poll(() => s.answers.find((r) => r.url.endsWith(`/admin/v1/devices/${botId}/revoke`))?.status, { timeout: BOUND })
      .toBe(200);
    expect(((await api(`/admin/v1/devices/${botId}`)).json as { state: string }).state).toBe('revoked');
    expect((await device.token(a.broker.url)).status).toBe(403);
    let displaced: { actor: string }[] = [];
    await expect
      .poll(
        async () => {
          displaced = (await api(`/admin/v1/audit?botId=${botId}&action=displace`)).json['events'] as typeof displaced;
          return displaced.length;
        },
        { timeout: BOUND },
      )
      .toBe(1);
    expect(displaced[0]?.actor).toBe('ops');
  });

  it('shows hostile device names as text in Pending, Devices and the device page, running nothing', async () => {
    const { page } = s;
    const names = ['<img src=x onerror=window.__pwned=1>', '<script>window.__pwned=2</script>'];
    // Each name twice, through real asks: waiting code-less, and enrolled with a code.
    for (const [i, name] of names.entries()) await pendingDevice(`SN-WAIT-7${i}`, name);
    const code = await a.rig.code(['--uses', '2']);
    const botIds = await Promise.all(
      names.map((name, i) => new TestDevice().mustEnroll(a.broker.url, { code, deviceId: `EVIL-${i}`, name })),
    );
    await signIn(page, a.operator);
    await view(page, 'Pending');
    for (const [i, name] of names.entries()) await row(page, `SN-WAIT-7${i}`).getByText(name, { exact: true }).waitFor();
    expect(await main(page).locator('img, script').count()).toBe(0);

    // Devices and a device's page show the name the enrolled key keeps (the one it enrolled with), as exact text.
    for (const [i, name] of names.entries()) {
      const botId = botIds[i] as string;
      expect((await api(`/admin/v1/devices/${botId}`)).json).toMatchObject({ deviceId: `EVIL-${i}`, name });
      await view(page, 'Summary');
      await view(page, 'Devices');
      await row(page, botId).getByText(name, { exact: true }).waitFor();
      expect(await main(page).locator('img, script').count()).toBe(0);
      await openFromList(page, row(page, botId).getByRole('link', { name: botId }));
      await main(page).getByText(`EVIL-${i}`, { exact: true }).first().waitFor();
      await main(page).getByText(name, { exact: true }).first().waitFor();
      expect(await main(page).locator('img, script').count()).toBe(0);
    }
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
    // No request for the img's src: it never became an element.
    expect(s.requests.filter((r) => new URL(r.url).pathname.endsWith('/x'))).toEqual([]);
  });

  it('shows a viewer no action it may not take, where an operator sees every one', async () => {
    const { page } = s;
    const waiting = await pendingDevice('SN-WAIT-80');
    expect((await apiPost('/admin/v1/preauth', { vendorId: 'V1', lines: [`SN-PRE-1,${new TestDevice().publicKey}`] })).status).toBe(200);
    const made = await apiPost('/admin/v1/codes', { vendorId: 'V1', anyDevice: true });
    expect(made.status).toBe(201);
    const actionNames = ['Revoke', 'Reset limits', 'Accept', 'Reject', 'Reject all', 'Make code', 'Cancel', 'Import', 'Remove'];
    // Every view, each once its rows are drawn: the action buttons seen on the way.
    const tour = async (): Promise<string[]> => {
      const seen = new Set<string>();
      const look = async (): Promise<void> => {
        for (const name of actionNames) if ((await button(page, name).count()) > 0) seen.add(name);
      };
      const stops: [string, () => Promise<void>][] = [
        [
          'Summary',
          () =>
            main(page)
              .getByText(/active/i)
              .first()
              .waitFor(),
        ],
        ['Devices', () => row(page, 'DEV-1').waitFor()],
        ['Pending', () => row(page, waiting.keyId).waitFor()],
        ['Codes', () => row(page, made.json['id'] as string).waitFor()],
        ['Preauth', () => row(page, 'SN-PRE-1').waitFor()],
        ['Audit', () => main(page).getByRole('row').nth(1).waitFor()],
      ];
      for (const [name, drawn] of stops) {
        await view(page, name);
        await drawn();
        await look();
      }
      await view(page, 'Devices');
      await openFromList(page, row(page, 'DEV-1').getByRole('link').first());
      await main(page).getByText('DEV-1', { exact: true }).first().waitFor();
      await look();
      return [...seen].sort();
    };
    await signIn(page, a.operator);
    expect(await tour()).toEqual([...actionNames].sort());
    await button(page, 'Sign out').click();
    // Signed out once the sign-in form is back: a navigation before that would cut the sign-out short.
    await page.getByLabel('Admin token', { exact: true }).waitFor();
    await signIn(page, a.viewer);
    expect(await tour()).toEqual([]);
    expect(actions().filter((x) => x.startsWith('POST /admin/v1') || x.startsWith('DELETE /admin/v1'))).toEqual([]);
  });

  it('refuses a foreign origin: a page on another loopback port posting with the session cookie, and a forged Origin', async () => {
    const { page } = s;
    const waiting = await pendingDevice('SN-WAIT-90');
    await signIn(page, a.operator);
    const foreign = await serveForeignPage(admin);
    try {
      const other = await s.context.newPage();
      const answered = other.waitForResponse((r) => r.url() === `${admin}/admin/v1/pending/reject`);
      await other.goto(foreign.url);
      // Same host, another port: the same site, so SameSite=Strict sends the cookie; the Origin rule must refuse it.
      expect((await answered).status()).toBe(403);
      await other.close();
    } finally {
      await foreign.close();
    }
    expect(((await api(`/admin/v1/keys/${waiting.keyId}`)).json as { state: string }).state).toBe('pending');
    const [cookie] = await s.context.cookies(`${admin}/admin/`);
    const forged = await adminCall(admin, '/admin/v1/pending/reject', {
      method: 'POST',
      cookie: cookie?.value ?? '',
      headers: { origin: 'http://127.0.0.1:1' },
    });
    expect(forged.status).toBe(403);
    expect(((await api(`/admin/v1/keys/${waiting.keyId}`)).json as { state: string }).state).toBe('pending');
    // The same cookie without a foreign Origin is a session that works: the refusals were the Origin's.
    expect((await adminCall(admin, '/admin/v1/me', { cookie: cookie?.value ?? '' })).status).toBe(200);
  });

  it('signs out back to the sign-in form, and the old cookie is refused', async () => {
    const { page } = s;
    await signIn(page, a.operator);
    const [cookie] = await s.context.cookies(`${admin}/admin/`);
    expect((await adminCall(admin, '/admin/v1/me', { cookie: cookie?.value ?? '' })).status).toBe(200);
    await button(page, 'Sign out').click();
    await page.getByLabel('Admin token', { exact: true }).waitFor({ timeout: BOUND });
    expect((await adminCall(admin, '/admin/v1/me', { cookie: cookie?.value ?? '' })).status).toBe(401);
  });
});

/**
 * Codes' `Make code` for vendor V1, any device. The form's fields are the page's own, not the contract's: found by
 * their labels (vendor, any device) within the form that holds the button, or the view if the button opens one.
 */
async function makeCode(page: Page): Promise<void> {
  const maker = main(page)
    .locator('form')
    .filter({ has: button(page, 'Make code') });
  if ((await maker.count()) === 0) await button(page, 'Make code').click();
  const scope = (await maker.count()) > 0 ? maker.first() : main(page);
  await scope
    .getByLabel(/vendor/i)
    .first()
    .fill('V1');
  const any = scope.getByLabel(/any device/i);
  if ((await any.count()) > 0) await any.first().check();
  await button(scope, 'Make code').last().click();
}

/** The device page's own confirmation of a revoke, after its opener: a Confirm, or a second Revoke. */
async function confirmRevoke(page: Page): Promise<void> {
  const both = main(page).getByRole('button', { name: /^(Confirm|Revoke)$/ });
  await expect.poll(() => both.count(), { timeout: BOUND }).toBeGreaterThan(1);
  await both.last().click();
}

/** A page on another loopback port whose script posts, with credentials, to the admin API: a bulk reject. */
async function serveForeignPage(adminOrigin: string): Promise<{ url: string; close(): Promise<void> }> {
  const html = `<!doctype html><title>elsewhere</title><script>
fetch(${JSON.stringify(`${adminOrigin}/admin/v1/pending/reject`)}, { method: 'POST', mode: 'no-cors', credentials: 'include' });
</script>`;
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // The browser keeps its connection alive: closed here, not after its idle timeout.
        server.closeAllConnections();
      }),
  };
}
