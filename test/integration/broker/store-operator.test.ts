import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { PreauthRow } from '../../../src/broker/store/types.js';
import { useHarness } from '../../helpers/harness.js';
import { storeBackends } from '../../helpers/store-backends.js';
import { H } from '../../helpers/time.js';
import { byCode, codeRow, hitIn, newKey } from '../../helpers/broker-store.js';

// The operator's part of the store contract (OperatorBook, DESIGN §3.7), on both databases: codes listed and
// cancelled by id, a pre-authorisation removed, a botId's counts reset, and the agent version a key reports.

const { sqlite, postgres, open } = storeBackends(useHarness(), 'botlink-broker-operator-');

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const preauthRow = (deviceId: string, key = newKey()): PreauthRow => ({ ...key, deviceId, vendorId: 'V1', createdAt: Date.now() });
const listing = ({ id, vendorId, deviceId, kind, usesLeft, expiresAt }: ReturnType<typeof codeRow>) => ({
  id,
  vendorId,
  deviceId,
  kind,
  usesLeft,
  expiresAt,
});

describe.each([sqlite, postgres])('the operator’s store on $kind', (backend) => {
  it('lists the outstanding codes by id, never their HMAC, and a cancelled code admits nothing from then on', async () => {
    const store = await open(await backend.fresh());
    const now = Date.now();
    const bound = codeRow({ deviceId: 'SN-1', usesLeft: 2, expiresAt: now + 2 * H });
    const anyV1 = codeRow({ expiresAt: now + H });
    const v2 = codeRow({ vendorId: 'V2', kind: 'replace', deviceId: 'SN-9', expiresAt: now + 3 * H });
    const expired = codeRow({ expiresAt: now - 1 });
    const spent = codeRow({ usesLeft: 0 });
    for (const c of [bound, anyV1, v2, expired, spent]) await store.addCode(c);
    expect(await store.findCode(bound.hmac)).toEqual(bound);
    expect(await store.listCodes({ now })).toEqual([listing(anyV1), listing(bound), listing(v2)]);
    expect(await store.listCodes({ now, vendorId: 'V2' })).toEqual([listing(v2)]);
    expect(await store.listCodes({ now, vendorId: 'V3' })).toEqual([]);

    expect(await store.cancelCode(bound.id)).toEqual(listing(bound));
    expect(await store.findCode(bound.hmac)).toBeUndefined();
    expect((await store.enroll(byCode(bound, { deviceId: 'SN-1' }))).outcome).toBe('spent');
    expect(await store.cancelCode(bound.id)).toBeUndefined();
    // An expired or spent code can be cancelled too: it is gone, whatever it had left.
    expect(await store.cancelCode(spent.id)).toMatchObject({ id: spent.id, usesLeft: 0 });
    expect(await store.cancelCode(hex(10))).toBeUndefined();
    expect(await store.listCodes({ now })).toEqual([listing(anyV1), listing(v2)]);
  });

  it('removes one device’s pre-authorisation, naming its key; none is undefined; its key then enrolls by nothing', async () => {
    const store = await open(await backend.fresh());
    const kept = preauthRow('SN-1');
    const removed = preauthRow('SN-2');
    expect(await store.addPreauth([kept, removed])).toEqual({ added: 2 });
    expect(await store.removePreauth('V2', 'SN-2')).toBeUndefined();
    expect(await store.removePreauth('V1', 'SN-2')).toEqual({ keyId: removed.keyId, vendorId: 'V1', deviceId: 'SN-2' });
    expect(await store.removePreauth('V1', 'SN-2')).toBeUndefined();
    expect(await store.findPreauth(removed.keyId)).toBeUndefined();
    const commit = {
      admission: { by: 'preauth', keyId: removed.keyId } as const,
      key: { keyId: removed.keyId, publicKey: removed.publicKey },
      botId: 'bot-2',
      deviceId: 'SN-2',
      vendorId: 'V1',
      replace: false,
      now: Date.now(),
    };
    expect((await store.enroll(commit)).outcome).toBe('spent');
    expect((await store.listDevices()).map((d) => d.deviceId)).toEqual(['SN-1']);
  });

  it('resets the windows of a botId’s buckets alone: not another botId that begins alike, not its other kinds', async () => {
    const store = await open(await backend.fresh());
    for (const bucket of ['bot:bot-1/3600000', 'bot:bot-1/3600000', 'bot:bot-10/3600000', 'rotate:bot-1/86400000', 'check:bot-1/3600000']) {
      await hitIn(store, bucket, 0);
    }
    await hitIn(store, 'bot:bot-1/3600000', 3_600_000);
    expect(await store.resetLimits(['bot:bot-1/', 'check:bot-1/'])).toBe(3);
    expect(await hitIn(store, 'bot:bot-1/3600000', 0)).toBe(1);
    expect(await hitIn(store, 'check:bot-1/3600000', 0)).toBe(1);
    expect(await hitIn(store, 'bot:bot-10/3600000', 0)).toBe(2);
    expect(await hitIn(store, 'rotate:bot-1/86400000', 0)).toBe(2);
    expect(await store.resetLimits(['bot:nobody/'])).toBe(0);
  });

  it('keeps the agent version a key reports with last seen, in the same step, and lists and filters devices with it', async () => {
    const store = await open(await backend.fresh());
    const code = codeRow({ usesLeft: 3 });
    await store.addCode(code);
    const a = byCode(code, { deviceId: 'SN-A', botId: 'bot-A' });
    const b = byCode(code, { deviceId: 'SN-B', botId: 'bot-B' });
    for (const c of [a, b]) expect((await store.enroll(c)).outcome).toBe('ok');
    const other = codeRow({ vendorId: 'V2' });
    await store.addCode(other);
    expect((await store.enroll(byCode(other, { deviceId: 'SN-C', botId: 'bot-C' }))).outcome).toBe('ok');
    const report = async (key: { keyId: string; publicKey: string }, now: number, agentVersion?: string) => {
      const spend = { ...key, nonce: hex(16), keepUntil: Date.now() + 60_000, now, agentVersion };
      expect(await store.spendVerified(spend)).toMatchObject({ spent: { replayed: false } });
    };
    const deviceA = async () => (await store.listDevices({ vendorId: 'V1' })).find((d) => d.deviceId === 'SN-A');
    await report(a.key, 1_000_000, '1.2.0');
    expect(await deviceA()).toMatchObject({ lastSeenAt: 1_000_000, agentVersion: '1.2.0' });
    // Within the minute, the same version writes nothing; another version is written at once, with last seen.
    await report(a.key, 1_000_500, '1.2.0');
    expect(await deviceA()).toMatchObject({ lastSeenAt: 1_000_000, agentVersion: '1.2.0' });
    await report(a.key, 1_001_000, '1.3.0+rc_1');
    expect(await deviceA()).toMatchObject({ lastSeenAt: 1_001_000, agentVersion: '1.3.0+rc_1' });
    // A request that reports none keeps the version last reported.
    await report(a.key, 1_100_000);
    expect(await deviceA()).toMatchObject({ lastSeenAt: 1_100_000, agentVersion: '1.3.0+rc_1' });
    // A replayed nonce writes nothing.
    const replay = { ...a.key, nonce: hex(16), keepUntil: Date.now() + 60_000, now: 1_200_000, agentVersion: '9.9.9' };
    await store.spendVerified(replay);
    expect(await store.spendVerified(replay)).toMatchObject({ spent: { replayed: true } });
    expect(await deviceA()).toMatchObject({ agentVersion: '9.9.9' });
    await store.revoke('bot-B', Date.now());
    await store.addPreauth([preauthRow('SN-D')]);
    const ids = (list: { deviceId: string }[]) => list.map((d) => d.deviceId);
    expect(ids(await store.listDevices())).toEqual(['SN-A', 'SN-B', 'SN-D', 'SN-C']);
    expect(ids(await store.listDevices({ state: 'active' }))).toEqual(['SN-A', 'SN-C']);
    expect(ids(await store.listDevices({ state: 'active', vendorId: 'V1' }))).toEqual(['SN-A']);
    expect(ids(await store.listDevices({ state: 'revoked' }))).toEqual(['SN-B']);
    expect(ids(await store.listDevices({ state: 'preauthorized' }))).toEqual(['SN-D']);
    expect(ids(await store.listDevices({ state: 'pending' }))).toEqual([]);
    expect(ids(await store.listDevices({ vendorId: 'V2' }))).toEqual(['SN-C']);
  });

  it('migration 4 gives each code made before it an id of its own, 80 bits in hex', async () => {
    const spec = await backend.fresh();
    const insert = (hmac: string) =>
      `INSERT INTO codes (hmac, vendor_id, kind, device_id, uses_left, expires_at, created_at) VALUES ('${hmac}', 'V1', 'plain', NULL, 1, ${Date.now() + H}, 0)`;
    await backend.atVersion(spec, 3, `${insert('h1')}; ${insert('h2')}`);
    const store = await open(spec);
    const ids = (await store.listCodes({ now: Date.now() })).map((c) => c.id);
    expect(ids).toEqual([expect.stringMatching(/^[0-9a-f]{20}$/), expect.stringMatching(/^[0-9a-f]{20}$/)]);
    expect(new Set(ids).size).toBe(2);
    expect(await store.findCode('h1')).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{20}$/) });
  });

  it('migration 8 counts the keys already waiting per vendor, and its triggers keep the count from then on', async () => {
    const spec = await backend.fresh();
    const insert = (keyId: string, vendorId: string) =>
      'INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) ' +
      `VALUES ('${keyId}', 'pk-${keyId}', '${vendorId}', 'SN-${keyId}', '', 'PHYSICAL_ROBOT', 'n', '192.0.2.1', '192.0.2.1', 1000, 1000)`;
    await backend.atVersion(spec, 5, [insert('k1', 'V1'), insert('k2', 'V1'), insert('k3', 'V2')].join('; '));
    const store = await open(spec);
    const vendor = async (vendorId: string) => (await store.askStanding('198.51.100.1', vendorId, 'SN-none')).vendor;
    expect([await vendor('V1'), await vendor('V2'), await vendor('V3')]).toEqual([2, 1, 0]);
    await store.rejectPending({ keyId: 'k1' }, 2_000);
    expect(await store.dropPending(5_000)).toHaveLength(2);
    expect([await vendor('V1'), await vendor('V2')]).toEqual([0, 0]);
  });
});
