import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AdminTokenRow } from '../../../src/broker/store/admin-types.js';
import type { BrokerStore, PreauthRow } from '../../../src/broker/store/types.js';
import { useHarness } from '../../helpers/harness.js';
import { storeBackends } from '../../helpers/store-backends.js';
import { H } from '../../helpers/time.js';
import { auditRow, byCode, codeRow, newKey } from '../../helpers/broker-store.js';

// The admin API's part of the store contract (AdminBook, FleetViews: DESIGN §3.8), on both databases: admin tokens
// and sessions kept as HMACs, the counts the triggers keep, and keyset pages.

const { sqlite, postgres, open } = storeBackends(useHarness(), 'botlink-broker-admin-');

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const token = (name: string, over: Partial<AdminTokenRow> = {}): AdminTokenRow => ({
  name,
  hmac: hex(32),
  role: 'viewer',
  createdAt: Date.now(),
  expiresAt: Date.now() + H,
  ...over,
});
const preauthRow = (deviceId: string, vendorId = 'V1'): PreauthRow => ({ ...newKey(), deviceId, vendorId, createdAt: Date.now() });

/** The kept counts as `{state: {…}, version: {…}}`, zeros left out. */
async function counts(store: BrokerStore): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = { state: {}, version: {} };
  for (const c of await store.admin.keptCounts()) out[c.kind] = { ...out[c.kind], [c.name]: c.n };
  return out;
}

async function report(
  store: BrokerStore,
  key: { keyId: string; publicKey: string },
  agentVersion: string,
  now = Date.now(),
): Promise<void> {
  await store.spendVerified({ ...key, nonce: hex(16), keepUntil: Date.now() + 60_000, now, agentVersion });
}

