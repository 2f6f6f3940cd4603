import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimInstance, runningDaemon } from '../../../src/agent/store/instance.js';
import { acquireLock, type HeldLock } from '../../../src/agent/store/lock.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { bundleChild, type Bundle } from '../../helpers/bundle.js';

// A real process taking a lock through the real modules; prints its verdict, then idles holding what it got.
const childSource = `
import { claimInstance } from './src/agent/store/instance.js';
import { acquireLock } from './src/agent/store/lock.js';
import { TokenStore } from './src/agent/store/token-store.js';
const store = TokenStore.open(process.argv[2]);
if (process.argv[3] === 'instance') {
  const claim = await claimInstance(store);
  process.stdout.write(claim.ok ? 'acquired\\n' : 'refused ' + claim.holder.pid + '\\n');
} else {
  const claim = await acquireLock(store.requireLockKey(), 'renew');
  process.stdout.write(claim.ok ? 'acquired\\n' : 'refused ' + JSON.stringify(claim.probe) + '\\n');
}
setInterval(() => {}, 1e6);
`;

let locker: Bundle;
let dir: string;
let children: ChildProcess[];
let stores: TokenStore[];
let held: HeldLock[];

beforeAll(async () => {
  locker = await bundleChild(childSource, 'child.ts', 'store-lock-');
});
afterAll(() => locker?.dispose());

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-lock-'));
  children = [];
  stores = [];
  held = [];
});
afterEach(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const h of held) await h.release();
  for (const s of stores) s.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(): TokenStore {
  const store = TokenStore.open(dir);
  stores.push(store);
  return store;
}

async function lockChild(which: 'renew' | 'instance'): Promise<{ child: ChildProcess; verdict: string }> {
  const child = spawn(process.execPath, [locker.file, dir, which], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { child, verdict: line };
}

async function killHard(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

async function renew(store: TokenStore): Promise<Awaited<ReturnType<typeof acquireLock>>> {
  const claim = await acquireLock(store.requireLockKey(), 'renew');
  if (claim.ok) held.push(claim.lock);
  return claim;
}

describe('renew lock across processes', () => {
  it('a child holding it blocks two stores here; once it is killed -9 the lock is free at once', async () => {
    const { child, verdict } = await lockChild('renew');
    expect(verdict).toBe('acquired');
    const a = open();
    const b = open();
    expect(await renew(a)).toEqual({ ok: false, probe: { state: 'held', pid: child.pid } });
    expect(await renew(b)).toEqual({ ok: false, probe: { state: 'held', pid: child.pid } });
    await killHard(child);
    expect((await renew(a)).ok).toBe(true);
    expect(await renew(b)).toEqual({ ok: false, probe: { state: 'held', pid: process.pid } });
  });

  it('a child is refused while this process holds it, and acquires once it is released', async () => {
    const claim = await renew(open());
    expect(claim.ok).toBe(true);
    expect((await lockChild('renew')).verdict).toBe(`refused ${JSON.stringify({ state: 'held', pid: process.pid })}`);
    await held.pop()!.release();
    expect((await lockChild('renew')).verdict).toBe('acquired');
    expect((await renew(open())).ok).toBe(false);
  });

  it('needs no write: a database that cannot be written still locks', async () => {
    const store = open();
    store.close();
    stores.pop();
    // Opened by a reader that cannot write it: the key is all a lock needs.
    const reader = TokenStore.open(dir, { readOnly: true });
    stores.push(reader);
    const claim = await acquireLock(reader.requireLockKey(), 'renew');
    expect(claim.ok).toBe(true);
    if (claim.ok) held.push(claim.lock);
    expect((await lockChild('renew')).verdict).toMatch(/^refused /);
  });
});

describe('one daemon per stateDir', () => {
  it('refuses a second instance while the first lives, and a SIGKILLed one holds nothing', async () => {
    const store = open();
    expect(await runningDaemon(store)).toBeUndefined();
    const { child, verdict } = await lockChild('instance');
    expect(verdict).toBe('acquired');
    expect(await runningDaemon(store)).toEqual({ pid: child.pid });
    expect(await claimInstance(store)).toEqual({ ok: false, holder: { pid: child.pid } });
    expect((await lockChild('instance')).verdict).toBe(`refused ${child.pid}`);

    await killHard(child);
    expect(await runningDaemon(store)).toBeUndefined();
    const mine = await claimInstance(store);
    expect(mine.ok && 'lock' in mine).toBe(true);
    expect(await runningDaemon(open())).toEqual({ pid: process.pid });
    if (mine.ok && 'lock' in mine) await mine.lock.release();
    expect(await runningDaemon(store)).toBeUndefined();
  });

  it('a lock of another stateDir is another lock', async () => {
    const { verdict } = await lockChild('instance');
    expect(verdict).toBe('acquired');
    const elsewhere = TokenStore.open(join(dir, 'elsewhere'));
    stores.push(elsewhere);
    expect(await runningDaemon(elsewhere)).toBeUndefined();
  });
});
