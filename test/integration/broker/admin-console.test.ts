import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminRawReply, adminCall, adminRaw } from '../../helpers/admin-client.js';
import { type AdminRig, startAdminRig } from '../../helpers/admin-rig.js';

// The operator's console as a real `botlink broker` child serves it from its bundle (DESIGN §3.8): the page and its
// two assets under /admin/, with the page's headers exactly, nothing inline, nothing from another origin.
let a: AdminRig;
let admin: string;

beforeAll(async () => {
  a = await startAdminRig('test-broker-admin-console-');
  ({ admin } = a);
}, 120_000);

afterAll(() => a?.close());

const CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

function expectConsoleHeaders(r: AdminRawReply, type: string): void {
  expect(r.status).toBe(200);
  expect(r.headers['content-type']).toBe(type);
  expect(r.headers['content-security-policy']).toBe(CSP);
  expect(r.headers['x-content-type-options']).toBe('nosniff');
  expect(r.headers['referrer-policy']).toBe('same-origin');
  expect(r.headers['cache-control']).toBe('no-store');
  expect(Object.keys(r.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  expect(Number(r.headers['content-length'])).toBe(r.body.length);
}

/** The page's script and stylesheet, by the paths its tags name. */
function assetsOf(html: string): { scripts: string[]; styles: string[] } {
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)].map(([, attrs = '', body = '']) => {
    expect(body, 'an inline script body').toBe('');
    return /\bsrc="([^"]+)"/.exec(attrs)?.[1] ?? '';
  });
  const styles = [...html.matchAll(/<link\b[^>]*\brel="stylesheet"[^>]*>/gi)].map(([tag]) => /\bhref="([^"]+)"/.exec(tag)?.[1] ?? '');
  return { scripts, styles };
}

describe('the console at /admin/', () => {
  it('serves the page without a caller, with the CSP and headers of §3.8, its assets same-origin and nothing inline', async () => {
    const page = await adminRaw(admin, '/admin/');
    expectConsoleHeaders(page, 'text/html; charset=utf-8');
    const html = page.body.toString('utf8');
    expect(html).toMatch(/^<!doctype html>/i);
    const { scripts, styles } = assetsOf(html);
    expect(scripts).toHaveLength(1);
    expect(styles).toHaveLength(1);
    for (const path of [...scripts, ...styles]) expect(path).toMatch(/^\/admin\/console\.[0-9a-f]{12}\.(js|css)$/);
    expect(html).not.toMatch(/<style\b/i);
    expect(html).not.toMatch(/\sstyle=/i);
    expect(html).not.toMatch(/\son[a-z]+=/i);
    // Every URL the page names is a path of this origin: no scheme, no host, no protocol-relative URL.
    for (const [, url] of html.matchAll(/\b(?:src|href|action)="([^"]*)"/gi)) expect(url).toMatch(/^\/admin\/[^/]/);

    const head = await adminRaw(admin, '/admin/', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect(head.headers['content-length']).toBe(page.headers['content-length']);
    expect(head.headers['content-security-policy']).toBe(CSP);
  });

  it("serves the bundle's script and stylesheet with their types, plain or gzip, the script building no markup from strings", async () => {
    const { scripts, styles } = assetsOf((await adminRaw(admin, '/admin/')).body.toString('utf8'));
    const js = await adminRaw(admin, scripts[0] ?? '');
    expectConsoleHeaders(js, 'text/javascript; charset=utf-8');
    const css = await adminRaw(admin, styles[0] ?? '');
    expectConsoleHeaders(css, 'text/css; charset=utf-8');
    const script = js.body.toString('utf8');
    // The contract's names are in the script the broker's bundle carries.
    for (const name of ['Admin token', 'Sign in', 'Sign out', 'Reject all', 'Reset limits', 'Make code', 'new-code', 'Preauth'])
      expect(script, name).toContain(name);
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
    expect(css.body.toString('utf8')).toContain(':focus-visible');

    const zipped = await adminRaw(admin, scripts[0] ?? '', { headers: { 'accept-encoding': 'br, gzip;q=0.8' } });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers['vary']).toBe('Accept-Encoding');
    expect(zipped.headers['content-security-policy']).toBe(CSP);
    expect(gunzipSync(zipped.body).equals(js.body)).toBe(true);
    expect(zipped.body.length).toBeLessThan(js.body.length / 2);
    const refused = await adminRaw(admin, '/admin/', { headers: { 'accept-encoding': 'gzip;q=0, identity' } });
    expect(refused.headers['content-encoding']).toBeUndefined();
  });

  it('answers 405 to any method but GET and HEAD, 404 to an asset it does not have, and 400 to a foreign Host', async () => {
    const { scripts } = assetsOf((await adminRaw(admin, '/admin/')).body.toString('utf8'));
    for (const [method, path] of [
      ['POST', '/admin/'],
      ['PUT', '/admin/'],
      ['DELETE', scripts[0] ?? ''],
      ['OPTIONS', '/admin/'],
    ] as const) {
      const r = await adminCall(admin, path, { method, headers: { origin: admin } });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.json['code']).toBe('method-not-allowed');
      expect(r.headers['content-security-policy']).toBeUndefined();
    }
    for (const path of ['/admin/console.000000000000.js', '/admin/index.html', '/admin/v1', '/admin/x/']) {
      const r = await adminCall(admin, path);
      expect(r.status, path).toBe(404);
      expect(r.json['code']).toBe('not-found');
    }
    const foreign = await adminCall(admin, '/admin/', { headers: { host: 'evil.example' } });
    expect(foreign.status).toBe(400);
    const bare = await adminRaw(admin, '/admin');
    expect(bare.status).toBe(308);
    expect(bare.headers['location']).toBe('/admin/');
    // The API beside it is unchanged: a caller is still needed there.
    expect((await adminCall(admin, '/admin/v1/me')).status).toBe(401);
  });
});
