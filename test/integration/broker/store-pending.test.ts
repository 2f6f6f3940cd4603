import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../../src/broker/store/open.js';
import type { AgainSpend, BrokerStore, PendingAsk, PendingRow, StoreKind } from '../../../src/broker/store/types.js';
import { byCode, codeRow, newKey } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { type PostgresServer, startPostgres } from '../../helpers/postgres.js';

// DESIGN §3.7 "Enrollment with no code", as the store keeps it: the same contract on SQLite and PostgreSQL.

const clock = { wallNow: () => Date.now() };
const { tempDir, cleanups } = useHarness();

let server: PostgresServer;
beforeAll(async () => {
  server = await startPostgres();
}, 120_000);
afterAll(() => server?.stop(), 60_000);

interface Backend {
  kind: StoreKind;
  /** A new, empty store's spec: each open() of it is another instance (another replica, on PostgreSQL). */
  fresh(): Promise<string>;
}

const backends: Backend[] = [
  { kind: 'sqlite', fresh: async () => `sqlite:${join(tempDir('botlink-broker-pending-'), 'broker.db')}` },
  { kind: 'postgres', fresh: () => server.freshDatabase() },
];

async function open(spec: string): Promise<BrokerStore> {
  const store = await openStore(spec, { clock });
  cleanups.push(() => store.close());
  return store;
}

/** A first ask of a new key for `deviceId` of V1 from 192.0.2.1, under the default limits; `over` changes the row. */
function ask(deviceId: string, over: Partial<PendingRow> = {}, limits: Partial<PendingAsk> = {}): PendingAsk {
  const key = newKey();
  return {
    row: {
      ...key,
      vendorId: 'V1',
      deviceId,
      appId: '',
      type: 'PHYSICAL_ROBOT',
      name: deviceId,
      source: '192.0.2.1',
      firstAsked: 1_000,
      lastAsked: 1_000,
      ...over,
    },
    sourceBucket: over.source ?? '192.0.2.1',
    perSource: 50,
    perVendor: 10_000,
    window: askWindow(key.keyId),
    ...limits,
  };
}

/** The key's window of two asks a minute at `now`, as the broker names it. */
function askWindow(keyId: string, now = 1_000): { bucket: string; start: number } {
  return { bucket: `ask:${keyId}/60000`, start: Math.floor(now / 60_000) * 60_000 };
}

/** A later ask of the waiting key of `row` at `now`, with `nonce`, for its device (`device` changes it): spend's outcome, under its two a minute. */
function again(row: PendingRow, nonce: string, now: number, device: { deviceId?: string; vendorId?: string | undefined } = {}): AgainSpend {
  const { keyId, publicKey, deviceId, vendorId } = row;
  const window = { ...askWindow(keyId, now), limit: 2 };
  return { keyId, nonce, keepUntil: now + 600_000, window, now, publicKey, deviceId, vendorId, ...device };
}
/** Whether the store's kept count of V1's waiting keys is the number of V1's rows. */
async function expectVendorCountKept(store: BrokerStore): Promise<void> {
  expect((await store.askStanding('198.51.100.99', 'V1', 'SN-none')).vendor).toBe((await store.listPending('V1')).length);
}
function askAgain(store: BrokerStore, row: PendingRow, nonce: string, now: number) {
  return store.askAgain(again(row, nonce, now));
}

