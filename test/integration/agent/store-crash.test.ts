import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TokenStore, type StoreIdentity, type TokenPair } from '../../../src/agent/store/token-store.js';
import { bundleChild, type Bundle } from '../../helpers/bundle.js';

const KILLS = 30;
const identity: StoreIdentity = { baseUrl: 'http://127.0.0.1:9', accessKeyId: 'AK', kind: 'bot', id: 'bot-crash' };

// Generation g writes access-g-0..3 / refresh-g with expiries g*1000+step and g*1000+500, so any mix of
// two generations, or of two saves, is visible in the fields themselves.
const childSource = `
import { acquireLock } from './src/agent/store/lock.js';
import { TokenStore } from './src/agent/store/token-store.js';
const identity = ${JSON.stringify(identity)};
const store = TokenStore.open(process.argv[2], { onCorrupt: () => process.exit(3) });
const loaded = store.loadPair(identity)?.issuedAt ?? 0;
// A kill between a save and its meta write leaves the meta one generation behind; catch it up first,
// so that across runs as within one the meta never lags the pair by more than one generation.
if (Number(store.getMeta('lastServerTimeMs') ?? 0) < loaded) store.setMeta('lastServerTimeMs', String(loaded));
let gen = Math.floor(loaded / 1000) + 1;
let announced = false;
for (;;) {
  // The lock of the SIGKILLed writer before this one must already be free.
  const claim = await acquireLock(store.requireLockKey(), 'renew');
  if (!claim.ok) process.exit(4);
  // A signed pair, then three refreshes of its access token, each saved whole as the token manager does.
  for (let step = 0; step <= 3; step++) {
    store.savePair(identity, {
      accessToken: 'access-' + gen + '-' + step, accessExpiresAt: gen * 1000 + step,
      refreshToken: 'refresh-' + gen, refreshExpiresAt: gen * 1000 + 500, issuedAt: gen * 1000,
    });
  }
  store.setMeta('lastServerTimeMs', String(gen * 1000));
  await claim.lock.release();
  if (!announced) process.stdout.write('ready\\n');
  announced = true;
  gen++;
}
`;

let writer: Bundle;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-crash-'));
  writer = await bundleChild(childSource, 'crash-child.ts', 'store-crash-');
});
afterAll(() => {
  writer?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** The generation every field of `pair` belongs to; fails the test on any mix. */
function generationOf(pair: TokenPair): number {
  const gen = pair.issuedAt / 1000;
  const step = pair.accessExpiresAt - gen * 1000;
  expect(Number.isInteger(gen) && gen > 0).toBe(true);
  expect(step >= 0 && step <= 3).toBe(true);
  expect(pair).toEqual({
    accessToken: `access-${gen}-${step}`,
    accessExpiresAt: gen * 1000 + step,
    refreshToken: `refresh-${gen}`,
    refreshExpiresAt: gen * 1000 + 500,
    issuedAt: gen * 1000,
  });
  return gen;
}

/** Runs the writer and SIGKILLs it: after its first full cycle (mid-loop) or at a random moment of start-up. */
async function runAndKill(waitForReady: boolean): Promise<void> {
  const child = spawn(process.execPath, [writer.file, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  if (waitForReady) {
    await once(createInterface({ input: child.stdout }), 'line');
    await sleep(Math.random() * 30);
  } else {
    await sleep(Math.random() * 150);
  }
  child.kill('SIGKILL');
  const [code, signal] = await exited;
  expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
}

it(`keeps one complete pair and a sound file through ${KILLS} SIGKILLs of a writer`, async () => {
  const started = performance.now();
  let lastGen = 0;
  let lastMeta = 0;
  let corrupt = 0;
  let readyRuns = 0;
  for (let kill = 0; kill < KILLS; kill++) {
    const waitForReady = kill % 3 !== 1;
    if (waitForReady) readyRuns++;
    await runAndKill(waitForReady);
    const store = TokenStore.open(dir, { onCorrupt: () => corrupt++ });
    try {
      expect(store.integrityCheck()).toBe('ok');
      const pair = store.loadPair(identity);
      expect(pair).toBeDefined();
      const gen = generationOf(pair!);
      expect(gen).toBeGreaterThanOrEqual(lastGen);
      const meta = Number(store.getMeta('lastServerTimeMs'));
      expect(meta).toBeGreaterThanOrEqual(Math.max((gen - 1) * 1000, lastMeta));
      expect(meta).toBeLessThanOrEqual(gen * 1000);
      lastGen = gen;
      lastMeta = meta;
    } finally {
      store.close();
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`store crash: ${KILLS} SIGKILLs, ${lastGen} generations committed, ${seconds.toFixed(1)} s`);
  expect(corrupt).toBe(0);
  // Every run killed after its first full cycle committed at least one generation; the rest is disk speed.
  expect(lastGen).toBeGreaterThanOrEqual(readyRuns);
}, 30_000);
