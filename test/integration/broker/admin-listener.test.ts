import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminReply, adminCall, sessionOf } from '../../helpers/admin-client.js';
import { type AdminRig, startAdminRig } from '../../helpers/admin-rig.js';

// The admin listener of a real `botlink broker` (DESIGN §3.8): admin tokens made by the command line, roles,
// the listener's own refusals, console sessions and the Origin rules.
let a: AdminRig;
let admin: string;
let operator: string;
let viewer: string;

beforeAll(async () => {
  a = await startAdminRig('test-broker-admin-listener-');
  ({ admin, operator, viewer } = a);
}, 120_000);

afterAll(() => a?.close());

const get = (path: string, token = operator) => adminCall(admin, path, { token });
const post = (path: string, body: unknown, token = operator) => adminCall(admin, path, { method: 'POST', token, body });

function expectNoCorsAndNoStore(r: AdminReply): void {
  expect(Object.keys(r.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  expect(r.headers['cache-control']).toBe('no-store');
  expect(r.headers['x-content-type-options']).toBe('nosniff');
}

describe('admin tokens on the command line', () => {
  it('prints a blk_ token once, lists it without it, never reuses a name, and revoke ends it and says how many sessions', async () => {
    expect(operator).toMatch(/^blk_[A-Za-z0-9_-]{32}$/);
    const token = await a.newToken('short-lived', 'viewer', ['--ttl', '600']);
    const listed = await a.rig.cli(['admin-token', 'list', '--config', a.rig.configFile, '--json']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain('blk_');
    const tokens = JSON.parse(listed.stdout) as { name: string; role: string; expiresAt: number }[];
    expect(tokens.map((t) => [t.name, t.role])).toEqual(
      expect.arrayContaining([
        ['ops', 'operator'],
        ['short-lived', 'viewer'],
      ]),
    );
    const short = tokens.find((t) => t.name === 'short-lived');
    expect(short?.expiresAt).toBeLessThanOrEqual(Date.now() + 600_000);
    const again = await a.rig.cli(['admin-token', 'create', '--config', a.rig.configFile, '--name', 'ops', '--role', 'viewer']);
    expect(again.code).toBe(65);

    const session = await adminCall(admin, '/admin/session', { method: 'POST', body: { token }, headers: { origin: admin } });
    expect(session.status).toBe(200);
    const revoked = await a.rig.cli(['admin-token', 'revoke', '--config', a.rig.configFile, 'short-lived']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain('1 session(s) ended');
    expect((await get('/admin/v1/me', token)).status).toBe(401);
    expect((await adminCall(admin, '/admin/v1/me', { cookie: sessionOf(session) })).status).toBe(401);
    expect((await a.rig.cli(['admin-token', 'revoke', '--config', a.rig.configFile, 'short-lived'])).code).toBe(65);
    expect((await a.rig.cli(['admin-token', 'create', '--config', a.rig.configFile, '--name', 'x', '--role', 'root'])).code).toBe(64);
  });
});

describe('the admin listener', () => {
  it('says who calls, and refuses a viewer every action (403), a stranger (401), and Bearer with a cookie (400)', async () => {
    expect((await get('/admin/v1/me', viewer)).json).toEqual({ name: 'watcher', role: 'viewer', expiresAt: expect.any(Number) });
    for (const [path, body] of [
      ['/admin/v1/devices/bot-x/revoke', {}],
      ['/admin/v1/devices/bot-x/reset-limits', undefined],
      ['/admin/v1/codes', { vendorId: 'V1', anyDevice: true }],
      ['/admin/v1/preauth', { vendorId: 'V1', lines: [] }],
    ] as const) {
      const r = await post(path, body, viewer);
      expect(r.status, path).toBe(403);
      expect(r.json['code']).toBe('forbidden');
    }
    expect((await adminCall(admin, '/admin/v1/codes/0123456789abcdef0123', { method: 'DELETE', token: viewer })).status).toBe(403);
    expect((await adminCall(admin, '/admin/v1/me')).status).toBe(401);
    expect((await get('/admin/v1/me', 'blk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).toBe(401);
    expect((await get('/admin/v1/me', 'not-a-token')).status).toBe(401);
    const both = await adminCall(admin, '/admin/v1/me', { token: operator, cookie: 'abc' });
    expect(both.status).toBe(400);
  });

  it('tells a source past 30 failed authentications in a minute 429, in memory, and no other source', async () => {
    const from = '127.0.0.9';
    const bad = () => adminCall(admin, '/admin/v1/me', { token: 'blk_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB', from });
    // 31 are refused 401, then 429; a minute that ends meanwhile starts the count again, so at most twice as many.
    let refused = 0;
    let held = await bad();
    for (; held.status === 401 && refused < 100; held = await bad()) refused += 1;
    expect(held.status).toBe(429);
    expect(refused).toBeGreaterThanOrEqual(31);
    expect(refused).toBeLessThanOrEqual(62);
    expect(Number(held.headers['retry-after'])).toBeGreaterThan(0);
    expect((await adminCall(admin, '/admin/v1/me', { token: operator, from })).status).toBe(429);
    expect((await adminCall(admin, '/admin/v1/me', { token: operator, from: '127.0.0.10' })).status).toBe(200);
  });

  it('answers only its own Host (400), OPTIONS with 405, never a CORS header, and every answer no-store and nosniff', async () => {
    const foreign = await adminCall(admin, '/admin/v1/me', { token: operator, headers: { host: 'evil.example' } });
    expect(foreign.status).toBe(400);
    const options = await adminCall(admin, '/admin/v1/me', {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(options.status).toBe(405);
    for (const r of [foreign, options, await get('/admin/v1/me'), await adminCall(admin, '/admin/v1/me'), await get('/admin/v1/nothing')]) {
      expectNoCorsAndNoStore(r);
    }
  });

  it('answers a huge unauthenticated body 401 from its headers, without reading it, and closes the connection', async () => {
    // 64 KiB of a gigabyte: a listener that read the body before deciding would wait for the rest (then 408).
    const { status, closed } = await new Promise<{ status: number; closed: boolean }>((resolve, reject) => {
      const url = new URL('/admin/v1/codes', admin);
      const req = request(url, {
        method: 'POST',
        agent: false,
        headers: { host: url.host, 'content-type': 'application/json', 'content-length': String(1024 * 1024 * 1024) },
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        res.resume();
        resolve({ status: res.statusCode ?? 0, closed: res.headers.connection === 'close' });
      });
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      req.write(Buffer.alloc(64 * 1024, 0x20));
    });
    expect(status).toBe(401);
    expect(closed).toBe(true);
  });

  it('takes only JSON bodies of at most 1 MiB', async () => {
    const text = await adminCall(admin, '/admin/v1/codes', {
      method: 'POST',
      token: operator,
      headers: { 'content-type': 'text/plain', 'content-length': '2' },
      body: undefined,
    });
    expect(text.status).toBe(400);
    const big = await post('/admin/v1/preauth', { vendorId: 'V1', lines: ['x'.repeat(1024 * 1024)] });
    expect(big.status).toBe(413);
  });
});

describe('console sessions', () => {
  const signIn = (headers: Record<string, string>, token = operator) =>
    adminCall(admin, '/admin/session', { method: 'POST', body: { token }, headers });

  it('signs in only from the console’s origin, into an HttpOnly SameSite=Strict cookie for /admin, never adopting one sent', async () => {
    expect((await signIn({})).status).toBe(403);
    expect((await signIn({ origin: 'null' })).status).toBe(403);
    expect((await signIn({ origin: 'https://evil.example' })).status).toBe(403);
    expect((await signIn({ origin: admin }, 'blk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).toBe(401);
    const ok = await signIn({ origin: admin });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ name: 'ops', role: 'operator' });
    const cookie = String(([] as string[]).concat(ok.headers['set-cookie'] ?? [])[0]);
    expect(cookie).toMatch(/^botlink_admin=[A-Za-z0-9_-]{43}; Path=\/admin; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    const again = await adminCall(admin, '/admin/session', {
      method: 'POST',
      body: { token: operator },
      cookie: sessionOf(ok),
      headers: { origin: admin },
    });
    expect(sessionOf(again)).not.toBe(sessionOf(ok));
  });

  it('applies the Origin and Sec-Fetch-Site table to every cookie request, and signs out', async () => {
    const session = sessionOf(await signIn({ origin: admin }));
    const me = (headers: Record<string, string>, method = 'GET') => adminCall(admin, '/admin/v1/me', { method, cookie: session, headers });
    const table: [string, Record<string, string>, number][] = [
      ['GET', {}, 200],
      ['GET', { origin: admin }, 200],
      ['GET', { origin: 'https://evil.example' }, 403],
      ['GET', { origin: 'null' }, 403],
      ['GET', { 'sec-fetch-site': 'same-origin' }, 200],
      ['GET', { 'sec-fetch-site': 'none' }, 200],
      ['GET', { 'sec-fetch-site': 'cross-site' }, 403],
      ['GET', { 'sec-fetch-site': 'same-site' }, 403],
      ['HEAD', { 'sec-fetch-site': 'cross-site' }, 403],
    ];
    for (const [method, headers, status] of table)
      expect((await me(headers, method)).status, `${method} ${JSON.stringify(headers)}`).toBe(status);
    // A POST with the cookie: Origin equal to adminOrigin, else 403 before anything else is looked at.
    const reset = (headers: Record<string, string>) =>
      adminCall(admin, '/admin/v1/devices/bot-none/reset-limits', { method: 'POST', cookie: session, headers });
    expect((await reset({})).status).toBe(403);
    expect((await reset({ origin: 'null' })).status).toBe(403);
    expect((await reset({ origin: 'https://evil.example', 'sec-fetch-site': 'same-origin' })).status).toBe(403);
    expect((await reset({ origin: admin })).status).toBe(404);

    expect((await adminCall(admin, '/admin/session', { method: 'DELETE', cookie: session })).status).toBe(403);
    const out = await adminCall(admin, '/admin/session', { method: 'DELETE', cookie: session, headers: { origin: admin } });
    expect(out.status).toBe(200);
    expect(String(([] as string[]).concat(out.headers['set-cookie'] ?? [])[0])).toMatch(/^botlink_admin=; Path=\/admin; Max-Age=0;/);
    expect((await me({})).status).toBe(401);
  });
});
