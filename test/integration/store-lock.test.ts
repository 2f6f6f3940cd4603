import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  claimInstance,
  processIdentity,
  releaseInstance,
  runningDaemon,
  selfIdentity,
} from '../../src/agent/instance.js';
import { TokenStore } from '../../src/agent/store.js';
import { bundleChild, type Bundle } from '../helpers/bundle.js';

// A real process holding the renew lock through the real module; prints its verdict, then idles.
const childSource = `
import { TokenStore } from './src/agent/store.js';
const store = TokenStore.open(process.argv[2]);
process.stdout.write(store.tryAcquireRenewLock('child', 60_000) ? 'acquired\\n' : 'refused\\n');
setInterval(() => {}, 1e6);
`;

let locker: Bundle;
let dir: string;
let children: ChildProcess[];
let stores: TokenStore[];

beforeAll(async () => {
  locker = await bundleChild(childSource, 'child.ts', 'store-lock-');
});
afterAll(() => locker?.dispose());

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-lock-'));
  children = [];
  stores = [];
});
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of stores) s.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(): TokenStore {
  const store = TokenStore.open(dir);
  stores.push(store);
  return store;
}

function spawnTracked(args: string[]): ChildProcess {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return child;
}

async function lockChild(): Promise<{ child: ChildProcess; verdict: string }> {
  const child = spawnTracked([locker.file, dir]);
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { child, verdict: line };
}

async function killHard(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  // Until the parent reaps it the child is a zombie; isAlive already says no, waiting keeps this honest.
  await exited;
}

describe('renew lock across processes', () => {
  it('a child holding it blocks two stores here; once it is killed -9 the lease is taken over', async () => {
    const { child, verdict } = await lockChild();
    expect(verdict).toBe('acquired');
    const a = open();
    const b = open();
    expect(a.tryAcquireRenewLock('daemon', 60_000)).toBe(false);
    expect(b.tryAcquireRenewLock('token', 60_000)).toBe(false);
    await killHard(child);
    expect(a.tryAcquireRenewLock('daemon', 60_000)).toBe(true);
    expect(b.tryAcquireRenewLock('token', 60_000)).toBe(false);
  });

  it('a child is refused while this process holds it, and acquires once it is released', async () => {
    const here = open();
    expect(here.tryAcquireRenewLock('daemon', 60_000)).toBe(true);
    expect((await lockChild()).verdict).toBe('refused');
    here.releaseRenewLock('daemon');
    expect((await lockChild()).verdict).toBe('acquired');
    expect(here.tryAcquireRenewLock('daemon', 60_000)).toBe(false);
  });
});

describe('one daemon per stateDir', () => {
  it('refuses a second instance while the first lives, and ignores the row a killed daemon left', async () => {
    const sleeper = spawnTracked(['-e', 'setTimeout(() => {}, 1e6)']);
    await once(sleeper, 'spawn');
    const first = processIdentity(sleeper.pid!);
    expect(first).toBeDefined();
    const store = open();
    const other = open();
    const self = selfIdentity();

    expect(runningDaemon(store)).toBeUndefined();
    expect(claimInstance(store, first!)).toEqual({ ok: true });
    const refused = claimInstance(other, self);
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.holder).toMatchObject(first!);
    expect(runningDaemon(other)).toMatchObject(first!);

    await killHard(sleeper);
    expect(runningDaemon(other)).toBeUndefined();
    expect(claimInstance(other, self)).toEqual({ ok: true });
    expect(runningDaemon(store)).toMatchObject(self);
    expect(claimInstance(other, self)).toEqual({ ok: true });

    releaseInstance(store, first!);
    expect(runningDaemon(store)).toMatchObject(self);
    releaseInstance(store, self);
    expect(runningDaemon(store)).toBeUndefined();
  });
});
