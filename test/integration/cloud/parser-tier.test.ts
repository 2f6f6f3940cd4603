import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Bundle, bundleChild } from '../../helpers/bundle.js';
import { cleanEnv } from '../../../scripts/lib/env.js';

/**
 * Requests through the cloud client's pool (src/cloud/http.ts), or through undici's own Pool for
 * comparison, to a local HTTP server, each in a fresh process: llhttp is compiled once per process.
 * V8 12+ (Node 22, 24) runs a tier-up at once where it is triggered (--wasm-sync-tier-up); on Node 20
 * the optimizing compile runs on a background thread. So the child watches the peak after the requests:
 * until it passes 12 MiB where the tier-up is expected (for 30 s at most: a loaded machine may be slow to
 * run that thread), for a fixed while where it is not (V8_SYNC: none is needed; else 3 s, some thirty times
 * the 50-110 ms it takes on Node 20 here, so that one in progress would show).
 */
const V8_SYNC = Number(process.versions.v8.split('.')[0]) >= 12;
const CHILD = `
import { createServer } from 'node:http';
import { cachedDataVersionTag, getHeapStatistics, setFlagsFromString } from 'node:v8';
import { createPool, undiciParts } from './src/cloud/http.ts';
if (${V8_SYNC}) setFlagsFromString('--wasm-sync-tier-up');
const [how, count, waitMs] = process.argv.slice(2);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.setHeader('content-type', 'application/json').end(JSON.stringify({ code: 0, msg: 'ok', accessToken: 'x'.repeat(200) })));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = 'http://127.0.0.1:' + server.address().port;
const tag = cachedDataVersionTag();
let send;
if (how === 'cloud-client' || how === 'cloud-client-optimizing') {
  const pool = await createPool(origin, { connections: 1 }, how === 'cloud-client' ? 'baseline' : 'optimizing');
  send = (opts) => pool.request(opts);
} else {
  const { Pool, request } = await undiciParts();
  const pool = new Pool(origin, { connections: 1 });
  send = (opts) => request.call(pool, opts);
}
for (let i = 0; i < Number(count); i++) {
  const res = await send({ path: '/auth/getToken', method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  await res.body.text();
}
// The peak only grows: look until it passes 12 MiB, for at most waitMs (a background compile may be slow to start).
const peakMiB = () => getHeapStatistics().peak_malloced_memory / 2 ** 20;
const start = Date.now();
while (peakMiB() <= 12 && Date.now() - start < Number(waitMs)) await new Promise((resolve) => setTimeout(resolve, 50));
process.stdout.write(JSON.stringify({ peakMiB: peakMiB(), waitedMs: Date.now() - start, tagKept: cachedDataVersionTag() === tag }));
process.exit(0);
`;

let child: Bundle;
beforeAll(async () => {
  child = await bundleChild(CHILD, 'parser-tier-child.ts', 'parser-tier-');
});
afterAll(() => child.dispose());

interface Outcome {
  peakMiB: number;
  /** How long after the requests the child looked, until the peak passed 12 MiB or the wait ran out. */
  waitedMs: number;
  tagKept: boolean;
}

function run(how: 'cloud-client' | 'cloud-client-optimizing' | 'undici', count: number, waitMs: number): Outcome {
  const r = spawnSync(process.execPath, [child.file, how, String(count), String(waitMs)], {
    env: cleanEnv(),
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`child exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Outcome;
}

describe("undici's HTTP parser (llhttp, WebAssembly) in the daemon", () => {
  it("is compiled again by V8's optimizing tier after a few responses when nothing prevents it: a peak of ~20 MiB", () => {
    const outcome = run('undici', 20, 30_000);
    expect(outcome.peakMiB, JSON.stringify(outcome)).toBeGreaterThan(12);
  });

  it("stays in the baseline tier through the cloud client's pool, and every V8 flag is as it was after", () => {
    const outcome = run('cloud-client', 20, V8_SYNC ? 0 : 3000);
    expect(outcome.peakMiB, JSON.stringify(outcome)).toBeLessThan(8);
    // V8 keys code caches to its flags: one left changed would make every later built-in compile from source.
    expect(outcome.tagKept).toBe(true);
  });

  it("is left to V8 when the pool is made with the 'optimizing' tier (the broker, or httpParserTier turning the measure off)", () => {
    const outcome = run('cloud-client-optimizing', 20, 30_000);
    expect(outcome.peakMiB, JSON.stringify(outcome)).toBeGreaterThan(12);
    expect(outcome.tagKept).toBe(true);
  });
});