describe.each(backends)('pending keys in the broker store on $kind', (backend) => {
  async function two(): Promise<[BrokerStore, BrokerStore]> {
    const spec = await backend.fresh();
    return [await open(spec), await open(spec)];
  }

  it('pins a first ask: known as pending to findKey, listed with its duplicates, its later asks only move lastAsked', async () => {
    const [store] = await two();
    const first = ask('SN-1');
    const twin = ask('SN-1', { firstAsked: 2_000, lastAsked: 2_000 });
    const alone = ask('SN-2', { name: 'kitchen' });
    expect(await store.askPending(first)).toBe('created');
    expect(await store.askPending(first)).toBe('asked');
    expect(await store.askPending(twin)).toBe('created');
    expect(await store.askPending(alone)).toBe('created');
    expect(await store.findKey(first.row.keyId)).toEqual({ ...first.row, state: 'pending' });
    // The first ask took the first of the key's two a minute: its second ask is counted 2, and moves lastAsked.
    expect(await askAgain(store, first.row, 'n-1', 5_000)).toEqual({ count: 2, replayed: false });
    // An ask past the two a minute takes no nonce (its refusal is the caller's), and a replayed nonce: neither moves lastAsked.
    expect(await askAgain(store, first.row, 'n-2', 7_000)).toEqual({ count: 3, replayed: true });
    expect(await askAgain(store, first.row, 'n-1', 65_000)).toEqual({ count: 1, replayed: true });
    expect(await store.findPending(first.row.keyId)).toEqual({ ...first.row, lastAsked: 5_000 });
    // An ask that arrives late moves nothing back.
    const { window: _none, ...unlimited } = again(first.row, 'n-3', 4_000);
    expect(await store.askAgain(unlimited)).toEqual({ count: undefined, replayed: false });
    expect(await store.findPending(first.row.keyId)).toEqual({ ...first.row, lastAsked: 5_000 });
    expect(await store.listPending()).toEqual([
      { ...first.row, lastAsked: 5_000, duplicates: 1 },
      { ...twin.row, duplicates: 1 },
      { ...alone.row, duplicates: 0 },
    ]);
    expect(await store.listPending('V2')).toEqual([]);
    expect(await store.askStanding('192.0.2.1', 'V1', 'SN-3')).toEqual({ held: false, source: 3, vendor: 3 });
    expect(await store.askStanding('192.0.2.9', 'V2', 'SN-3')).toEqual({ held: false, source: 0, vendor: 0 });
  });

  it('answers a waiting key’s later ask in the step that reads the key, only for the device of its first ask', async () => {
    const [store] = await two();
    const waiting = ask('SN-1', { vendorId: 'V1' });
    expect(await store.askPending(waiting)).toBe('created');
    const row = waiting.row;
    // Another device, or another vendor: the key is read, nothing is written.
    for (const device of [{ deviceId: 'SN-2' }, { vendorId: 'V2' }]) {
      expect(await store.findCarriedKey(again(row, 'n-0', 2_000, device))).toEqual({
        known: { ...row, state: 'pending' },
        asked: undefined,
      });
      expect(await store.askAgain(again(row, 'n-0', 2_000, device))).toBeUndefined();
    }
    expect(await store.findPending(row.keyId)).toEqual(row);
    // Its device, with or without the vendorId: the ask is spent with the read.
    expect(await store.findCarriedKey(again(row, 'n-1', 3_000, { vendorId: undefined }))).toEqual({
      known: { ...row, state: 'pending' },
      asked: { count: 2, replayed: false },
    });
    expect(await store.findPending(row.keyId)).toEqual({ ...row, lastAsked: 3_000 });
    // A key that does not wait: read as it is, nothing written for it.
    const code = codeRow();
    await store.addCode(code);
    const enrolled = byCode(code, { deviceId: 'SN-E', botId: 'bot-E' });
    expect((await store.enroll(enrolled)).outcome).toBe('ok');
    const active = { ...row, keyId: enrolled.key.keyId, publicKey: enrolled.key.publicKey, deviceId: 'SN-E' };
    expect(await store.findCarriedKey(again(active, 'n-2', 3_000))).toMatchObject({
      known: { state: 'active', botId: 'bot-E' },
      asked: undefined,
    });
    const stranger = { ...row, ...newKey() };
    expect(await store.findCarriedKey(again(stranger, 'n-3', 3_000))).toEqual({ known: undefined, asked: undefined });
    // Rejected since: its later ask writes nothing.
    await store.rejectPending({ keyId: row.keyId }, 4_000);
    expect(await store.askAgain(again(row, 'n-4', 5_000))).toBeUndefined();
  });

  it('refuses a first ask for a device it holds in any other state, or a keyId it knows, writing nothing', async () => {
    const [store] = await two();
    const code = codeRow({ usesLeft: 2 });
    await store.addCode(code);
    const enrolled = byCode(code, { deviceId: 'SN-E', botId: 'bot-E' });
    expect((await store.enroll(enrolled)).outcome).toBe('ok');
    const revoked = byCode(code, { deviceId: 'SN-R', botId: 'bot-R' });
    expect((await store.enroll(revoked)).outcome).toBe('ok');
    await store.revoke('bot-R', Date.now());
    expect(await store.addPreauth([{ ...newKey(), deviceId: 'SN-P', vendorId: 'V1', createdAt: 0 }])).toEqual({ added: 1 });
    for (const deviceId of ['SN-E', 'SN-R', 'SN-P']) {
      expect(await store.askStanding('192.0.2.1', 'V1', deviceId)).toEqual({ held: true, source: 0, vendor: 0 });
      expect(await store.askPending(ask(deviceId))).toBe('device-exists');
    }
    // The same serial under another vendor is another device.
    expect(await store.askPending(ask('SN-E', { vendorId: 'V2' }))).toBe('created');
    expect(await store.askPending(ask('SN-N', enrolled.key))).toBe('key-exists');
    expect((await store.listPending()).map((p) => p.deviceId)).toEqual(['SN-E']);
  });

  it('holds pendingPerSource per source and pendingMax per vendor, each across two instances asking at once', async () => {
    const [a, b] = await two();
    const asks = Array.from({ length: 12 }, (_, i) => ask(`SN-${i}`, {}, { perSource: 5 }));
    const outcomes = await Promise.all(asks.map((x, i) => (i % 2 ? a : b).askPending(x)));
    expect(outcomes.filter((o) => o === 'created')).toHaveLength(5);
    expect(outcomes.filter((o) => o === 'source-full')).toHaveLength(7);
    // Another source still asks; a vendor at its max refuses every source.
    expect(await a.askPending(ask('SN-X', { source: '198.51.100.7' }, { perSource: 5 }))).toBe('created');
    expect(await a.askPending(ask('SN-Y', { source: '198.51.100.8' }, { perVendor: 6 }))).toBe('vendor-full');
    expect(await a.askPending(ask('SN-Y', { source: '198.51.100.8', vendorId: 'V2' }, { perVendor: 6 }))).toBe('created');
  });

  it('accept binds the key under a plain code’s rules and rejects every other key waiting for the device', async () => {
    const [store] = await two();
    const chosen = ask('SN-1');
    const other = ask('SN-1', { source: '203.0.113.9' });
    const elsewhere = ask('SN-2');
    for (const x of [chosen, other, elsewhere]) expect(await store.askPending(x)).toBe('created');
    // The operator expects another serial: nothing changes.
    expect(await store.acceptPending({ keyId: chosen.row.keyId, deviceId: 'SN-2', botId: 'bot-1', now: 3_000 })).toEqual({
      outcome: 'gone',
      rejected: [],
    });
    const accepted = await store.acceptPending({ keyId: chosen.row.keyId, deviceId: 'SN-1', botId: 'bot-1', now: 3_000 });
    expect(accepted).toEqual({ outcome: 'ok', rejected: [other.row] });
    await expectVendorCountKept(store);
    expect(await store.findKey(chosen.row.keyId)).toMatchObject({ state: 'active', botId: 'bot-1', deviceId: 'SN-1', vendorId: 'V1' });
    expect(await store.findKey(other.row.keyId)).toMatchObject({ state: 'rejected', publicKey: other.row.publicKey });
    expect(await store.findPending(elsewhere.row.keyId)).toEqual(elsewhere.row);
    // A rejected key is final: never pending again, never enrolled.
    expect(await store.askPending(ask('SN-9', other.row))).toBe('key-exists');
    const code = codeRow();
    await store.addCode(code);
    expect((await store.enroll(byCode(code, { key: other.row }))).outcome).toBe('key-exists');
    // Accepted: the device is held now, so no new key of it may wait.
    expect(await store.askPending(ask('SN-1'))).toBe('device-exists');
    expect((await store.listDevices()).map((d) => [d.deviceId, d.state, d.botId])).toEqual([
      ['SN-1', 'active', 'bot-1'],
      ['SN-1', 'rejected', null],
      ['SN-2', 'pending', null],
    ]);
    expect(await store.countDevices()).toEqual({ active: 1, revoked: 0, preauthorized: 0, pending: 1, rejected: 1 });
  });

  it('accept binds nothing when the device or the botId was bound meanwhile, and the key still waits', async () => {
    const [store] = await two();
    const waiting = ask('SN-1');
    expect(await store.askPending(waiting)).toBe('created');
    const code = codeRow();
    await store.addCode(code);
    expect((await store.enroll(byCode(code, { deviceId: 'SN-OTHER', botId: 'bot-taken' }))).outcome).toBe('ok');
    const commit = { keyId: waiting.row.keyId, deviceId: 'SN-1', botId: 'bot-taken', now: 3_000 };
    expect(await store.acceptPending(commit)).toEqual({ outcome: 'device-exists', rejected: [] });
    expect(await store.findPending(waiting.row.keyId)).toEqual(waiting.row);
  });

  it('two instances racing to accept: one key bound, the rest rejected or gone, once', async () => {
    const [a, b] = await two();
    const keys = Array.from({ length: 6 }, () => ask('SN-1'));
    for (const x of keys) expect(await a.askPending(x)).toBe('created');
    // Each key accepted twice at once, by both instances: the store lets exactly one bind.
    const attempts = keys.flatMap((x, i) =>
      [a, b].map((s) => s.acceptPending({ keyId: x.row.keyId, deviceId: 'SN-1', botId: `bot-${i}`, now: 3_000 })),
    );
    const outcomes = await Promise.all(attempts);
    const ok = outcomes.filter((o) => o.outcome === 'ok');
    expect(ok).toHaveLength(1);
    expect(ok[0]?.rejected).toHaveLength(5);
    const states = await Promise.all(keys.map(async (x) => (await b.findKey(x.row.keyId))?.state));
    expect(states.filter((s) => s === 'active')).toHaveLength(1);
    expect(states.filter((s) => s === 'rejected')).toHaveLength(5);
    expect(await a.listPending()).toEqual([]);
  });

  it('rejects one key, or in one transaction every key a filter holds for: vendor, source block, first ask', async () => {
    const [store] = await two();
    const one = ask('SN-0');
    const flood = Array.from({ length: 4 }, (_, i) => ask(`SN-F${i}`, { source: `10.1.0.${i}`, firstAsked: 1_000 + i }));
    const late = ask('SN-L', { source: '10.1.0.200', firstAsked: 9_000, lastAsked: 9_000 });
    const foreign = ask('SN-V', { vendorId: 'V2', source: '10.1.0.9' });
    for (const x of [one, ...flood, late, foreign]) expect(await store.askPending(x)).toBe('created');
    expect(await store.rejectPending({ keyId: one.row.keyId }, 5_000)).toEqual([one.row]);
    expect(await store.rejectPending({ keyId: one.row.keyId }, 5_000)).toEqual([]);
    const inBlock = (address: string): boolean => address.startsWith('10.1.0.');
    const rejected = await store.rejectPending({ vendorId: 'V1', source: inBlock, firstAskedBefore: 5_000 }, 6_000);
    expect(rejected.map((r) => r.keyId).sort()).toEqual(flood.map((x) => x.row.keyId).sort());
    for (const x of flood) expect(await store.findKey(x.row.keyId)).toMatchObject({ state: 'rejected' });
    await expectVendorCountKept(store);
    expect((await store.listPending()).map((p) => p.deviceId)).toEqual(['SN-L', 'SN-V']);
  });

  it('drops a key 7 days after its first ask, leaving no tombstone: it is unknown, and may wait again', async () => {
    const [store] = await two();
    const old = ask('SN-1', { firstAsked: 1_000, lastAsked: 1_000 });
    const young = ask('SN-2', { firstAsked: 5_000, lastAsked: 5_000 });
    for (const x of [old, young]) expect(await store.askPending(x)).toBe('created');
    // Asked since, yet first asked too long ago: dropped all the same.
    await askAgain(store, old.row, 'n-1', 99_000);
    expect(await store.dropPending(5_000)).toEqual([{ ...old.row, lastAsked: 99_000 }]);
    await expectVendorCountKept(store);
    expect(await store.findKey(old.row.keyId)).toBeUndefined();
    expect(await store.findPending(young.row.keyId)).toEqual(young.row);
    expect(await store.askPending({ ...old, row: { ...old.row, firstAsked: 10_000, lastAsked: 10_000 } })).toBe('created');
  });
});
