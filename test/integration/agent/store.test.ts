import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS, migrate, StoreError } from '../../../src/agent/store/store-file.js';
import { storeIdentity, TokenStore, type StoreIdentity, type TokenPair } from '../../../src/agent/store/token-store.js';

const bot: StoreIdentity = { baseUrl: 'https://cloud.example', accessKeyId: 'AK', kind: 'bot', id: 'bot-1' };
const pair: TokenPair = {
  accessToken: 'acc-1',
  accessExpiresAt: 1_763_690_400_000,
  refreshToken: 'ref-1',
  refreshExpiresAt: 1_764_288_000_000,
  issuedAt: 1_763_683_200_000,
};

let dir: string;
let stores: TokenStore[];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-store-'));
  stores = [];
});
afterEach(() => {
  for (const s of stores) s.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(stateDir = dir, opts: Parameters<typeof TokenStore.open>[1] = {}): TokenStore {
  const store = TokenStore.open(stateDir, opts);
  stores.push(store);
  return store;
}

function closeAll(): void {
  for (const s of stores.splice(0)) s.close();
}

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

describe('TokenStore data', () => {
  it('round-trips a pair, an access update and a clear, across reopening', () => {
    const store = open();
    expect(store.loadPair(bot)).toBeUndefined();
    store.savePair(bot, pair);
    expect(store.loadPair(bot)).toEqual(pair);
    const refreshed = { ...pair, accessToken: 'acc-2', accessExpiresAt: pair.accessExpiresAt + 1000, accessIssuedAt: pair.issuedAt + 1000 };
    store.savePair(bot, refreshed);
    closeAll();
    const again = open();
    expect(again.loadPair(bot)).toEqual(refreshed);
    again.clearPair();
    expect(again.loadPair(bot)).toBeUndefined();
  });

  it('creates stateDir 0700 and the database 0600, with no side file left between writes', () => {
    const stateDir = join(dir, 'state', 'nested');
    const store = open(stateDir);
    store.savePair(bot, pair);
    expect(mode(stateDir)).toBe(0o700);
    expect(store.path).toBe(join(stateDir, 'botlink.db'));
    expect(mode(store.path)).toBe(0o600);
    // A rollback journal: no -wal or -shm, which a reader would have to create (impossible on a full or read-only disk).
    expect(readdirSync(stateDir)).toEqual(['botlink.db']);
  });

  it('tightens an existing database file to 0600', () => {
    writeFileSync(join(dir, 'botlink.db'), '', { mode: 0o644 });
    expect(mode(open().path)).toBe(0o600);
  });

  it.each([
    ['botId', { ...bot, id: 'bot-2' }],
    ['accessKeyId', { ...bot, accessKeyId: 'AK2' }],
    ['baseUrl', { ...bot, baseUrl: 'https://other.example' }],
  ])('discards a pair cached for another %s', (_what, other) => {
    const store = open();
    store.savePair(bot, pair);
    expect(store.loadPair(other)).toBeUndefined();
    expect(store.peekPair()).toBeUndefined();
  });

  it('keeps a vendor pair beside the bot pair: provisioning does not evict the bot token', () => {
    const store = open();
    const vendor: StoreIdentity = { ...bot, kind: 'vendor', id: 'V1' };
    store.savePair(bot, pair);
    expect(store.loadPair(vendor)).toBeUndefined();
    store.savePair(vendor, { ...pair, accessToken: 'vendor-acc' });
    expect(store.loadPair(bot)).toEqual(pair);
    expect(store.loadPair(vendor)?.accessToken).toBe('vendor-acc');
    expect(store.peekPair()?.identity).toEqual(bot);
    expect(store.loadPair({ ...bot, id: 'bot-2' })).toBeUndefined();
    expect(store.peekPair()?.identity).toEqual(vendor);
  });

  it.each([
    ['botId', { ...bot, id: 'bot-2' }],
    ['kind', { ...bot, kind: 'vendor' as const }],
    ['accessKeyId', { ...bot, accessKeyId: 'AK2' }],
    ["broker mode's empty accessKeyId", { ...bot, accessKeyId: '' }],
    ['baseUrl', { ...bot, baseUrl: 'https://other.example' }],
  ])('pairFor hands out no pair cached for another %s, and discards nothing', (_what, other) => {
    const store = open();
    store.savePair(bot, pair);
    expect(store.pairFor(other)).toBeUndefined();
    expect(store.pairFor(bot)).toEqual(pair);
  });

  it("keys a broker's pair by accessKeyId '': the same device signing is another identity", () => {
    const store = open();
    const brokered = storeIdentity({ baseUrl: bot.baseUrl, accessKeyId: '' }, { kind: 'bot', id: bot.id });
    store.savePair(brokered, { ...pair, refreshToken: '' });
    expect(store.pairFor(brokered)?.refreshToken).toBe('');
    expect(store.pairFor(storeIdentity({ baseUrl: bot.baseUrl, accessKeyId: 'AK' }, brokered))).toBeUndefined();
    expect(store.loadPair(brokered)?.accessToken).toBe(pair.accessToken);
  });

  it('peekPair reports the identity without discarding', () => {
    const store = open();
    store.savePair(bot, pair);
    expect(store.peekPair()).toEqual({ identity: bot, pair });
    expect(store.peekPair()).toEqual({ identity: bot, pair });
  });

  it('keeps provisioned botIds per (baseUrl, accessKeyId, vendorId, deviceId)', () => {
    const store = open();
    const key = { baseUrl: bot.baseUrl, accessKeyId: 'AK', vendorId: 'V1', deviceId: 'SN1' };
    expect(store.getProvisionedBotId(key)).toBeUndefined();
    store.setProvisionedBotId(key, 'bot-9');
    store.setProvisionedBotId({ ...key, deviceId: 'SN2' }, 'bot-10');
    expect(store.getProvisionedBotId(key)).toBe('bot-9');
    expect(store.getProvisionedBotId({ ...key, vendorId: 'V2' })).toBeUndefined();
    expect(store.getProvisionedBotId({ ...key, accessKeyId: 'AK2' })).toBeUndefined();
    expect(store.getProvisionedBotId({ ...key, baseUrl: 'https://other.example' })).toBeUndefined();
    store.setProvisionedBotId(key, 'bot-11');
    expect(store.getProvisionedBotId(key)).toBe('bot-11');
    expect(store.getProvisionedBotId({ ...key, deviceId: 'SN2' })).toBe('bot-10');
  });

  it('keeps meta values', () => {
    const store = open();
    expect(store.getMeta('lastServerTimeMs')).toBeUndefined();
    store.setMeta('lastServerTimeMs', '1763683200000');
    store.setMeta('lastServerTimeMs', '1763683201000');
    expect(store.getMeta('lastServerTimeMs')).toBe('1763683201000');
  });

  it('passes integrity_check', () => {
    expect(open().integrityCheck()).toBe('ok');
  });
});

describe('TokenStore schema versions', () => {
  function userVersion(path: string): number {
    const db = new Database(path, { readonly: true });
    try {
      return db.pragma('user_version', { simple: true }) as number;
    } finally {
      db.close();
    }
  }

  it('migrates an empty file to the current version', () => {
    writeFileSync(join(dir, 'botlink.db'), '');
    const store = open();
    store.savePair(bot, pair);
    closeAll();
    expect(userVersion(join(dir, 'botlink.db'))).toBe(MIGRATIONS.length);
  });

  it('migrates a version-0 database that holds other tables', () => {
    const db = new Database(join(dir, 'botlink.db'));
    db.exec('CREATE TABLE unrelated (x INTEGER)');
    db.close();
    open().setMeta('k', 'v');
    closeAll();
    expect(userVersion(join(dir, 'botlink.db'))).toBe(MIGRATIONS.length);
    expect(open().getMeta('k')).toBe('v');
  });

  it('applies only the migrations after the stored version, once', () => {
    const store = open();
    store.savePair(bot, pair);
    closeAll();
    const path = store.path;
    const next = [...MIGRATIONS, 'ALTER TABLE meta ADD COLUMN note TEXT'];
    const db = new Database(path);
    migrate(db, next);
    migrate(db, next);
    expect(db.pragma('user_version', { simple: true })).toBe(next.length);
    expect(db.prepare('SELECT count(*) FROM pragma_table_info(?) WHERE name = ?').pluck().get('meta', 'note')).toBe(1);
    db.close();
  });

  it('v2 keeps a v1 pair and records when the access token was issued from then on', () => {
    mkdirSync(dir, { recursive: true });
    const v1 = new Database(join(dir, 'botlink.db'));
    migrate(v1, MIGRATIONS.slice(0, 1));
    v1.prepare(
      `INSERT INTO token_pair VALUES (1, 'https://cloud.example', 'AK', 'bot', 'bot-1', 'acc-1', ${pair.accessExpiresAt}, 'ref-1', ${pair.refreshExpiresAt}, ${pair.issuedAt})`,
    ).run();
    v1.close();
    const store = open();
    expect(store.loadPair(bot)).toEqual(pair);
    const refreshed = { ...pair, accessToken: 'acc-2', accessExpiresAt: pair.accessExpiresAt + 5000, accessIssuedAt: pair.issuedAt + 5000 };
    store.savePair(bot, refreshed);
    expect(store.loadPair(bot)).toEqual(refreshed);
  });

  it('refuses a database from a newer release, names the fix and leaves the file alone', () => {
    const path = join(dir, 'botlink.db');
    const db = new Database(path);
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    let corrupt = 0;
    let error: unknown;
    try {
      open(dir, { onCorrupt: () => corrupt++ });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('ERR_STORE_VERSION');
    expect((error as Error).message).toMatch(new RegExp(`schema version ${MIGRATIONS.length + 1} .*newer release`));
    expect((error as StoreError).fix).toMatch(/^upgrade botlink/);
    expect(corrupt).toBe(0);
    expect(userVersion(path)).toBe(MIGRATIONS.length + 1);
  });
});

describe('TokenStore corruption and access errors', () => {
  const wallMs = 1_763_683_200_123;
  const clock = { wallNow: () => wallMs, monoNow: () => 0 };

  function realDatabase(): string {
    const store = TokenStore.open(dir);
    store.savePair(bot, pair);
    store.close();
    // One transaction: 300 synchronous commits would cost seconds of fsync.
    const db = new Database(store.path);
    const put = db.prepare('INSERT INTO provisioned_bot VALUES (?, ?, ?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < 300; i++) put.run(bot.baseUrl, 'AK', 'V', `SN${i}`, `b${i}`);
    })();
    db.close();
    return store.path;
  }

  const cases: [string, () => void][] = [
    ['random bytes', () => writeFileSync(join(dir, 'botlink.db'), randomBytes(8192))],
    ['a truncated real database', () => truncateSync(realDatabase(), 16 * 1024)],
    [
      'a table with the wrong columns',
      () => {
        const db = new Database(join(dir, 'botlink.db'));
        db.exec(`CREATE TABLE token_pair (x TEXT, y TEXT); PRAGMA user_version = ${MIGRATIONS.length}`);
        db.close();
      },
    ],
  ];

  it.each(cases)('moves %s aside, reports it and starts fresh', (_name, damage) => {
    damage();
    const before = readFileSync(join(dir, 'botlink.db'));
    const reports: { movedTo: string; error: unknown }[] = [];
    const store = open(dir, { clock, onCorrupt: (info) => reports.push(info) });
    expect(reports).toHaveLength(1);
    expect(reports[0]?.movedTo).toBe(join(dir, `botlink.db.corrupt-${wallMs}`));
    expect(readFileSync(reports[0]!.movedTo)).toEqual(before);
    expect(reports[0]?.error).toBeInstanceOf(Database.SqliteError);
    expect(store.integrityCheck()).toBe('ok');
    expect(store.loadPair(bot)).toBeUndefined();
    store.savePair(bot, pair);
    expect(store.loadPair(bot)).toEqual(pair);
    expect(mode(store.path)).toBe(0o600);
  });

  it('names the path and the fix when stateDir cannot be created (a file is in the way)', () => {
    const file = join(dir, 'not-a-dir');
    writeFileSync(file, 'x');
    const stateDir = join(file, 'state');
    let error: unknown;
    try {
      open(stateDir);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('ERR_STORE_ACCESS');
    expect((error as StoreError).retry).toBe('needs-config');
    expect((error as Error).message).toContain(join(stateDir, 'botlink.db'));
    expect((error as Error).message).toContain('ENOTDIR');
    expect((error as StoreError).fix).toMatch(/^stateDir must be a directory/);
    expect(existsSync(stateDir)).toBe(false);
  });
});

describe('TokenStore lock key', () => {
  it('is random per database and read alike by every opener', () => {
    const a = open();
    const b = open();
    const other = open(join(dir, 'other'));
    expect(a.lockKey).toMatch(/^[0-9a-f]{32}$/);
    expect(b.lockKey).toBe(a.lockKey);
    expect(other.lockKey).not.toBe(a.lockKey);
  });

  it('migration v4 gives a v3 database a key, drops the leases table and keeps the pair', () => {
    const path = join(dir, 'botlink.db');
    const v3 = new Database(path);
    migrate(v3, MIGRATIONS.slice(0, 3));
    v3.close();
    open().savePair(bot, pair);
    closeAll();
    const db = new Database(path, { readonly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
    db.close();
    expect(tables).not.toContain('leases');
    expect(open().lockKey).toMatch(/^[0-9a-f]{32}$/);
    expect(open().loadPair(bot)).toEqual(pair);
  });
});

describe('TokenStore journal', () => {
  function journalMode(path: string): string {
    const db = new Database(path, { readonly: true });
    try {
      return db.pragma('journal_mode', { simple: true }) as string;
    } finally {
      db.close();
    }
  }

  it('turns a WAL database of an earlier release into a rollback journal, keeping its pair', () => {
    const store = open();
    store.savePair(bot, pair);
    closeAll();
    const db = new Database(store.path);
    db.pragma('journal_mode = WAL');
    db.close();
    expect(journalMode(store.path)).toBe('wal');
    expect(open().loadPair(bot)).toEqual(pair);
    closeAll();
    expect(journalMode(store.path)).toBe('delete');
    expect(readdirSync(dir)).toEqual(['botlink.db']);
  });

  it('leaves WAL in place, without waiting, while another connection has the file open', () => {
    const path = open().path;
    closeAll();
    const holder = new Database(path);
    holder.pragma('journal_mode = WAL');
    holder.prepare('SELECT 1').get();
    try {
      const started = performance.now();
      open().savePair(bot, pair);
      expect(performance.now() - started).toBeLessThan(4000);
      expect(holder.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      holder.close();
    }
    expect(open().loadPair(bot)).toEqual(pair);
  });
});

describe('TokenStore read-only (botlink status)', () => {
  const readOnly = (): TokenStore => open(dir, { readOnly: true });

  it('reads the pair and the key, and refuses writes', () => {
    const store = open();
    store.savePair(bot, pair);
    const key = store.lockKey;
    closeAll();
    const reader = readOnly();
    expect(reader.peekPair()).toEqual({ identity: bot, pair });
    expect(reader.lockKey).toBe(key);
    expect(() => reader.savePair(bot, pair)).toThrow(/readonly/);
  });

  it('creates nothing when there is no database', () => {
    expect(readOnly).toThrow(StoreError);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('leaves a damaged file exactly where and as it is, and says the daemon will move it', () => {
    writeFileSync(join(dir, 'botlink.db'), randomBytes(8192));
    const before = readFileSync(join(dir, 'botlink.db'));
    let error: unknown;
    try {
      readOnly();
    } catch (e) {
      error = e;
    }
    expect((error as StoreError).code).toBe('ERR_STORE_CORRUPT');
    expect((error as Error).message).toMatch(/is damaged .*left as it is.*daemon moves it aside/);
    expect((error as StoreError).fix).toMatch(/systemctl restart botlink/);
    expect(readdirSync(dir)).toEqual(['botlink.db']);
    expect(readFileSync(join(dir, 'botlink.db'))).toEqual(before);
  });

  it('leaves a write a crash interrupted for the next writer to roll back, and says so', () => {
    const store = open();
    store.savePair(bot, pair);
    closeAll();
    // A writer killed mid-transaction, its cache too small to hold the changes: the journal is hot.
    const crash = spawnSync(
      process.execPath,
      [
        '-e',
        `
      const db = new (require('better-sqlite3'))(${JSON.stringify(store.path)});
      db.pragma('cache_size = 1');
      db.exec('BEGIN');
      for (let i = 0; i < 2000; i++) db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run('k' + i, 'x'.repeat(200));
      process.kill(process.pid, 'SIGKILL');
    `,
      ],
      { cwd: process.cwd() },
    );
    expect(crash.signal).toBe('SIGKILL');
    expect(existsSync(`${store.path}-journal`)).toBe(true);
    let error: unknown;
    try {
      readOnly();
    } catch (e) {
      error = e;
    }
    expect((error as StoreError).code).toBe('ERR_STORE_RECOVERY');
    expect((error as Error).message).toMatch(/interrupted .*The daemon does when it next opens the file/);
    expect((error as StoreError).fix).toMatch(/ask again/);
    const writer = open();
    expect(writer.integrityCheck()).toBe('ok');
    expect(writer.loadPair(bot)).toEqual(pair);
    expect(writer.getMeta('k0')).toBeUndefined();
  });

  it('reads a database of an older schema without migrating it (no lock key yet)', () => {
    const path = join(dir, 'botlink.db');
    const v3 = new Database(path);
    migrate(v3, MIGRATIONS.slice(0, 3));
    v3.close();
    const reader = readOnly();
    expect(reader.lockKey).toBeUndefined();
    expect(reader.peekPair()).toBeUndefined();
    reader.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(3);
    db.close();
  });
});
