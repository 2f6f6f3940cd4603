import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isAlive, processIdentity, readBootId, type ProcPaths } from '../../src/agent/instance.js';
import { MIGRATIONS, migrate, StoreError, TokenStore, type StoreIdentity, type TokenPair } from '../../src/agent/store.js';

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
    store.updateAccess(bot, 'acc-2', pair.accessExpiresAt + 1000);
    closeAll();
    const again = open();
    expect(again.loadPair(bot)).toEqual({ ...pair, accessToken: 'acc-2', accessExpiresAt: pair.accessExpiresAt + 1000 });
    again.clearPair();
    expect(again.loadPair(bot)).toBeUndefined();
    again.updateAccess(bot, 'acc-3', 1);
    expect(again.peekPair()).toBeUndefined();
  });

  it('creates stateDir 0700 and the database and its WAL files 0600', () => {
    const stateDir = join(dir, 'state', 'nested');
    const store = open(stateDir);
    store.savePair(bot, pair);
    expect(mode(stateDir)).toBe(0o700);
    expect(store.path).toBe(join(stateDir, 'botlink.db'));
    for (const suffix of ['', '-wal', '-shm']) expect(mode(store.path + suffix)).toBe(0o600);
  });

  it('tightens an existing database file to 0600', () => {
    writeFileSync(join(dir, 'botlink.db'), '', { mode: 0o644 });
    expect(mode(open().path)).toBe(0o600);
  });

  it('discards a pair cached for another identity', () => {
    const store = open();
    store.savePair(bot, pair);
    for (const other of [
      { ...bot, id: 'bot-2' },
      { ...bot, kind: 'vendor' as const },
      { ...bot, accessKeyId: 'AK2' },
      { ...bot, baseUrl: 'https://other.example' },
    ]) {
      store.updateAccess(other, 'stolen', 1);
      expect(store.loadPair(bot)).toEqual(pair);
    }
    expect(store.loadPair({ ...bot, id: 'bot-2' })).toBeUndefined();
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
    store.updateAccess(bot, 'acc-2', pair.accessExpiresAt + 5000, pair.issuedAt + 5000);
    expect(store.loadPair(bot)).toEqual({ ...pair, accessToken: 'acc-2', accessExpiresAt: pair.accessExpiresAt + 5000, accessIssuedAt: pair.issuedAt + 5000 });
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
    expect((error as Error).message).toMatch(new RegExp(`schema version ${MIGRATIONS.length + 1} .*newer release.*upgrade botlink`));
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
    for (let i = 0; i < 300; i++) store.setProvisionedBotId({ ...bot, vendorId: 'V', deviceId: `SN${i}` }, `b${i}`);
    store.close();
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
    expect((error as Error).message).toMatch(/Fix: stateDir must be a directory/);
    expect(existsSync(stateDir)).toBe(false);
  });
});

describe('renew lock within one process', () => {
  it('lets one owner hold it; the owner may renew; release frees it', () => {
    const a = open();
    const b = open();
    expect(a.tryAcquireRenewLock('daemon', 60_000)).toBe(true);
    expect(b.tryAcquireRenewLock('token', 60_000)).toBe(false);
    expect(a.tryAcquireRenewLock('daemon', 60_000)).toBe(true);
    b.releaseRenewLock('token');
    expect(b.tryAcquireRenewLock('token', 60_000)).toBe(false);
    a.releaseRenewLock('daemon');
    expect(b.tryAcquireRenewLock('token', 60_000)).toBe(true);
    expect(a.tryAcquireRenewLock('daemon', 60_000)).toBe(false);
  });

  it('frees an expired lease, judged on the shared monotonic clock, not the wall clock', () => {
    let mono = 1_000;
    const a = open(dir, { leaseClock: () => mono });
    const b = open(dir, { leaseClock: () => mono, clock: { wallNow: () => 0, monoNow: () => 0 } });
    expect(a.tryAcquireRenewLock('daemon', 5_000)).toBe(true);
    mono += 4_999;
    expect(b.tryAcquireRenewLock('token', 5_000)).toBe(false);
    mono += 1;
    expect(b.tryAcquireRenewLock('token', 5_000)).toBe(true);
    expect(a.tryAcquireRenewLock('daemon', 5_000)).toBe(false);
  });
});

describe('process identity from /proc', () => {
  let procRoot: string;
  let paths: ProcPaths;
  const statLine = (pid: number, state: string, start: number) =>
    `${pid} (odd) name (x)) ${state} 1 ${Array.from({ length: 18 }, (_, i) => (i === 18 - 1 ? start : 0)).join(' ')} 0 0\n`;

  beforeEach(() => {
    procRoot = join(dir, 'proc');
    mkdirSync(join(procRoot, '42'), { recursive: true });
    writeFileSync(join(dir, 'boot_id'), 'boot-a\n');
    paths = { procRoot, bootIdFile: join(dir, 'boot_id') };
  });

  it('reads pid, boot id and field 22 even when the command name holds spaces and parentheses', () => {
    writeFileSync(join(procRoot, '42', 'stat'), statLine(42, 'S', 777));
    expect(processIdentity(42, paths)).toEqual({ pid: 42, bootId: 'boot-a', startTime: 777 });
    expect(readBootId(paths)).toBe('boot-a');
  });

  it('is alive only for the same boot, an existing pid, the same start time and not a zombie', () => {
    writeFileSync(join(procRoot, '42', 'stat'), statLine(42, 'S', 777));
    const holder = { pid: 42, bootId: 'boot-a', startTime: 777 };
    expect(isAlive(holder, paths)).toBe(true);
    expect(isAlive({ ...holder, bootId: 'boot-b' }, paths)).toBe(false);
    expect(isAlive({ ...holder, startTime: 778 }, paths)).toBe(false);
    expect(isAlive({ ...holder, pid: 43 }, paths)).toBe(false);
    writeFileSync(join(procRoot, '42', 'stat'), statLine(42, 'Z', 777));
    expect(isAlive(holder, paths)).toBe(false);
  });

  it('matches the real /proc for this process', () => {
    const self = processIdentity(process.pid);
    expect(self?.pid).toBe(process.pid);
    expect(self && isAlive(self)).toBe(true);
  });
});
