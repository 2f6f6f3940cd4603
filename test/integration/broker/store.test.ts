import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/native.js';
import { openStore } from '../../../src/broker/store/open.js';
import { POSTGRES_MIGRATIONS } from '../../../src/broker/store/postgres-schema.js';
import type { BrokerStore, EnrollCommit, PreauthRow, StoreKind, TokenRow } from '../../../src/broker/store/types.js';
import { bundleChild } from '../../helpers/bundle.js';
import { closed, exec } from '../../../scripts/lib/exec.js';
import { useHarness } from '../../helpers/harness.js';
import { type PostgresServer, startPostgres } from '../../helpers/postgres.js';
import { H } from '../../helpers/time.js';
import { byCode, codeRow, hitIn, newKey, takeNonce } from '../../helpers/broker-store.js';

const clock = { wallNow: () => Date.now() };
const { tempDir, cleanups } = useHarness();

/** Where one test's store lives: each open() is another instance on it (another replica, on PostgreSQL). */
interface Place {
  spec: string;
  open(): Promise<BrokerStore>;
}

interface Backend {
  kind: StoreKind;
  /** A new, empty store. */
  fresh(): Promise<Place>;
  /** Writes a schema version past this release's into the store. */
  setVersion(place: Place, version: number): Promise<void>;
  /** Resolves once `count` callers wait for a bot lock held elsewhere (SQLite: in this process, nothing to see). */
  lockWaiters(place: Place, count: number): Promise<void>;
}

function place(spec: string): Place {
  return {
    spec,
    async open() {
      const store = await openStore(spec, { clock });
      cleanups.push(() => store.close());
      return store;
    },
  };
}

const sqlite: Backend = {
  kind: 'sqlite',
  async fresh() {
    return place(`sqlite:${join(tempDir('botlink-broker-store-'), 'broker.db')}`);
  },
  async setVersion(p, version) {
    const db = openDatabase(p.spec.slice('sqlite:'.length));
    db.pragma(`user_version = ${version}`);
    db.close();
  },
  async lockWaiters() {},
};

// One throwaway server for the whole file; each test has a database of its own.
let server: PostgresServer;
beforeAll(async () => {
  const started = performance.now();
  server = await startPostgres();
  console.log(`postgres started in ${Math.round(performance.now() - started)} ms`);
}, 120_000);
afterAll(() => server?.stop(), 60_000);

/** The advisory locks of `url`'s database: held (granted) or waited for. */
async function advisoryLocks(url: string, granted: boolean): Promise<number[]> {
  const rows = await server.query<{ pid: number }>(
    url,
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    [granted],
  );
  return rows.map((r) => r.pid);
}

const postgres: Backend = {
  kind: 'postgres',
  async fresh() {
    return place(await server.freshDatabase());
  },
  async setVersion(p, version) {
    await server.query(p.spec, 'UPDATE broker_schema SET version = $1', [version]);
  },
  async lockWaiters(p, count) {
    await expect.poll(async () => (await advisoryLocks(p.spec, false)).length, { timeout: 30_000, interval: 20 }).toBe(count);
  },
};

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
/** A verified token request by `key` at `now`, as the token route spends it: what records last seen. */
async function seen(store: BrokerStore, key: { keyId: string; publicKey: string }, now: number): Promise<void> {
  const spend = {
    ...key,
    nonce: hex(16),
    keepUntil: Date.now() + 60_000,
    window: { bucket: `key:${key.keyId}`, start: 0, limit: 100 },
    now,
  };
  expect(await store.spendVerified(spend)).toMatchObject({ spent: { replayed: false } });
}
const preauthRow = (deviceId: string, key = newKey()): PreauthRow => ({ ...key, deviceId, vendorId: 'V1', createdAt: Date.now() });
const token = (botId: string, over: Partial<TokenRow> = {}): TokenRow => ({
  botId,
  accessSealed: randomBytes(48),
  accessExpiresAt: Date.now() + 2 * H,
  accessLifetimeS: 7200,
  refreshSealed: randomBytes(48),
  refreshExpiresAt: Date.now() + 24 * H,
  updatedAt: Date.now(),
  ...over,
});

