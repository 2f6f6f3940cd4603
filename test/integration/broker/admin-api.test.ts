import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCall } from '../../helpers/admin-client.js';
import { type AdminRig, startAdminRig } from '../../helpers/admin-rig.js';
import { TestDevice } from '../../helpers/broker-device.js';

// The admin API of a real `botlink broker` (DESIGN §3.8) over a fleet: counts kept by the store, keyset pages and
// cursors, revoke and its displacement, codes and pre-authorisations, each audited as the token's name.
let a: AdminRig;
let admin: string;
let operator: string;

beforeAll(async () => {
  a = await startAdminRig('test-broker-admin-api-');
  ({ admin, operator } = a);
}, 120_000);

afterAll(() => a?.close());

const get = (path: string, token = operator) => adminCall(admin, path, { token });
const post = (path: string, body: unknown, token = operator) => adminCall(admin, path, { method: 'POST', token, body });

describe('the admin API over a fleet', () => {
  const devices = Array.from({ length: 4 }, () => new TestDevice());
  const ids = ['a_1', 'ab1', 'a.1', 'b-1'];
  const botIds: string[] = [];

  beforeAll(async () => {
    const code = await a.rig.code(['--uses', '10']);
    // ab1 enrolls with a name of its own; the others are named by their deviceId (DESIGN §3.7).
    for (const [i, d] of devices.entries())
      botIds.push(await d.mustEnroll(a.broker.url, { code, deviceId: ids[i], ...(i === 1 ? { name: 'Hall "robot" <1>' } : {}) }));
  });

  it('counts devices by state and version, kept by the store, through enrollment, a version report and a revoke', async () => {
    const summary = async () =>
      (await get('/admin/v1/summary')).json as { devices: Record<string, number>; versions: Record<string, number> };
    const before = await summary();
    expect(before.devices).toMatchObject({ active: 4 });
    const [first] = devices;
    const reply = await first?.token(a.broker.url, { agent: { version: '7.1.0' } });
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
    // Not displacing: no later displacement is due either.
    expect(revoked.json).toEqual({ revoked: 1, displaceAt: null });
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
    expect((await devices[3]?.token(a.broker.url))?.status).toBe(403);
  });

  it('revokes displacing by default, the displacement audited as the token’s name', async () => {
    const revoked = await adminCall(admin, `/admin/v1/devices/${botIds[2]}/revoke`, { method: 'POST', token: operator });
    // The answer tells how the displacement went (the cloud closed the socket, if any) and when the next is due.
    expect(revoked.json).toMatchObject({ revoked: 1, displacement: { outcome: 'displaced' } });
    expect(Object.keys(revoked.json).sort()).toEqual(['displaceAt', 'displacement', 'revoked']);
    let events: { actor: string; outcome: string }[] = [];
    for (const until = Date.now() + 10_000; events.length === 0 && Date.now() < until; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      events = (await get(`/admin/v1/audit?botId=${botIds[2]}&action=displace`)).json['events'] as typeof events;
    }
    expect(events.map((e) => e.actor)).toEqual(['ops']);
    expect((await devices[2]?.token(a.broker.url))?.status).toBe(403);
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
    expect(one).toMatchObject({ botId: botIds[0], deviceId: 'a_1', vendorId: 'V1', state: 'active', agentVersion: '7.1.0', name: 'a_1' });
    expect((await get(`/admin/v1/devices/${botIds[1]}`)).json).toMatchObject({ deviceId: 'ab1', name: 'Hall "robot" <1>' });
    expect((await page('q=ab1')).devices).toEqual([expect.objectContaining({ deviceId: 'ab1', name: 'Hall "robot" <1>' })]);
    expect(one['keys']).toEqual([{ keyId: devices[0]?.keyId, state: 'active', createdAt: expect.any(Number), retiredAt: null }]);
    expect((await get(`/admin/v1/keys/${devices[3]?.keyId}`)).json).toMatchObject({ state: 'revoked', botId: botIds[3], name: 'b-1' });
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
    expect((await new TestDevice().enroll(a.broker.url, { code, deviceId: 'SN-CODE' })).status).toBe(403);
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

  it('the pending queue: listed, a wrong serial refused (409), accepted (the device then enrolls), another rejected; a viewer may only look', async () => {
    const waiting = [new TestDevice(), new TestDevice()];
    for (const [i, d] of waiting.entries()) {
      const asked = await d.enroll(a.broker.url, { vendorId: 'V1', deviceId: `SN-WAIT-${i}`, name: '<b>hall</b>' });
      expect(asked.status, JSON.stringify(asked.json)).toBe(202);
    }
    const listed = await get('/admin/v1/pending?vendorId=V1&q=SN-WAIT-');
    expect(listed.status).toBe(200);
    expect(listed.json['pending']).toEqual(
      waiting
        .map((d, i) => ({
          keyId: d.keyId,
          deviceId: `SN-WAIT-${i}`,
          vendorId: 'V1',
          name: '<b>hall</b>',
          source: '127.0.0.1',
          firstAsked: expect.any(Number),
          lastAsked: expect.any(Number),
          duplicates: 0,
        }))
        .sort((x, y) => (x.deviceId < y.deviceId ? -1 : 1)),
    );
    expect(((await get('/admin/v1/summary')).json['devices'] as Record<string, number>)['pending']).toBe(2);
    // A source block is tested over the keyset's pages; a cursor bound to it pages on.
    const bySource = async (source: string, limit = 100) =>
      (await get(`/admin/v1/pending?source=${encodeURIComponent(source)}&limit=${limit}`)).json;
    expect(((await bySource('127.0.0.0/8'))['pending'] as unknown[]).length).toBe(2);
    expect((await bySource('10.0.0.0/8'))['pending']).toEqual([]);
    const firstOfBlock = await bySource('127.0.0.1', 1);
    const rest = await get(`/admin/v1/pending?source=127.0.0.1&limit=1&cursor=${encodeURIComponent(String(firstOfBlock['next']))}`);
    expect(
      [...(firstOfBlock['pending'] as { keyId: string }[]), ...(rest.json['pending'] as { keyId: string }[])].map((p) => p.keyId).sort(),
    ).toEqual(waiting.map((d) => d.keyId).sort());
    expect((await get('/admin/v1/pending?source=not-an-address')).status).toBe(400);
    // The devices pages list the waiting keys too, with the name they asked with.
    const pendingLines = (await get('/admin/v1/devices?state=pending&q=SN-WAIT-')).json['devices'];
    expect(pendingLines).toEqual(
      waiting
        .map((d, i) => ({
          botId: null,
          deviceId: `SN-WAIT-${i}`,
          vendorId: 'V1',
          name: '<b>hall</b>',
          keyId: d.keyId,
          state: 'pending',
          lastSeen: expect.any(Number),
          agentVersion: null,
          lastRefusal: null,
        }))
        .sort((x, y) => (x.deviceId < y.deviceId ? -1 : 1)),
    );
    const [first, second] = waiting as [TestDevice, TestDevice];
    expect((await post(`/admin/v1/pending/${first.keyId}/accept`, { deviceId: 'SN-WAIT-0' }, a.viewer)).status).toBe(403);
    expect((await post(`/admin/v1/pending/${first.keyId}/accept`, { deviceId: 'SN-WAIT-1' })).status).toBe(409);
    const accepted = await post(`/admin/v1/pending/${first.keyId}/accept`, { deviceId: 'SN-WAIT-0' });
    expect(accepted.status, JSON.stringify(accepted.json)).toBe(200);
    expect(accepted.json).toEqual({ state: 'active', botId: expect.stringMatching(/\S/) });
    const again = await first.enroll(a.broker.url, { vendorId: 'V1', deviceId: 'SN-WAIT-0' });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ botId: accepted.json['botId'], keyId: first.keyId });
    // The accepted key keeps the name it waited with.
    expect((await get(`/admin/v1/keys/${first.keyId}`)).json).toMatchObject({ state: 'active', name: '<b>hall</b>' });
    expect((await get(`/admin/v1/devices/${accepted.json['botId']}`)).json).toMatchObject({ name: '<b>hall</b>' });
    expect((await post(`/admin/v1/pending/${second.keyId}/reject`, {})).json).toEqual({ state: 'rejected' });
    expect((await post(`/admin/v1/pending/${second.keyId}/reject`, {})).status).toBe(404);
    expect((await second.enroll(a.broker.url, { vendorId: 'V1', deviceId: 'SN-WAIT-1' })).status).toBe(403);
    expect(((await get('/admin/v1/summary')).json['devices'] as Record<string, number>)['rejected']).toBe(1);
    expect((await get('/admin/v1/devices?state=rejected')).json['devices']).toEqual([
      expect.objectContaining({ keyId: second.keyId, deviceId: 'SN-WAIT-1', state: 'rejected', botId: null }),
    ]);
    expect((await get(`/admin/v1/keys/${second.keyId}`)).json).toMatchObject({ state: 'rejected', deviceId: 'SN-WAIT-1' });
  });
});
