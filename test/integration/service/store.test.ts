import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceDbError } from '../../../src/service/store-schema.js';
import { ServiceStore } from '../../../src/service/store.js';

const dir = mkdtempSync(join(tmpdir(), 'botlink-service-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const seed = {
  accounts: [
    { accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] },
    { accessKeyId: 'AK2', secretKey: 'SK2', vendors: [{ vendorId: 'V2', bots: ['bot-2'] }] },
  ],
};
const device = { vendorId: 'V1', appId: '', deviceId: 'SN-1', type: 'PHYSICAL_ROBOT' as const, name: 'SN-1' };

let file: string;
let store: ServiceStore;
let n = 0;
beforeEach(() => {
  file = join(dir, `store-${n++}.db`);
  store = new ServiceStore(file);
  store.applySeed(seed);
});
afterEach(() => store.close());

describe('ServiceStore', () => {
  it('knows the seed: secrets, and which identities each account owns', () => {
    expect(store.secretOf('AK')).toBe('SK');
    expect(store.secretOf('nobody')).toBeUndefined();
    expect(store.owns('AK', { kind: 'bot', id: 'bot-1' })).toBe(true);
    expect(store.owns('AK', { kind: 'vendor', id: 'V1' })).toBe(true);
    expect(store.owns('AK', { kind: 'bot', id: 'bot-2' })).toBe(false);
    expect(store.owns('AK', { kind: 'vendor', id: 'V2' })).toBe(false);
  });

  it('re-applying a seed updates secrets and keeps the rest', () => {
    store.applySeed({ accounts: [{ accessKeyId: 'AK', secretKey: 'NEW', vendors: [] }] });
    expect(store.secretOf('AK')).toBe('NEW');
    expect(store.owns('AK', { kind: 'bot', id: 'bot-1' })).toBe(true);
  });

  it('claims a nonce once per account', () => {
    store.transaction(() => {
      expect(store.claimNonce('AK', 'n1', 1000)).toBe(true);
      expect(store.claimNonce('AK', 'n1', 1000)).toBe(false);
      expect(store.claimNonce('AK2', 'n1', 1000)).toBe(true);
    });
  });

  it('purges nonces and tokens whose expiry passed', () => {
    store.transaction(() => {
      store.claimNonce('AK', 'old', 1000);
      store.claimNonce('AK', 'new', 3000);
      store.saveToken('h-old', { kind: 'access', accessKeyId: 'AK', identity: { kind: 'bot', id: 'bot-1' }, expiresAt: 1000 });
      store.saveToken('h-new', { kind: 'refresh', accessKeyId: 'AK', identity: { kind: 'vendor', id: 'V1' }, expiresAt: 3000 });
    });
    store.purgeExpired(2000);
    expect(store.transaction(() => store.claimNonce('AK', 'old', 5000))).toBe(true);
    expect(store.transaction(() => store.claimNonce('AK', 'new', 5000))).toBe(false);
    expect(store.findToken('h-old')).toBeUndefined();
    expect(store.findToken('h-new')).toEqual({
      kind: 'refresh',
      accessKeyId: 'AK',
      identity: { kind: 'vendor', id: 'V1' },
      expiresAt: 3000,
    });
  });

  it('a refresh token keeps only its two newest refreshed access tokens, however often it is used', async () => {
    const access = { kind: 'access' as const, accessKeyId: 'AK', identity: { kind: 'bot' as const, id: 'bot-1' }, expiresAt: 9000 };
    for (let i = 1; i <= 500; i++) store.transaction(() => store.saveRefreshedToken('r', 20_000, `a${i}`, access));
    store.transaction(() => store.saveRefreshedToken('other', 20_000, 'b1', access));
    await store.committed();
    expect(['a498', 'a499', 'a500', 'b1'].map((h) => store.findToken(h) !== undefined)).toEqual([false, true, true, true]);
    const reader = new Database(file, { readonly: true });
    try {
      const count = (table: string): number => (reader.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
      expect(count('tokens')).toBe(3);
      expect(count('refreshed')).toBe(2);
      store.purgeExpired(25_000);
      await store.committed();
      expect(count('tokens')).toBe(0);
      expect(count('refreshed')).toBe(0);
    } finally {
      reader.close();
    }
  });

  it('registers a device once per (vendorId, deviceId), under that vendor', () => {
    expect(store.registerDevice(device, 'bot-a')).toBe('bot-a');
    expect(store.registerDevice({ ...device, name: 'other' }, 'bot-b')).toBe('bot-a');
    expect(store.owns('AK', { kind: 'bot', id: 'bot-a' })).toBe(true);
    expect(store.owns('AK2', { kind: 'bot', id: 'bot-a' })).toBe(false);
    expect(store.registerDevice({ ...device, vendorId: 'V2' }, 'bot-c')).toBe('bot-c');
  });

  it('a transaction that throws rolls back alone; the rest of its batch commits', async () => {
    store.transaction(() => store.claimNonce('AK', 'kept', 1000));
    expect(() =>
      store.transaction(() => {
        store.claimNonce('AK', 'rolled-back', 1000);
        store.saveToken('h-rolled-back', { kind: 'access', accessKeyId: 'AK', identity: { kind: 'bot', id: 'bot-1' }, expiresAt: 9000 });
        throw new Error('boom');
      }),
    ).toThrow('boom');
    await store.committed();
    expect(store.transaction(() => store.claimNonce('AK', 'rolled-back', 1000))).toBe(true);
    expect(store.transaction(() => store.claimNonce('AK', 'kept', 1000))).toBe(false);
    expect(store.findToken('h-rolled-back')).toBeUndefined();
  });

  it('inBatch() writes commit with the batch, without a savepoint of their own', async () => {
    const access = { kind: 'access' as const, accessKeyId: 'AK', identity: { kind: 'bot' as const, id: 'bot-1' }, expiresAt: 9000 };
    store.inBatch(() => {
      expect(store.claimNonce('AK', 'pair', 1000)).toBe(true);
      store.saveTokenPair('h-a', access, 'h-r', { ...access, kind: 'refresh' });
    });
    await store.committed();
    store.close();
    store = new ServiceStore(file);
    expect(store.findToken('h-a')?.kind).toBe('access');
    expect(store.findToken('h-r')?.kind).toBe('refresh');
    expect(store.inBatch(() => store.claimNonce('AK', 'pair', 1000))).toBe(false);
  });

  it('getToken writes touch only the last pages of their tables: under 4 KiB of WAL per call in batches of 25', async () => {
    const access = { kind: 'access' as const, accessKeyId: 'AK', identity: { kind: 'bot' as const, id: 'bot-1' }, expiresAt: 9000 };
    const hex = (): string => randomBytes(32).toString('hex');
    const write = (): void =>
      store.inBatch(() => {
        store.claimNonce('AK', randomBytes(16).toString('hex'), 1000);
        store.saveTokenPair(hex(), access, hex(), { ...access, kind: 'refresh', expiresAt: 90_000 });
      });
    // Enough rows that random keys would land on a different page each time (the first schema wrote ~17 KiB per call).
    for (let i = 0; i < 100; i++) {
      for (let j = 0; j < 25; j++) write();
      await store.committed();
    }
    const before = statSync(`${file}-wal`).size;
    for (let i = 0; i < 40; i++) {
      for (let j = 0; j < 25; j++) write();
      await store.committed();
    }
    expect((statSync(`${file}-wal`).size - before) / 1000).toBeLessThan(4096);
  });

  it('moves a first-schema database (tokens and nonces keyed by hash and nonce) to appended tables, keeping its rows', () => {
    const old = join(dir, `first-schema-${n++}.db`);
    const db = new Database(old);
    db.exec(`
      CREATE TABLE tokens (
        hash TEXT PRIMARY KEY, kind TEXT NOT NULL, access_key_id TEXT NOT NULL,
        identity_kind TEXT NOT NULL, identity_id TEXT NOT NULL, expires_at INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX tokens_by_expiry ON tokens (expires_at);
      CREATE TABLE nonces (
        access_key_id TEXT NOT NULL, nonce TEXT NOT NULL, expires_at INTEGER NOT NULL,
        PRIMARY KEY (access_key_id, nonce)
      ) WITHOUT ROWID;
      CREATE INDEX nonces_by_expiry ON nonces (expires_at);
      INSERT INTO tokens VALUES ('h-old', 'refresh', 'AK', 'bot', 'bot-1', 9000);
      INSERT INTO nonces VALUES ('AK', 'n-old', 5000);
    `);
    db.close();
    const other = new ServiceStore(old);
    try {
      expect(other.findToken('h-old')).toEqual({
        kind: 'refresh',
        accessKeyId: 'AK',
        identity: { kind: 'bot', id: 'bot-1' },
        expiresAt: 9000,
      });
      expect(other.transaction(() => other.claimNonce('AK', 'n-old', 5000))).toBe(false);
      other.purgeExpired(6000);
      expect(other.transaction(() => other.claimNonce('AK', 'n-old', 5000))).toBe(true);
    } finally {
      other.close();
    }
    const reader = new Database(old, { readonly: true });
    try {
      const sql = reader
        .prepare("SELECT name, sql FROM sqlite_master WHERE name LIKE 'tokens%' OR name LIKE 'nonces%' ORDER BY name")
        .all();
      expect(JSON.stringify(sql)).not.toMatch(/WITHOUT ROWID|_v1/);
      expect(sql.map((r) => (r as { name: string }).name)).toEqual(['nonces', 'nonces_by_expiry', 'tokens', 'tokens_by_expiry']);
      expect(reader.pragma('user_version', { simple: true })).toBe(1);
    } finally {
      reader.close();
    }
  });

  it('opens a file of the releases before schema versions (the current tables at user_version 0), keeping its rows', async () => {
    store.transaction(() =>
      store.saveToken('h', { kind: 'access', accessKeyId: 'AK', identity: { kind: 'bot', id: 'bot-1' }, expiresAt: 9000 }),
    );
    store.close();
    const raw = new Database(file);
    expect(raw.pragma('user_version', { simple: true })).toBe(1);
    raw.pragma('user_version = 0');
    raw.close();
    store = new ServiceStore(file);
    expect(store.findToken('h')?.expiresAt).toBe(9000);
    expect(store.secretOf('AK')).toBe('SK');
    const reader = new Database(file, { readonly: true });
    try {
      expect(reader.pragma('user_version', { simple: true })).toBe(1);
    } finally {
      reader.close();
    }
  });

  it('refuses a file of a newer release with a ServiceDbError naming it, and leaves it alone', () => {
    const newer = join(dir, `newer-${n++}.db`);
    const raw = new Database(newer);
    raw.pragma('user_version = 9');
    raw.close();
    expect(() => new ServiceStore(newer)).toThrow(ServiceDbError);
    expect(() => new ServiceStore(newer)).toThrow(
      `cannot open database ${newer}: it has schema version 9 but this botlink knows only up to 1`,
    );
    const reader = new Database(newer, { readonly: true });
    try {
      expect([reader.pragma('user_version', { simple: true }), reader.prepare('SELECT count(*) FROM sqlite_master').pluck().get()]).toEqual(
        [9, 0],
      );
    } finally {
      reader.close();
    }
  });

  it('a second store on the same file (a second serve --db) sees its nonces, tokens, ids and seed, and they see its', async () => {
    const other = new ServiceStore(file);
    try {
      const record = { kind: 'access' as const, accessKeyId: 'AK', identity: { kind: 'bot' as const, id: 'bot-1' }, expiresAt: 9000 };
      store.transaction(() => store.saveToken('h1', record));
      await store.committed();
      expect(other.findToken('h1')).toEqual(record);
      store.transaction(() => store.claimNonce('AK', 'n1', 9000));
      await store.committed();
      expect(other.transaction(() => other.claimNonce('AK', 'n1', 9000))).toBe(false);
      // Ids come from memory: neither store may hand out one the other has used.
      other.transaction(() => other.saveToken('h2', record));
      await other.committed();
      store.transaction(() => store.saveToken('h3', record));
      await store.committed();
      expect([store.findToken('h2'), other.findToken('h3')]).toEqual([record, record]);
      // A seed applied by the other process: each cache on its own.
      expect(store.owns('AK', { kind: 'vendor', id: 'V1' })).toBe(true);
      other.applySeed({ accounts: [{ accessKeyId: 'AK2', secretKey: 'SK2', vendors: [{ vendorId: 'V1', bots: [] }] }] });
      await other.committed();
      expect(store.owns('AK', { kind: 'vendor', id: 'V1' })).toBe(false);
      expect(store.secretOf('AK')).toBe('SK');
      other.applySeed({ accounts: [{ accessKeyId: 'AK', secretKey: 'NEW', vendors: [] }] });
      await other.committed();
      expect(store.secretOf('AK')).toBe('NEW');
    } finally {
      other.close();
    }
  });

  it('group-commits: writes of one turn reach the file together, once committed() resolves', async () => {
    const reader = new Database(file, { readonly: true });
    try {
      const count = (): number => (reader.prepare('SELECT count(*) AS n FROM nonces').get() as { n: number }).n;
      store.transaction(() => store.claimNonce('AK', 'a', 1000));
      store.transaction(() => store.claimNonce('AK', 'b', 1000));
      const pending = store.committed();
      expect(count()).toBe(0);
      await pending;
      expect(count()).toBe(2);
      await expect(store.committed()).resolves.toBeUndefined();
    } finally {
      reader.close();
    }
  });

  it('close() commits what is pending', () => {
    store.transaction(() => store.claimNonce('AK', 'late', 1000));
    store.close();
    store = new ServiceStore(file);
    expect(store.transaction(() => store.claimNonce('AK', 'late', 1000))).toBe(false);
  });

  it('keeps everything across a reopen of the same file', () => {
    store.transaction(() =>
      store.saveToken('h', { kind: 'access', accessKeyId: 'AK', identity: { kind: 'bot', id: 'bot-1' }, expiresAt: 9000 }),
    );
    store.registerDevice(device, 'bot-a');
    store.close();
    store = new ServiceStore(file);
    expect(store.findToken('h')?.expiresAt).toBe(9000);
    expect(store.registerDevice(device, 'bot-z')).toBe('bot-a');
  });

  it('creates its database 0600 even under umask 0, and its WAL side files follow', () => {
    const fresh = join(dir, `fresh-${n++}.db`);
    const umask = process.umask(0);
    let other: ServiceStore | undefined;
    try {
      other = new ServiceStore(fresh);
      other.transaction(() => other!.claimNonce('AK', 'n', 1000));
      other.close();
      other = new ServiceStore(fresh);
      for (const f of [fresh, `${fresh}-wal`, `${fresh}-shm`]) expect((statSync(f).mode & 0o777).toString(8), f).toBe('600');
    } finally {
      other?.close();
      process.umask(umask);
    }
  });

  it('makes an older 0644 database 0600 on open', () => {
    const older = join(dir, `older-${n++}.db`);
    new Database(older).close();
    chmodSync(older, 0o644);
    const other = new ServiceStore(older);
    try {
      for (const f of [older, `${older}-wal`, `${older}-shm`]) expect((statSync(f).mode & 0o777).toString(8), f).toBe('600');
    } finally {
      other.close();
    }
  });

  it('an unopenable file is a ServiceDbError naming it', () => {
    const bad = join(dir, 'missing-dir', 'x.db');
    expect(() => new ServiceStore(bad)).toThrow(ServiceDbError);
    expect(() => new ServiceStore(bad)).toThrow(/missing-dir/);
  });
});