/** A promise and the function that settles it: a holder that lets go only when the test says. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe.each([sqlite, postgres])('the broker store on $kind', (backend) => {
  /** A fresh store and a second instance on it. */
  async function two(): Promise<[BrokerStore, BrokerStore, Place]> {
    const p = await backend.fresh();
    const a = await p.open();
    return [a, await p.open(), p];
  }

  it('keeps what it holds across a reopen, and refuses a schema newer than it knows', async () => {
    const p = await backend.fresh();
    const store = await p.open();
    expect(store.kind).toBe(backend.kind);
    const code = codeRow({ kind: 'adopt', deviceId: 'SN-1', usesLeft: 3 });
    await store.addCode(code);
    await store.close();
    const again = await p.open();
    expect(await again.findCode(code.hmac)).toEqual(code);
    expect(await again.findCode(hex(32))).toBeUndefined();
    await again.close();
    await backend.setVersion(p, 99);
    await expect(p.open()).rejects.toMatchObject({ code: 'ERR_STORE_VERSION', message: expect.stringContaining('schema version 99') });
  });

  it("tells the time by the store's clock", async () => {
    const [store] = await two();
    const before = Date.now();
    const now = await store.now();
    expect(Number.isInteger(now)).toBe(true);
    // The test and the store share this machine's clock.
    expect(now).toBeGreaterThanOrEqual(before - 1000);
    expect(now).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('binds a key with a code: the device, its botId and the use spent', async () => {
    const [store] = await two();
    const code = codeRow({ usesLeft: 2 });
    await store.addCode(code);
    const commit = byCode(code, { deviceId: 'SN-A', botId: 'bot-A' });
    expect((await store.enroll(commit)).outcome).toBe('ok');
    expect(await store.findCode(code.hmac)).toMatchObject({ usesLeft: 1 });
    expect(await store.findKey(commit.key.keyId)).toEqual({
      ...commit.key,
      botId: 'bot-A',
      deviceId: 'SN-A',
      vendorId: 'V1',
      state: 'active',
      reason: null,
      createdAt: commit.now,
      lastSeenAt: null,
      revokedAt: null,
    });
    const device = { botId: 'bot-A', deviceId: 'SN-A', vendorId: 'V1', keyId: commit.key.keyId };
    expect(await store.findDeviceByDeviceId('V1', 'SN-A')).toEqual(device);
    expect(await store.findDeviceByBotId('bot-A')).toEqual(device);
    expect(await store.findDeviceByDeviceId('V2', 'SN-A')).toBeUndefined();
    expect(await store.findDeviceByBotId('bot-B')).toBeUndefined();
  });

  it('spends a code of one use for exactly one of 20 concurrent enrollments from two instances', async () => {
    const [a, b] = await two();
    const code = codeRow();
    await a.addCode(code);
    const commits = Array.from({ length: 20 }, () => byCode(code));
    const outcomes = (await Promise.all(commits.map((c, i) => (i % 2 ? a : b).enroll(c)))).map((e) => e.outcome);
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'spent')).toHaveLength(19);
    expect(await a.findCode(code.hmac)).toMatchObject({ usesLeft: 0 });
    const bound = await Promise.all(commits.map((c) => b.findKey(c.key.keyId)));
    expect(bound.filter(Boolean)).toHaveLength(1);
    expect((await a.listDevices()).filter((d) => d.state === 'active')).toHaveLength(1);
  });

  it('refuses a spent, expired, foreign or unknown code, and binds nothing', async () => {
    const [store] = await two();
    const spent = codeRow({ usesLeft: 0 });
    const expired = codeRow({ expiresAt: Date.now() - 1 });
    const bound = codeRow({ deviceId: 'SN-OTHER' });
    for (const code of [spent, expired, bound]) await store.addCode(code);
    const refused = [
      byCode(spent),
      byCode(expired),
      byCode(bound, { deviceId: 'SN-MINE' }),
      byCode(codeRow()),
      byCode(bound, { deviceId: 'SN-OTHER', vendorId: 'V2' }),
    ];
    for (const commit of refused) expect((await store.enroll(commit)).outcome).toBe('spent');
    expect(await store.findCode(expired.hmac)).toMatchObject({ usesLeft: 1 });
    expect(await store.findCode(bound.hmac)).toMatchObject({ usesLeft: 1 });
    expect(await store.listDevices()).toEqual([]);
    expect(await store.countDevices()).toEqual({ active: 0, revoked: 0, preauthorized: 0, pending: 0, rejected: 0 });
    expect((await store.enroll(byCode(bound, { deviceId: 'SN-OTHER' }))).outcome).toBe('ok');
  });

  it('a replace binds the new key and revokes the old one, its tokens and any pending pre-authorisation', async () => {
    const [store] = await two();
    const first = codeRow();
    await store.addCode(first);
    const old = byCode(first, { deviceId: 'SN-R', botId: 'bot-R' });
    expect((await store.enroll(old)).outcome).toBe('ok');
    expect(await store.keepToken(old.key.keyId, token('bot-R'))).toBe(true);
    const replace = codeRow({ kind: 'replace', deviceId: 'SN-R' });
    await store.addCode(replace);
    const swapped = byCode(replace, { deviceId: 'SN-R', botId: 'bot-R', now: Date.now() + 5 });
    expect(await store.enroll(swapped)).toEqual({ outcome: 'ok', replaced: [old.key.keyId] });
    expect(await store.findKey(old.key.keyId)).toMatchObject({ state: 'revoked', reason: 'replaced', revokedAt: swapped.now });
    expect(await store.findKey(swapped.key.keyId)).toMatchObject({ state: 'active', botId: 'bot-R', reason: null });
    expect(await store.findDeviceByBotId('bot-R')).toMatchObject({ keyId: swapped.key.keyId });
    expect(await store.readToken('bot-R')).toBeUndefined();
    expect(await store.findCode(replace.hmac)).toMatchObject({ usesLeft: 0 });

    // A replace never takes a botId that another device's key holds: refused, nothing spent.
    const other = codeRow({ kind: 'replace', deviceId: 'SN-X' });
    await store.addCode(other);
    expect((await store.enroll(byCode(other, { deviceId: 'SN-X', botId: 'bot-R' }))).outcome).toBe('device-exists');
    expect(await store.findCode(other.hmac)).toMatchObject({ usesLeft: 1 });
    expect(await store.findKey(swapped.key.keyId)).toMatchObject({ state: 'active' });
  });

  it('refuses a keyId known in any state, spending nothing', async () => {
    const [store] = await two();
    const code = codeRow({ usesLeft: 10 });
    await store.addCode(code);
    const active = byCode(code);
    const revoked = byCode(code);
    const rotated = byCode(code);
    for (const c of [active, revoked, rotated]) expect((await store.enroll(c)).outcome).toBe('ok');
    expect((await store.revoke(revoked.botId, Date.now())).keyIds).toEqual([revoked.key.keyId]);
    const next = newKey();
    expect(await store.rotate(rotated.key.keyId, next, Date.now())).toBe('ok');
    const pending = newKey();
    expect(await store.addPreauth([preauthRow('SN-P', pending)])).toEqual({ added: 1 });
    for (const key of [active.key, revoked.key, rotated.key, next, pending]) {
      expect((await store.enroll(byCode(code, { key }))).outcome).toBe('key-exists');
    }
    expect(await store.findCode(code.hmac)).toMatchObject({ usesLeft: 7 });
  });

  it('refuses a bound deviceId or botId, and a code for a pre-authorised device, spending nothing', async () => {
    const [store] = await two();
    const code = codeRow({ usesLeft: 10 });
    await store.addCode(code);
    const held = byCode(code, { deviceId: 'SN-H', botId: 'bot-H' });
    expect((await store.enroll(held)).outcome).toBe('ok');
    expect((await store.enroll(byCode(code, { deviceId: 'SN-H', botId: 'bot-other' }))).outcome).toBe('device-exists');
    expect((await store.enroll(byCode(code, { deviceId: 'SN-other', botId: 'bot-H' }))).outcome).toBe('device-exists');
    expect(await store.addPreauth([preauthRow('SN-P')])).toEqual({ added: 1 });
    expect(await store.isPreauthorized('V1', 'SN-P')).toBe(true);
    expect((await store.enroll(byCode(code, { deviceId: 'SN-P' }))).outcome).toBe('device-exists');
    expect(await store.findCode(code.hmac)).toMatchObject({ usesLeft: 9 });
    // Revoked, the device is no longer bound: the store admits it again (the route decides which codes may).
    expect((await store.revoke('bot-H', Date.now())).keyIds).toEqual([held.key.keyId]);
    expect(await store.findDeviceByDeviceId('V1', 'SN-H')).toEqual({ botId: 'bot-H', deviceId: 'SN-H', vendorId: 'V1', keyId: null });
    expect((await store.enroll(byCode(code, { deviceId: 'SN-H', botId: 'bot-H' }))).outcome).toBe('ok');
  });

  it('pre-authorises keys whole or not at all, and enrolls each once with its own key', async () => {
    const [store] = await two();
    const code = codeRow();
    await store.addCode(code);
    expect((await store.enroll(byCode(code, { deviceId: 'SN-B' }))).outcome).toBe('ok');
    const a = preauthRow('SN-1');
    const b = preauthRow('SN-2');
    expect(await store.addPreauth([a, b])).toEqual({ added: 2 });
    expect(await store.findPreauth(a.keyId)).toEqual(a);
    for (const batch of [
      [preauthRow('SN-3'), preauthRow('SN-B')],
      [preauthRow('SN-4'), preauthRow('SN-1')],
      [preauthRow('SN-5'), preauthRow('SN-6', b)],
    ]) {
      expect(await store.addPreauth(batch)).toEqual({ conflict: batch[1]!.deviceId });
      expect(await store.isPreauthorized('V1', batch[0]!.deviceId)).toBe(false);
    }
    expect(await store.addPreauth([])).toEqual({ added: 0 });

    const enrollA: EnrollCommit = { ...byCode(code, { deviceId: 'SN-1' }), admission: { by: 'preauth', keyId: a.keyId }, key: a };
    expect((await store.enroll({ ...enrollA, deviceId: 'SN-2' })).outcome).toBe('spent');
    expect((await store.enroll({ ...enrollA, key: { ...a, publicKey: 'pk-forged' } })).outcome).toBe('spent');
    expect((await store.enroll(enrollA)).outcome).toBe('ok');
    expect(await store.findPreauth(a.keyId)).toBeUndefined();
    expect(await store.isPreauthorized('V1', 'SN-1')).toBe(false);
    expect((await store.enroll(enrollA)).outcome).toBe('spent');
    expect(await store.findKey(a.keyId)).toMatchObject({ state: 'active', deviceId: 'SN-1' });
  });

  it('sees a nonce once across two instances, and sweeps it only after keepUntil', async () => {
    const [a, b] = await two();
    const now = await a.now();
    const key = hex(16);
    expect(await takeNonce(a, key, 'nonce-0123456789ab', now + 60_000)).toBe(true);
    expect(await takeNonce(b, key, 'nonce-0123456789ab', now + 60_000)).toBe(false);
    expect(await takeNonce(b, hex(16), 'nonce-0123456789ab', now + 60_000)).toBe(true);
    const raced = await Promise.all(
      Array.from({ length: 10 }, (_, i) => takeNonce(i % 2 ? a : b, key, 'nonce-raced-000000', now + 60_000)),
    );
    expect(raced.filter(Boolean)).toHaveLength(1);

    expect(await takeNonce(a, key, 'nonce-past-0000000', now - 1)).toBe(true);
    await b.sweep(0);
    expect(await takeNonce(a, key, 'nonce-0123456789ab', now + 60_000)).toBe(false);
    expect(await takeNonce(a, key, 'nonce-past-0000000', now - 1)).toBe(true);
  });

  it('counts 200 concurrent hits from two instances exactly, per bucket and window, and sweeps old windows', async () => {
    const [a, b] = await two();
    const counts = await Promise.all(Array.from({ length: 200 }, (_, i) => hitIn(i % 2 ? a : b, 'key:k1', 60_000)));
    expect([...counts].sort((x, y) => x - y)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(await hitIn(a, 'key:k1', 120_000)).toBe(1);
    expect(await hitIn(b, 'key:k2', 60_000)).toBe(1);
    await a.sweep(120_000);
    expect(await hitIn(b, 'key:k1', 60_000)).toBe(1);
    expect(await hitIn(b, 'key:k1', 120_000)).toBe(2);
  });

  it('withBotLock runs one holder per botId across two instances, and lets go when fn rejects', async () => {
    const [a, b, p] = await two();
    const entered = gate();
    const held = gate();
    const order: string[] = [];
    const first = a.withBotLock('bot-L', async () => {
      order.push('a in');
      entered.open();
      await held.promise;
      order.push('a out');
      return 'a';
    });
    await entered.promise;
    const second = b.withBotLock('bot-L', async () => {
      order.push('b in');
      return 'b';
    });
    await backend.lockWaiters(p, 1);
    // Another botId is not held up by bot-L.
    expect(await b.withBotLock('bot-M', async () => 'm')).toBe('m');
    expect(order).toEqual(['a in']);
    held.open();
    expect(await Promise.all([first, second])).toEqual(['a', 'b']);
    expect(order).toEqual(['a in', 'a out', 'b in']);

    await expect(a.withBotLock('bot-L', () => Promise.reject(new Error('cloud down')))).rejects.toThrow('cloud down');
    expect(await b.withBotLock('bot-L', async () => 'after')).toBe('after');
  });

  it('revoke ends the active key and its cached tokens, and drops the pre-authorisations of its device', async () => {
    const [store, other] = await two();
    const code = codeRow();
    await store.addCode(code);
    const c = byCode(code, { deviceId: 'SN-V', botId: 'bot-V' });
    expect((await store.enroll(c)).outcome).toBe('ok');
    expect(await store.keepToken(c.key.keyId, token('bot-V'))).toBe(true);
    expect((await store.revoke('bot-V', 1234)).keyIds).toEqual([c.key.keyId]);
    expect(await other.findKey(c.key.keyId)).toMatchObject({ state: 'revoked', reason: 'revoked', revokedAt: 1234 });
    expect(await other.readToken('bot-V')).toBeUndefined();
    expect(await store.rotate(c.key.keyId, newKey(), Date.now())).toBe('revoked');
    // Revoked, the device may be pre-authorised for a new key; a second revoke takes that back too.
    expect(await store.addPreauth([preauthRow('SN-V')])).toEqual({ added: 1 });
    expect((await store.revoke('bot-V', 1235)).keyIds).toEqual([]);
    expect(await other.isPreauthorized('V1', 'SN-V')).toBe(false);
    expect((await store.revoke('bot-none', 1236)).keyIds).toEqual([]);
    // A token renewed for the revoked key is not kept: the request that asked for it is refused.
    expect(await other.keepToken(c.key.keyId, token('bot-V'))).toBe(false);
    expect(await other.readToken('bot-V')).toBeUndefined();
  });

  it('revoke --displace queues a displacement just after the dropped token expires, and only then is it due', async () => {
    const [store, other] = await two();
    const code = codeRow({ usesLeft: 3 });
    await store.addCode(code);
    const displace = { displaceAfterExpiryMs: 60_000 };
    // A token that expired two minutes ago (its displacement due now), one that expires in an hour, and none.
    const [past, future, none] = ['bot-DP', 'bot-DF', 'bot-DN'].map((botId) => byCode(code, { botId })) as [
      EnrollCommit,
      EnrollCommit,
      EnrollCommit,
    ];
    for (const c of [past, future, none]) expect((await store.enroll(c)).outcome).toBe('ok');
    const pastExpiry = Date.now() - 120_000;
    const futureExpiry = Date.now() + H;
    expect(await store.keepToken(past.key.keyId, token(past.botId, { accessExpiresAt: pastExpiry }))).toBe(true);
    expect(await store.keepToken(future.key.keyId, token(future.botId, { accessExpiresAt: futureExpiry }))).toBe(true);
    expect(await store.revoke(past.botId, Date.now(), displace)).toEqual({ keyIds: [past.key.keyId], displaceAt: pastExpiry + 60_000 });
    expect(await store.revoke(future.botId, Date.now(), displace)).toEqual({
      keyIds: [future.key.keyId],
      displaceAt: futureExpiry + 60_000,
    });
    expect(await store.revoke(none.botId, Date.now(), displace)).toEqual({ keyIds: [none.key.keyId], displaceAt: null });
    // Nothing revoked, nothing queued.
    expect(await store.revoke(past.botId, Date.now(), displace)).toEqual({ keyIds: [], displaceAt: null });
    expect(await other.claimDisplacements(16)).toEqual([{ botId: past.botId, dueAt: pastExpiry + 60_000, attempts: 0 }]);
    expect(await other.claimDisplacements(16)).toEqual([]);
    // Queued again (a failure), the earlier time gives way to a later one queued for the botId, and not the reverse.
    await store.requeueDisplacement(past.botId, -1000, 3);
    await store.requeueDisplacement(future.botId, -1000, 1);
    const claimed = await other.claimDisplacements(16);
    expect(claimed).toEqual([{ botId: past.botId, dueAt: expect.any(Number), attempts: 3 }]);
    expect(Math.abs(claimed[0]!.dueAt + 1000 - (await store.now()))).toBeLessThan(5_000);
  });

  it('two instances claiming the same due displacements at once take each exactly once', async () => {
    const [a, b] = await two();
    const botIds = Array.from({ length: 40 }, (_, i) => `bot-claim-${i}`);
    for (let trial = 0; trial < 5; trial++) {
      await Promise.all(botIds.map((botId) => a.requeueDisplacement(botId, -1000, trial)));
      const taken: string[] = [];
      // Claimers racing for the same rows may each come back with fewer than asked: claim until none is left.
      for (let round = 0; round < 10 && taken.length < botIds.length; round++) {
        const claims = await Promise.all([0, 1, 2, 3].map((i) => (i % 2 ? b : a).claimDisplacements(16)));
        taken.push(...claims.flat().map((d) => d.botId));
      }
      expect(taken.sort()).toEqual([...botIds].sort());
    }
  });

  it('rotate hands the device to a new key once; the old key is rotated away', async () => {
    const [a, b] = await two();
    const code = codeRow({ usesLeft: 2 });
    await a.addCode(code);
    const c = byCode(code, { deviceId: 'SN-T', botId: 'bot-T' });
    const bystander = byCode(code);
    expect((await a.enroll(c)).outcome).toBe('ok');
    expect((await a.enroll(bystander)).outcome).toBe('ok');
    expect(await a.rotate(c.key.keyId, bystander.key, 10)).toBe('key-exists');
    expect(await a.findKey(c.key.keyId)).toMatchObject({ state: 'active' });
    const next = [newKey(), newKey()];
    const outcomes = await Promise.all([a.rotate(c.key.keyId, next[0]!, 20), b.rotate(c.key.keyId, next[1]!, 20)]);
    expect([...outcomes].sort()).toEqual(['ok', 'revoked']);
    const winner = next[outcomes.indexOf('ok')]!;
    expect(await b.findKey(c.key.keyId)).toMatchObject({ state: 'revoked', reason: 'rotated', revokedAt: 20 });
    expect(await b.findKey(winner.keyId)).toMatchObject({
      state: 'active',
      botId: 'bot-T',
      deviceId: 'SN-T',
      vendorId: 'V1',
      createdAt: 20,
    });
    expect(await b.findDeviceByBotId('bot-T')).toMatchObject({ keyId: winner.keyId });
  });

  it('a botId keeps its last 16 retired keys as rows; older ones are tombstones, still known and never enrolled again', async () => {
    const [a, b] = await two();
    const code = codeRow({ usesLeft: 2 });
    await a.addCode(code);
    const first = byCode(code, { deviceId: 'SN-G', botId: 'bot-G' });
    expect((await a.enroll(first)).outcome).toBe('ok');
    const keys = [first.key];
    for (let i = 1; i <= 19; i += 1) {
      keys.push(newKey());
      expect(await (i % 2 ? a : b).rotate(keys[i - 1]!.keyId, keys[i]!, 100 + i)).toBe('ok');
    }
    // 20 keys: the active one, the 16 newest retired as rows, the 3 oldest as tombstones.
    for (const [i, key] of keys.entries()) {
      const found = await b.findKey(key.keyId);
      if (i < 3) expect(found).toEqual({ keyId: key.keyId, publicKey: key.publicKey, state: 'revoked', entombedAt: 101 + i });
      else if (i < 19) expect(found).toMatchObject({ keyId: key.keyId, state: 'revoked', reason: 'rotated', botId: 'bot-G' });
      else expect(found).toMatchObject({ state: 'active', botId: 'bot-G' });
    }
    // An entombed keyId is known in every state: no rotation, enrollment or pre-authorisation takes it again.
    const entombed = keys[0]!;
    expect(await a.rotate(keys[19]!.keyId, entombed, 500)).toBe('key-exists');
    expect((await a.enroll({ ...byCode(code, { deviceId: 'SN-H', botId: 'bot-H' }), key: entombed })).outcome).toBe('key-exists');
    expect(await a.addPreauth([preauthRow('SN-J', entombed)])).toEqual({ conflict: 'SN-J' });
    // A revoke entombs past the 16 too: the botId's 17 retired keys leave 16 rows.
    expect((await b.revoke('bot-G', 600)).keyIds).toEqual([keys[19]!.keyId]);
    expect(await a.findKey(keys[3]!.keyId)).toMatchObject({ state: 'revoked', entombedAt: 104 });
    expect(await a.findKey(keys[19]!.keyId)).toMatchObject({ state: 'revoked', reason: 'revoked', revokedAt: 600 });
    expect((await a.listDevices()).filter((d) => d.botId === 'bot-G')).toMatchObject([{ state: 'revoked', keyId: keys[19]!.keyId }]);
  });

  it('lists each device once with its state and last seen, then the pre-authorised keys, and counts them by state', async () => {
    const [store] = await two();
    const code = codeRow({ usesLeft: 3 });
    await store.addCode(code);
    const active = byCode(code, { deviceId: 'SN-1', botId: 'bot-1' });
    const rotated = byCode(code, { deviceId: 'SN-2', botId: 'bot-2' });
    const revoked = byCode(code, { deviceId: 'SN-3', botId: 'bot-3' });
    for (const c of [active, rotated, revoked]) expect((await store.enroll(c)).outcome).toBe('ok');
    await seen(store, rotated.key, 500);
    const next = newKey();
    expect(await store.rotate(rotated.key.keyId, next, Date.now())).toBe('ok');
    await seen(store, next, 400);
    await store.revoke('bot-3', Date.now());
    const pending = preauthRow('SN-4');
    await store.addPreauth([pending]);
    expect(await store.listDevices()).toEqual([
      { botId: 'bot-1', deviceId: 'SN-1', vendorId: 'V1', keyId: active.key.keyId, state: 'active', lastSeenAt: null, agentVersion: null },
      { botId: 'bot-2', deviceId: 'SN-2', vendorId: 'V1', keyId: next.keyId, state: 'active', lastSeenAt: 500, agentVersion: null },
      {
        botId: 'bot-3',
        deviceId: 'SN-3',
        vendorId: 'V1',
        keyId: revoked.key.keyId,
        state: 'revoked',
        lastSeenAt: null,
        agentVersion: null,
      },
      { botId: null, deviceId: 'SN-4', vendorId: 'V1', keyId: pending.keyId, state: 'preauthorized', lastSeenAt: null, agentVersion: null },
    ]);
    // /metrics' devices by state count those lines: a botId once, however many keys it had.
    expect(await store.countDevices()).toEqual({ active: 2, revoked: 1, preauthorized: 1, pending: 0, rejected: 0 });
  });

  it('keeps sealed tokens as bytes, replacing a botId’s row whole, and only for its active key', async () => {
    const [a, b] = await two();
    const code = codeRow();
    await a.addCode(code);
    const enrolled = byCode(code, { deviceId: 'SN-K', botId: 'bot-K' });
    expect((await a.enroll(enrolled)).outcome).toBe('ok');
    const first = token('bot-K');
    expect(await a.keepToken(enrolled.key.keyId, first)).toBe(true);
    expect(await b.readToken('bot-K')).toEqual(first);
    // Another key, or this key for another botId, keeps nothing.
    expect(await a.keepToken(newKey().keyId, token('bot-K', { updatedAt: 1 }))).toBe(false);
    expect(await a.keepToken(enrolled.key.keyId, token('bot-other'))).toBe(false);
    expect(await b.readToken('bot-other')).toBeUndefined();
    const second = token('bot-K', { refreshSealed: null, refreshExpiresAt: null, accessLifetimeS: 3600 });
    expect(await b.keepToken(enrolled.key.keyId, second)).toBe(true);
    const read = await a.readToken('bot-K');
    expect(read).toEqual(second);
    expect(Buffer.isBuffer(read!.accessSealed)).toBe(true);
    expect(await a.readToken('bot-none')).toBeUndefined();
  });
});

