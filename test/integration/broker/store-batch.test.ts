// The broker store's faster path: spendVerified (key and token read, nonce, hit and last-seen as one step) on SQLite and PostgreSQL,
// and SQLite's group commit, where the writes of one turn share a transaction yet succeed or fail alone.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../../src/broker/store/open.js';
import { type BrokerStore, type KeyRow, LAST_SEEN_STEP_MS, type VerifiedRequestSpend } from '../../../src/broker/store/types.js';
import { byCode, codeRow, hitIn, takeNonce } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { type PostgresServer, startPostgres } from '../../helpers/postgres.js';

const clock = { wallNow: () => Date.now() };
const { tempDir, cleanups } = useHarness();

let server: PostgresServer;
beforeAll(async () => {
  server = await startPostgres();
}, 120_000);
afterAll(() => server?.stop(), 60_000);

async function open(spec: string): Promise<BrokerStore> {
  const store = await openStore(spec, { clock });
  cleanups.push(() => store.close());
  return store;
}

const stores: Record<'sqlite' | 'postgres', () => Promise<BrokerStore>> = {
  sqlite: () => open(`sqlite:${join(tempDir('botlink-broker-batch-'), 'broker.db')}`),
  postgres: async () => open(await server.freshDatabase()),
};

/** An enrolled key, bot-<n>'s, so that last-seen has a row to land on. */
async function enrolled(store: BrokerStore, n: number): Promise<string> {
  const keyId = `${n}`.padStart(32, 'a');
  const code = codeRow();
  await store.addCode(code);
  expect((await store.enroll(byCode(code, { key: { keyId, publicKey: 'x'.repeat(43) }, botId: `bot-${n}`, now: 1 }))).outcome).toBe('ok');
  return keyId;
}

describe.each(['sqlite', 'postgres'] as const)('spendVerified on %s', (kind) => {
  const publicKey = 'x'.repeat(43);
  const spendOf = (keyId: string, nonce: string, now: number, key = publicKey, limit = 2): VerifiedRequestSpend => ({
    keyId,
    publicKey: key,
    nonce,
    keepUntil: Date.now() + 360_000,
    window: { bucket: `key:${keyId}/3600000`, start: 0, limit },
    now,
  });

  it('counts every verified request, then takes its nonce only within the limit; last seen only for a new nonce', async () => {
    const store = await stores[kind]();
    const keyId = await enrolled(store, 1);
    const spend = async (nonce: string, now: number) =>
      (await store.spendVerified(spendOf(keyId, nonce, now, publicKey, 3))) as { spent: unknown };
    const minute = LAST_SEEN_STEP_MS;
    expect((await spend('nonce-1', 100)).spent).toEqual({ count: 1, replayed: false });
    expect(await store.findKey(keyId)).toMatchObject({ lastSeenAt: 100 });
    // A replay is counted (its signature verified) but takes nothing and sees no one.
    expect((await spend('nonce-1', 100 + minute)).spent).toEqual({ count: 2, replayed: true });
    expect(await store.findKey(keyId)).toMatchObject({ lastSeenAt: 100 });
    expect((await spend('nonce-2', 100 + minute)).spent).toEqual({ count: 3, replayed: false });
    expect(await store.findKey(keyId)).toMatchObject({ lastSeenAt: 100 + minute });
    // Past the limit: counted, and no nonce taken, no one seen — the route answers 429.
    expect((await spend('nonce-3', 100 + 2 * minute)).spent).toEqual({ count: 4, replayed: true });
    expect(await store.findKey(keyId)).toMatchObject({ lastSeenAt: 100 + minute });
    expect(await takeNonce(store, keyId, 'nonce-3', Date.now() + 360_000)).toBe(true);
    // The nonce of a verified spend is the one a plain spend sees, and its count the one a plain spend continues.
    expect(await takeNonce(store, keyId, 'nonce-2', Date.now() + 360_000)).toBe(false);
    expect(await hitIn(store, `key:${keyId}/3600000`, 0)).toBe(5);
  });

  it('last seen moves forward only, and only a step at a time', async () => {
    const store = await stores[kind]();
    const keyId = await enrolled(store, 4);
    const seen = async (nonce: string, at: number) => {
      expect((await store.spendVerified(spendOf(keyId, nonce, at, publicKey, 100))) as { spent: unknown }).toMatchObject({
        spent: { replayed: false },
      });
      return ((await store.findKey(keyId)) as KeyRow | undefined)?.lastSeenAt;
    };
    const minute = LAST_SEEN_STEP_MS;
    expect(await seen('a', 2 * minute)).toBe(2 * minute);
    expect(await seen('b', minute)).toBe(2 * minute);
    expect(await seen('c', 3 * minute - 1)).toBe(2 * minute);
    expect(await seen('d', 3 * minute)).toBe(3 * minute);
  });

  it('reads the key as it was before this spend, with no token, then with the token its botId has', async () => {
    const store = await stores[kind]();
    const keyId = await enrolled(store, 2);
    const key = await store.findKey(keyId);
    expect(await store.spendVerified(spendOf(keyId, 'n-1', 100))).toEqual({ key, token: undefined, spent: { count: 1, replayed: false } });
    const token = {
      botId: 'bot-2',
      accessSealed: Buffer.from('sealed access'),
      accessExpiresAt: 5000,
      accessLifetimeS: 7200,
      refreshSealed: null,
      refreshExpiresAt: null,
      updatedAt: 4000,
    };
    expect(await store.keepToken(keyId, token)).toBe(true);
    expect(await store.spendVerified(spendOf(keyId, 'n-2', 200))).toEqual({
      key: { ...key, lastSeenAt: 100 },
      token,
      spent: { replayed: false, count: 2 },
    });
  });

  it('writes nothing for an unknown key, a revoked one, or a public key that is not the stored one', async () => {
    const store = await stores[kind]();
    expect(await store.spendVerified(spendOf('f'.repeat(32), 'n-1', 100))).toEqual({ key: undefined });
    expect(await takeNonce(store, 'f'.repeat(32), 'n-1', Date.now() + 60_000)).toBe(true);

    const keyId = await enrolled(store, 3);
    const other = await store.spendVerified(spendOf(keyId, 'n-2', 100, 'y'.repeat(43)));
    expect(other).toMatchObject({ key: { keyId, state: 'active', lastSeenAt: null }, spent: undefined });

    expect((await store.revoke('bot-3', 150)).keyIds).toEqual([keyId]);
    const revoked = await store.spendVerified(spendOf(keyId, 'n-3', 200));
    expect(revoked).toMatchObject({ key: { keyId, state: 'revoked', lastSeenAt: null }, spent: undefined });

    // Neither refused spend took its nonce, counted, or marked the key seen.
    expect(await takeNonce(store, keyId, 'n-2', Date.now() + 60_000)).toBe(true);
    expect(await takeNonce(store, keyId, 'n-3', Date.now() + 60_000)).toBe(true);
    expect(await hitIn(store, `key:${keyId}/3600000`, 0)).toBe(1);
    expect(await store.findKey(keyId)).toMatchObject({ lastSeenAt: null });
  });
});