describe.each([sqlite, postgres])('the admin store on $kind', (backend) => {
  it('keeps admin tokens by HMAC, never reuses a name, and a revoke ends every session the token opened at once', async () => {
    const spec = await backend.fresh();
    const [a, b] = [await open(spec), await open(spec)];
    const now = Date.now();
    const alice = token('alice', { role: 'operator' });
    expect(await a.admin.addAdminToken(alice)).toBe(true);
    expect(await a.admin.addAdminToken(token('alice'))).toBe(false);
    expect(await a.admin.adminTokenByHmac(alice.hmac, now)).toEqual({
      name: 'alice',
      role: 'operator',
      expiresAt: alice.expiresAt,
      lastUsedAt: null,
    });
    expect(await a.admin.adminTokenByHmac(hex(32), now)).toBeUndefined();
    expect(await a.admin.adminTokenByHmac(alice.hmac, alice.expiresAt)).toBeUndefined();

    await a.admin.touchAdminToken('alice', now);
    await a.admin.touchAdminToken('alice', now + 30_000);
    expect((await a.admin.adminTokenByHmac(alice.hmac, now))?.lastUsedAt).toBe(now);
    await a.admin.touchAdminToken('alice', now + 60_000);
    expect((await a.admin.adminTokenByHmac(alice.hmac, now))?.lastUsedAt).toBe(now + 60_000);

    const s1 = { hmac: hex(32), tokenName: 'alice', createdAt: now, expiresAt: now + H };
    const s2 = { hmac: hex(32), tokenName: 'alice', createdAt: now, expiresAt: now + H };
    await a.admin.openAdminSession(s1, now);
    await a.admin.openAdminSession(s2, now);
    expect(await b.admin.adminSessionByHmac(s1.hmac, now)).toMatchObject({ name: 'alice', role: 'operator', sessionExpiresAt: now + H });
    expect(await b.admin.adminSessionByHmac(s1.hmac, now + H)).toBeUndefined();
    expect(await a.admin.endAdminSession(s2.hmac)).toBe('alice');
    expect(await a.admin.endAdminSession(s2.hmac)).toBeUndefined();

    await a.admin.openAdminSession({ ...s2, hmac: hex(32) }, now);
    expect(await a.admin.revokeAdminToken('alice', now)).toEqual({ sessions: 2 });
    expect(await a.admin.revokeAdminToken('alice', now)).toBeUndefined();
    expect(await a.admin.revokeAdminToken('nobody', now)).toBeUndefined();
    expect(await b.admin.adminTokenByHmac(alice.hmac, now)).toBeUndefined();
    expect(await b.admin.adminSessionByHmac(s1.hmac, now)).toBeUndefined();
    expect(await a.admin.addAdminToken(token('alice'))).toBe(false);
    expect(await a.admin.listAdminTokens()).toEqual([
      { name: 'alice', role: 'operator', createdAt: alice.createdAt, expiresAt: alice.expiresAt, lastUsedAt: now + 60_000, revokedAt: now },
    ]);
  });

  it('keeps the device counts by state and version through enrollment, version reports, rotation, revoke, replace and preauth', async () => {
    const store = await open(await backend.fresh());
    const code = codeRow({ usesLeft: 3 });
    await store.addCode(code);
    const a = byCode(code, { deviceId: 'SN-A', botId: 'bot-A' });
    const b = byCode(code, { deviceId: 'SN-B', botId: 'bot-B' });
    for (const c of [a, b]) expect((await store.enroll(c)).outcome).toBe('ok');
    await store.addPreauth([preauthRow('SN-P'), preauthRow('SN-Q')]);
    expect(await counts(store)).toEqual({ state: { active: 2, preauthorized: 2 }, version: { '': 2 } });

    await report(store, a.key, '1.0.0');
    await report(store, b.key, '1.0.0');
    await report(store, a.key, '1.1.0');
    expect((await counts(store)).version).toEqual({ '1.0.0': 1, '1.1.0': 1 });

    const rotated = newKey();
    expect(await store.rotate(a.key.keyId, rotated, Date.now())).toBe('ok');
    expect(await counts(store)).toEqual({ state: { active: 2, preauthorized: 2 }, version: { '1.0.0': 1, '': 1 } });

    await store.revoke('bot-B', Date.now());
    expect(await counts(store)).toEqual({ state: { active: 1, revoked: 1, preauthorized: 2 }, version: { '': 1 } });
    await store.revoke('bot-B', Date.now());
    expect((await counts(store)).state?.revoked).toBe(1);

    // A --replace code brings the revoked device back under a new key.
    const replace = codeRow({ kind: 'replace', deviceId: 'SN-B' });
    await store.addCode(replace);
    expect((await store.enroll(byCode(replace, { deviceId: 'SN-B', botId: 'bot-B' }))).outcome).toBe('ok');
    expect(await store.removePreauth('V1', 'SN-P')).toBeDefined();
    expect(await counts(store)).toEqual({ state: { active: 2, preauthorized: 1 }, version: { '': 2 } });
    // A refused enrollment (rolled back) changes no count.
    expect((await store.enroll(byCode(codeRow(), { deviceId: 'SN-C' }))).outcome).toBe('spent');
    expect((await counts(store)).state?.active).toBe(2);
  });

  it('migration 6 counts what a store already holds', async () => {
    const spec = await backend.fresh();
    const key = (id: string, bot: string, state: string) =>
      `INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, reason, created_at, agent_version) VALUES ` +
      `('${id}', 'pk', '${bot}', 'SN-${bot}', 'V1', '${state}', ${state === 'active' ? 'NULL' : "'revoked'"}, 0, ${state === 'active' ? "'2.0.0'" : 'NULL'})`;
    await backend.atVersion(spec, 4, `${key('k1', 'b1', 'active')}; ${key('k2', 'b2', 'revoked')}; ${key('k3', 'b2', 'revoked')}`);
    const store = await open(spec);
    expect(await counts(store)).toEqual({ state: { active: 1, revoked: 1 }, version: { '2.0.0': 1 } });
  });

  it('pages devices by keyset in (vendorId, deviceId, keyId) order, keys and pre-authorised keys merged, q a literal prefix', async () => {
    const store = await open(await backend.fresh());
    const code = codeRow({ usesLeft: 10 });
    await store.addCode(code);
    for (const deviceId of ['a_b', 'axb', 'a%c', 'b-1', 'b-2']) {
      expect((await store.enroll(byCode(code, { deviceId, botId: `bot-${deviceId}` }))).outcome).toBe('ok');
    }
    await store.revoke('bot-b-1', Date.now());
    await store.addPreauth([preauthRow('a-p'), preauthRow('z-p', 'V2')]);
    const page = async (filter: Record<string, string>, limit: number) => {
      const seen: string[] = [];
      let after = null;
      for (;;) {
        const rows = await store.admin.pageDevices(filter, after, limit);
        seen.push(...rows.map((r) => `${r.deviceId}:${r.state}`));
        const last = rows.at(-1);
        if (rows.length < limit || !last) return seen;
        after = { vendorId: last.vendorId, deviceId: last.deviceId, keyId: last.keyId };
      }
    };
    const every = ['a%c:active', 'a-p:preauthorized', 'a_b:active', 'axb:active', 'b-1:revoked', 'b-2:active', 'z-p:preauthorized'];
    expect(await page({}, 2)).toEqual(every);
    expect(await page({}, 500)).toEqual(every);
    expect(await page({ vendorId: 'V2' }, 1)).toEqual(['z-p:preauthorized']);
    expect(await page({ vendorId: 'V1' }, 2)).toEqual(every.slice(0, -1));
    expect(await page({ state: 'active' }, 1)).toEqual(['a%c:active', 'a_b:active', 'axb:active', 'b-2:active']);
    expect(await page({ state: 'preauthorized' }, 1)).toEqual(['a-p:preauthorized', 'z-p:preauthorized']);
    expect(await page({ q: 'a_' }, 10)).toEqual(['a_b:active']);
    expect(await page({ q: 'a%' }, 10)).toEqual(['a%c:active']);
    expect(await page({ q: 'A' }, 10)).toEqual([]);
    expect(await page({ q: 'bot-b' }, 10)).toEqual(['b-1:revoked', 'b-2:active']);
    // With q, pages run in deviceId's byte order, a key whose botId matches among those whose deviceId does.
    expect(await page({ q: 'a' }, 1)).toEqual(['a%c:active', 'a-p:preauthorized', 'a_b:active', 'axb:active']);
    expect(await page({ q: 'bot-' }, 2)).toEqual(['a%c:active', 'a_b:active', 'axb:active', 'b-1:revoked', 'b-2:active']);
    expect(await page({ q: 'b', state: 'active' }, 1)).toEqual(['a%c:active', 'a_b:active', 'axb:active', 'b-2:active']);
    const [item] = await store.admin.pageDevices({ q: 'b-2' }, null, 1);
    expect(await store.admin.deviceItemOfKey(item?.keyId ?? '')).toEqual(item);
    expect(await store.admin.keysOfBot('bot-b-1')).toEqual([
      { keyId: expect.any(String), state: 'revoked', createdAt: expect.any(Number), retiredAt: expect.any(Number) },
    ]);
  });

  it('pages the audit newest first by filter, and tells a key’s last refusal', async () => {
    const store = await open(await backend.fresh());
    const code = codeRow();
    await store.addCode(code);
    const enrolled = byCode(code, { deviceId: 'SN-1', botId: 'bot-1' });
    await store.enroll(enrolled);
    const keyId = enrolled.key.keyId;
    await store.writeAudit([
      auditRow({ at: 1, keyId, action: 'refusal', outcome: 'replayed' }),
      auditRow({ at: 2, keyId, action: 'refusal', outcome: 'clock-skew' }),
      auditRow({ at: 2, keyId, action: 'token' }),
      auditRow({ at: 3, botId: 'bot-2', keyId: 'k2' }),
    ]);
    const all = await store.admin.pageAudit({}, null, 10);
    expect(all.map((e) => e.at)).toEqual([3, 2, 2, 1]);
    const first = await store.admin.pageAudit({ botId: 'bot-1' }, null, 2);
    const last = first.at(-1);
    expect(first.map((e) => e.at)).toEqual([2, 2]);
    const rest = await store.admin.pageAudit({ botId: 'bot-1' }, last ? { at: last.at, id: last.id } : null, 2);
    expect(rest.map((e) => e.outcome)).toEqual(['replayed']);
    expect((await store.admin.pageAudit({ action: 'refusal' }, null, 10)).length).toBe(2);
    expect((await store.admin.pageAudit({ keyId: 'k2' }, null, 10)).length).toBe(1);
    expect(await store.admin.deviceItemOfKey(keyId)).toMatchObject({ refusalCode: 'clock-skew', refusalAt: 2 });
    // Counted by minute as written: a folded row's count adds to its minute.
    await store.writeAudit([
      auditRow({ at: 90_000, action: 'token', count: 5 }),
      auditRow({ at: 60_000, action: 'code', outcome: 'made' }),
    ]);
    const byAction = async (since: number) =>
      (await store.admin.auditCountsSince(since)).sort((x, y) => (x.action + x.outcome < y.action + y.outcome ? -1 : 1));
    expect(await byAction(0)).toEqual([
      { action: 'refusal', outcome: 'clock-skew', n: 1 },
      { action: 'refusal', outcome: 'replayed', n: 1 },
      { action: 'token', outcome: 'cache', n: 7 },
    ]);
    expect(await byAction(60_001)).toEqual([{ action: 'token', outcome: 'cache', n: 5 }]);
    await store.sweep(120_000);
    expect(await byAction(0)).toEqual([]);
  });

  it('pages codes and pre-authorisations by keyset', async () => {
    const store = await open(await backend.fresh());
    const now = Date.now();
    const codes = [
      codeRow({ expiresAt: now + 3 * H }),
      codeRow({ expiresAt: now + H }),
      codeRow({ expiresAt: now + 2 * H, vendorId: 'V2' }),
    ];
    for (const c of codes) await store.addCode(c);
    const first = await store.admin.pageCodes({ now }, null, 2);
    expect(first.map((c) => c.expiresAt)).toEqual([now + H, now + 2 * H]);
    const last = first.at(-1);
    expect(
      (await store.admin.pageCodes({ now }, last ? { expiresAt: last.expiresAt, id: last.id } : null, 2)).map((c) => c.expiresAt),
    ).toEqual([now + 3 * H]);
    expect((await store.admin.pageCodes({ now, vendorId: 'V2' }, null, 5)).length).toBe(1);
    await store.addPreauth([preauthRow('SN-2'), preauthRow('SN-1'), preauthRow('SN-3')]);
    const p1 = await store.admin.pagePreauth({}, null, 2);
    expect(p1.map((p) => p.deviceId)).toEqual(['SN-1', 'SN-2']);
    expect((await store.admin.pagePreauth({ vendorId: 'V1' }, { vendorId: 'V1', deviceId: 'SN-2' }, 2)).map((p) => p.deviceId)).toEqual([
      'SN-3',
    ]);
    await store.addPreauth([preauthRow('SN-0', 'V0'), preauthRow('SN-9', 'V9')]);
    const seen: string[] = [];
    for (let after: { vendorId: string; deviceId: string } | null = null; ; ) {
      const rows = await store.admin.pagePreauth({}, after, 2);
      seen.push(...rows.map((r) => `${r.vendorId}/${r.deviceId}`));
      const last = rows.at(-1);
      if (rows.length < 2 || !last) break;
      after = { vendorId: last.vendorId, deviceId: last.deviceId };
    }
    expect(seen).toEqual(['V0/SN-0', 'V1/SN-1', 'V1/SN-2', 'V1/SN-3', 'V9/SN-9']);
  });
});