describe('openStore', () => {
  it('names the store key for anything but sqlite:PATH or a postgres URL, never showing a password', async () => {
    for (const spec of ['', 'sqlite:', 'mysql://u:hunter2@h/db', '/var/lib/broker.db', 'postgres:/x']) {
      const err = await openStore(spec, { clock }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'ERR_CONFIG', key: 'store' });
      expect(String((err as Error).message)).not.toContain('hunter2');
    }
  });

  it('loads pg only for a postgres URL: a broker on SQLite never does', async () => {
    const child = await bundleChild(PG_PROBE, 'pg-probe.ts', 'broker-pg-probe-');
    cleanups.push(() => child.dispose());
    const url = await server.freshDatabase();
    const run = await exec(process.execPath, [child.file, join(tempDir('botlink-pg-probe-'), 'broker.db'), url]);
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ afterSqlite: false, afterPostgres: true });
  });
});

/** Opens a SQLite store, then a PostgreSQL one, saying after each whether any file of pg was loaded. */
const PG_PROBE = `
import { createRequire } from 'node:module';
import { openStore } from './src/broker/store/open.ts';
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('/node_modules/pg/'));
const deps = { clock: { wallNow: () => Date.now() } };
const [file, url] = process.argv.slice(2);
await (await openStore('sqlite:' + file, deps)).close();
const afterSqlite = loaded();
await (await openStore(url, deps)).close();
process.stdout.write(JSON.stringify({ afterSqlite, afterPostgres: loaded() }));
`;