describe('SQLite group commit', () => {
  it('writes asked for in one turn stand or fail each alone, in the order asked', async () => {
    const store = await stores.sqlite();
    const oneUse = codeRow({ hmac: 'one-use' });
    await store.addCode(oneUse);
    const commit = (n: number) =>
      byCode(oneUse, { key: { keyId: `${n}`.padStart(32, 'b'), publicKey: 'y'.repeat(43) }, botId: `bot-b${n}` });
    // One turn: two enrollments racing for one use, a duplicate code (a failing statement), a nonce.
    const [first, second, duplicate, nonce] = await Promise.allSettled([
      store.enroll(commit(1)),
      store.enroll(commit(2)),
      store.addCode(oneUse),
      takeNonce(store, 'k'.repeat(32), 'n-1', Date.now() + 60_000),
    ]);
    expect(first).toEqual({ status: 'fulfilled', value: { outcome: 'ok', replaced: [] } });
    expect(second).toEqual({ status: 'fulfilled', value: { outcome: 'spent', replaced: [] } });
    expect(duplicate.status).toBe('rejected');
    expect(nonce).toEqual({ status: 'fulfilled', value: true });
    expect(await store.findKey(commit(1).key.keyId)).toMatchObject({ botId: 'bot-b1', state: 'active' });
    expect(await store.findKey(commit(2).key.keyId)).toBeUndefined();
    expect(await store.findCode('one-use')).toMatchObject({ usesLeft: 0 });
  });

  it('commits what a turn wrote before the store closes', async () => {
    const spec = `sqlite:${join(tempDir('botlink-broker-batch-'), 'broker.db')}`;
    const store = await openStore(spec, { clock });
    const written = store.addCode(codeRow({ hmac: 'at-close', usesLeft: 5 }));
    await store.close();
    await written;
    expect(await (await open(spec)).findCode('at-close')).toMatchObject({ usesLeft: 5 });
  });
});
