import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { type AdminReply, adminCall, sessionOf } from '../../helpers/admin-client.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { type Bundle, privateDaemonBundle } from '../../helpers/bundle.js';

// The admin listener of a real `botlink broker` (DESIGN §3.8): admin tokens made by the command line, roles,
// console sessions and the Origin rules, the listener's own refusals, and the API's pages, counts and actions.
const SECRET = 'SK-admin-5d1f';
let bundle: Bundle;
let cloud: TestService;
let rig: BrokerRig;
let broker: BrokerProc;
let admin: string;
let operator: string;
let viewer: string;

async function newToken(name: string, role: string, extra: string[] = []): Promise<string> {
  const r = await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', name, '--role', role, ...extra]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim().split('\n').at(-1) ?? '';
}

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-broker-admin-');
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({
    bundle: bundle.file,
    cloudUrl: cloud.url,
    secret: SECRET,
    extra: { adminListen: '127.0.0.1:0', enrollPerMinute: 100 },
  });
  broker = await rig.start();
  admin = await broker.adminUrl();
  [operator, viewer] = await Promise.all([newToken('ops', 'operator'), newToken('watcher', 'viewer')]);
}, 120_000);

afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
});

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
    const token = await newToken('short-lived', 'viewer', ['--ttl', '600']);
    const listed = await rig.cli(['admin-token', 'list', '--config', rig.configFile, '--json']);
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
    const again = await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', 'ops', '--role', 'viewer']);
    expect(again.code).toBe(65);

    const session = await adminCall(admin, '/admin/session', { method: 'POST', body: { token }, headers: { origin: admin } });
    expect(session.status).toBe(200);
    const revoked = await rig.cli(['admin-token', 'revoke', '--config', rig.configFile, 'short-lived']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain('1 session(s) ended');
    expect((await get('/admin/v1/me', token)).status).toBe(401);
    expect((await adminCall(admin, '/admin/v1/me', { cookie: sessionOf(session) })).status).toBe(401);
    expect((await rig.cli(['admin-token', 'revoke', '--config', rig.configFile, 'short-lived'])).code).toBe(65);
    expect((await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', 'x', '--role', 'root'])).code).toBe(64);
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

describe('the admin API over a fleet', () => {
  const devices = Array.from({ length: 4 }, () => new TestDevice());
  const ids = ['a_1', 'ab1', 'a.1', 'b-1'];
  const botIds: string[] = [];

  beforeAll(async () => {
    const code = await rig.code(['--uses', '10']);
    for (const [i, d] of devices.entries()) botIds.push(await d.mustEnroll(broker.url, { code, deviceId: ids[i] }));
  });

  it('counts devices by state and version, kept by the store, through enrollment, a version report and a revoke', async () => {
    const summary = async () =>
      (await get('/admin/v1/summary')).json as { devices: Record<string, number>; versions: Record<string, number> };
    const before = await summary();
    expect(before.devices).toMatchObject({ active: 4 });
    const [first] = devices;
    const reply = await first?.token(broker.url, { agent: { version: '7.1.0' } });
    expect(reply?.status).toBe(200);
    const after = await summary();
    expect(after.versions['7.1.0']).toBe(1);
    expect(after.versions['unknown']).toBe(3);
    // The token just issued reaches the last hour's count with its audit batch.
    let lastHour = { tokens: 0 };
    for (const until = Date.now() + 10_000; lastHour.tokens === 0 && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      lastHour = (await get('/admin/v1/summary')).json['lastHour'] as typeof lastHour;
    }
    expect(lastHour.tokens).toBe(1);

    const revoked = await post(`/admin/v1/devices/${botIds[3]}/revoke`, { displace: false });
    expect(revoked.status).toBe(200);
    expect(revoked.json).toEqual({ revoked: 1 });
    expect((await summary()).devices).toMatchObject({ active: 3, revoked: 1 });
    expect((await post(`/admin/v1/devices/${botIds[3]}/revoke`, {})).status).toBe(409);
    expect((await post('/admin/v1/devices/bot-unknown/revoke', {})).status).toBe(404);
    // The audit names the token as the actor of what it did.
    let events: { actor: string; outcome: string }[] = [];
    const readEvents = async (): Promise<void> => {
      events = (await get(`/admin/v1/audit?botId=${botIds[3]}&action=revoke`)).json['events'] as { actor: string; outcome: string }[];
    };
    await readEvents();
    // The audit is written in batches: within its flush, never at once.
    for (const until = Date.now() + 10_000; events.length < 2 && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      await readEvents();
    }
    // Newest first: the second revoke found nothing active, the first revoked the key.
    expect(events.map((e) => [e.actor, e.outcome])).toEqual([
      ['ops', 'none-active'],
      ['ops', 'revoked'],
    ]);
    expect((await devices[3]?.token(broker.url))?.status).toBe(403);
  });

  it('revokes displacing by default, the displacement audited as the token’s name', async () => {
    const revoked = await adminCall(admin, `/admin/v1/devices/${botIds[2]}/revoke`, { method: 'POST', token: operator });
    expect(revoked.json).toEqual({ revoked: 1 });
    let events: { actor: string; outcome: string }[] = [];
    for (const until = Date.now() + 10_000; events.length === 0 && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      events = (await get(`/admin/v1/audit?botId=${botIds[2]}&action=displace`)).json['events'] as typeof events;
    }
    expect(events.map((e) => e.actor)).toEqual(['ops']);
    expect((await devices[2]?.token(broker.url))?.status).toBe(403);
  });

  it('pages devices with cursors bound to their filters, q a literal prefix, limit ≤ 500', async () => {
    const page = async (query: string) =>
      (await get(`/admin/v1/devices?${query}`)).json as { devices: { deviceId: string }[]; next: string | null };
    const seen: string[] = [];
    let next: string | null = null;
    do {
      const r: { devices: { deviceId: string }[]; next: string | null } = await page(
        `vendorId=V1&limit=1${next ? `&cursor=${encodeURIComponent(next)}` : ''}`,
      );
      seen.push(...r.devices.map((d) => d.deviceId));
      next = r.next;
    } while (next !== null);
    expect(seen).toEqual([...ids].sort());
    const first = await page('vendorId=V1&limit=1');
    const cursor = encodeURIComponent(first.next ?? '');
    expect((await get(`/admin/v1/devices?limit=1&cursor=${cursor}`)).status).toBe(400);
    expect((await get(`/admin/v1/devices?vendorId=V1&state=active&limit=1&cursor=${cursor}`)).status).toBe(400);
    expect((await get(`/admin/v1/devices?vendorId=V1&limit=1&cursor=${cursor}x`)).status).toBe(400);
    expect((await get(`/admin/v1/devices?vendorId=V1&limit=1&cursor=${cursor}`)).status).toBe(200);
    expect((await page(`q=${encodeURIComponent('a_')}`)).devices.map((d) => d.deviceId)).toEqual(['a_1']);
    expect((await page(`q=${encodeURIComponent('a%')}`)).devices).toEqual([]);
    expect((await page(`q=${encodeURIComponent('%')}`)).devices).toEqual([]);
    expect((await page(`q=${encodeURIComponent('a.')}`)).devices.map((d) => d.deviceId)).toEqual(['a.1']);
    expect((await page('state=revoked')).devices.map((d) => d.deviceId)).toEqual(['a.1', 'b-1']);
    expect((await get('/admin/v1/devices?limit=501')).status).toBe(400);
    expect((await get('/admin/v1/devices?state=weird')).status).toBe(400);
    expect((await get('/admin/v1/devices?sort=x')).status).toBe(400);

    const one = (await get(`/admin/v1/devices/${botIds[0]}`)).json;
    expect(one).toMatchObject({ botId: botIds[0], deviceId: 'a_1', vendorId: 'V1', state: 'active', agentVersion: '7.1.0', name: null });
    expect(one['keys']).toEqual([{ keyId: devices[0]?.keyId, state: 'active', createdAt: expect.any(Number), retiredAt: null }]);
    expect((await get(`/admin/v1/keys/${devices[3]?.keyId}`)).json).toMatchObject({ state: 'revoked', botId: botIds[3] });
    expect((await get(`/admin/v1/keys/${'0'.repeat(32)}`)).status).toBe(404);
  });

  it('makes a code shown once (201), lists it without the code, cancels it; an unknown vendor is 409', async () => {
    expect((await post('/admin/v1/codes', { vendorId: 'V1' })).status).toBe(400);
    expect((await post('/admin/v1/codes', { vendorId: 'V1', kind: 'adopt', anyDevice: true })).status).toBe(400);
    const unknown = await post('/admin/v1/codes', { vendorId: 'NOPE', anyDevice: true });
    expect(unknown.status).toBe(409);
    const made = await post('/admin/v1/codes', { vendorId: 'V1', deviceId: 'SN-CODE', uses: 1 });
    expect(made.status).toBe(201);
    const { id, code } = made.json as { id: string; code: string };
    const listed = await get('/admin/v1/codes?vendorId=V1');
    expect(JSON.stringify(listed.json)).not.toContain(code);
    expect((listed.json['codes'] as { id: string }[]).map((c) => c.id)).toContain(id);
    expect((await adminCall(admin, `/admin/v1/codes/${id}`, { method: 'DELETE', token: operator })).json).toEqual({});
    expect((await adminCall(admin, `/admin/v1/codes/${id}`, { method: 'DELETE', token: operator })).status).toBe(404);
    expect((await new TestDevice().enroll(broker.url, { code, deviceId: 'SN-CODE' })).status).toBe(403);
  });

  it('pre-authorises good lines, tells the bad ones by line, lists and removes', async () => {
    const key = new TestDevice();
    const lines = [
      `SN-P1,${key.publicKey}`,
      'garbage',
      `SN-P1,${new TestDevice().publicKey}`,
      '# comment',
      `a_1,${new TestDevice().publicKey}`,
    ];
    const added = await post('/admin/v1/preauth', { vendorId: 'V1', lines });
    expect(added.status).toBe(200);
    expect(added.json['added']).toBe(1);
    // Line 5's device is enrolled already.
    expect((added.json['rejected'] as { line: number }[]).map((r) => r.line)).toEqual([2, 3, 5]);
    const listed = (await get('/admin/v1/preauth?vendorId=V1')).json['preauth'] as { deviceId: string; keyId: string }[];
    expect(listed).toEqual([{ vendorId: 'V1', deviceId: 'SN-P1', keyId: key.keyId, addedAt: expect.any(Number) }]);
    expect((await adminCall(admin, '/admin/v1/preauth/V1/SN-P1', { method: 'DELETE', token: operator })).json).toEqual({});
    expect((await adminCall(admin, '/admin/v1/preauth/V1/SN-P1', { method: 'DELETE', token: operator })).status).toBe(404);
  });
});