describe('the broker store on sqlite, one host', () => {
  it('creates its file 0600 (the WAL too), in a folder 0700', async () => {
    const dir = tempDir('botlink-broker-mode-');
    const file = join(dir, 'state', 'broker.db');
    const store = await openStore(`sqlite:${file}`, { clock });
    cleanups.push(() => store.close());
    await takeNonce(store, hex(16), 'nonce-mode-0000000', Date.now());
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(`${file}-wal`).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'state')).mode & 0o777).toBe(0o700);
  });

  it('a broker killed -9 mid-enrollment leaves every use of the code matched by one bound key', async () => {
    const child = await bundleChild(ENROLLER, 'enroller.ts', 'broker-enroller-');
    cleanups.push(() => child.dispose());
    const file = join(tempDir('botlink-broker-kill-'), 'broker.db');
    const code = codeRow({ usesLeft: 1_000_000 });
    const setup = await openStore(`sqlite:${file}`, { clock });
    await setup.addCode(code);
    await setup.close();
    let bound = 0;
    for (let kill = 0; kill < KILLS; kill++) {
      const enroller = spawn(process.execPath, [child.file, file, code.hmac], { stdio: ['ignore', 'pipe', 'inherit'] });
      const ended = closed(enroller);
      await once(createInterface({ input: enroller.stdout! }), 'line');
      await sleep(Math.random() * 20);
      enroller.kill('SIGKILL');
      expect(await ended).toEqual({ code: null, signal: 'SIGKILL' });

      const db = openDatabase(file);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      db.close();
      const store = await openStore(`sqlite:${file}`, { clock });
      const devices = await store.listDevices();
      const usesLeft = (await store.findCode(code.hmac))!.usesLeft;
      await store.close();
      expect(usesLeft + devices.length).toBe(1_000_000);
      expect(devices.every((d) => d.state === 'active' && d.keyId !== null)).toBe(true);
      expect(devices.length).toBeGreaterThan(bound);
      bound = devices.length;
    }
    console.log(`sqlite kill -9: ${KILLS} kills, ${bound} enrollments committed, none half-made`);
  });
});

const KILLS = 10;

/** Enrolls new devices with one code as fast as it can, saying "ready" after the first 20. */
const ENROLLER = `
import { randomBytes } from 'node:crypto';
import { openStore } from './src/broker/store/open.ts';
const [file, hmac] = process.argv.slice(2);
const store = await openStore('sqlite:' + file, { clock: { wallNow: () => Date.now() } });
for (let i = 0; ; i++) {
  const deviceId = 'SN-' + process.pid + '-' + i;
  const keyId = randomBytes(16).toString('hex');
  const { outcome } = await store.enroll({
    admission: { by: 'code', hmac }, key: { keyId, publicKey: 'pk-' + keyId },
    botId: 'bot-' + deviceId, deviceId, vendorId: 'V1', replace: false, now: Date.now(),
  });
  if (outcome !== 'ok') process.exit(3);
  if (i === 20) process.stdout.write('ready\\n');
}
`;

describe('the broker store on postgres, replicas', () => {
  it("frees a bot lock when its holder's connection dies", async () => {
    const p = await postgres.fresh();
    const [a, b] = [await p.open(), await p.open()];
    const entered = gate();
    const held = gate();
    const first = a.withBotLock('bot-D', async () => {
      entered.open();
      await held.promise;
      return 'a';
    });
    await entered.promise;
    const second = b.withBotLock('bot-D', async () => 'b');
    await postgres.lockWaiters(p, 1);
    const holders = await advisoryLocks(p.spec, true);
    expect(holders).toHaveLength(1);
    await server.query(p.spec, 'SELECT pg_terminate_backend($1)', [holders[0]]);
    // The server let go with the connection: the waiter enters while the first fn still runs.
    expect(await second).toBe('b');
    held.open();
    expect(await first).toBe('a');
    expect(await a.withBotLock('bot-D', async () => 'again')).toBe('again');
  });

  it('two replicas starting together on an empty database make the schema once', async () => {
    const p = await postgres.fresh();
    const stores = await Promise.all(Array.from({ length: 4 }, () => p.open()));
    const code = codeRow();
    await stores[0]!.addCode(code);
    expect(await stores[3]!.findCode(code.hmac)).toEqual(code);
    expect(await server.query(p.spec, 'SELECT version FROM broker_schema')).toEqual([{ version: POSTGRES_MIGRATIONS.length }]);
  });

  it('an unreachable server is an access error naming the URL without its password', async () => {
    const url = `postgres://botlink:hunter2@127.0.0.1:${server.port}/no_such_database`;
    const err = await openStore(url, { clock }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_ACCESS' });
    expect((err as Error).message).toContain(`postgres://botlink:***@127.0.0.1:${server.port}/no_such_database`);
    expect((err as Error).message).not.toContain('hunter2');
  });
});
