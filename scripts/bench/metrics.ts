// `node scripts/bench/run.mjs metrics [PROM_CLIENT_DIR]`: what GET /v1/metrics costs hand-written (the
// daemon's own src/agent/daemon/metrics.ts) against prom-client, the library the issue named: time to
// load and render one scrape of botlink's 15 families, and the RSS it adds, each in a fresh node.
// prom-client is no dependency of botlink: install it anywhere (npm i prom-client) and pass its folder.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { median } from '../lib/stats.js';
import { ROOT } from './root.js';

const RUNS = 7;
const promDir = process.argv[2];
const dir = mkdtempSync(join(tmpdir(), 'bench-metrics-'));

/** Measures `body` (an async function text returning the scrape) in a fresh node: ms and RSS added. */
function measure(prelude: string, body: string): { ms: number; rssKiB: number } {
  const code = `${prelude}
const r0 = process.memoryUsage().rss; const t0 = performance.now();
const text = await (async () => { ${body} })();
const ms = performance.now() - t0; globalThis.gc();
console.log(JSON.stringify({ ms, rssKiB: Math.round((process.memoryUsage().rss - r0) / 1024), bytes: text.length }));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', code], { encoding: 'utf8', cwd: dir });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as { ms: number; rssKiB: number };
}

function report(name: string, runs: { ms: number; rssKiB: number }[]): void {
  console.log(
    `${name.padEnd(14)} load+render ${median(runs.map((r) => r.ms)).toFixed(1)} ms   RSS +${median(runs.map((r) => r.rssKiB))} KiB   (median of ${RUNS})`,
  );
}

try {
  const handBundle = join(dir, 'metrics.mjs');
  await build({
    entryPoints: [join(ROOT, 'src/agent/daemon/metrics.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    outfile: handBundle,
  });
  const input = `{ status: { pid: 1, updatedAt: 0, identity: { kind: 'bot', id: 'b' }, clock: { trusted: true, source: 'ntp', offsetMs: 0 },
    token: { accessExpiresAt: 7200000, refreshExpiresAt: null }, link: { state: 'connected', since: 0, reconnects: 3,
    reconnectsByCause: { closed: 1, 'app-params': 2 }, lastError: null }, relay: { attached: true, framesUp: 10, framesDown: 20, dropped: 0 } },
    traffic: { attaches: 2, bytesUp: 100, bytesDown: 200 }, tokens: { renewals: { signed: 1, refreshed: 2 }, failures: {} },
    local: { requests: [{ path: '/v1/status', status: 200, count: 4 }], open: 1, refused: 0 }, now: 0 }`;
  report(
    'hand-written',
    Array.from({ length: RUNS }, () =>
      measure('', `const m = await import(${JSON.stringify(handBundle)}); return m.metricsText(${input});`),
    ),
  );
  if (promDir) {
    const prom = `
      const { Registry, Counter, Gauge } = await import(${JSON.stringify(join(promDir, 'index.js'))});
      const reg = new Registry();
      const c = (name, labelNames = []) => new Counter({ name, help: name, labelNames, registers: [reg] });
      const g = (name, labelNames = []) => new Gauge({ name, help: name, labelNames, registers: [reg] });
      g('botlink_link_state', ['state']).set({ state: 'connected' }, 1);
      c('botlink_link_reconnects_total', ['cause']).inc({ cause: 'closed' }, 1);
      c('botlink_token_renewals_total', ['kind']).inc({ kind: 'signed' }, 1);
      c('botlink_token_failures_total', ['code']);
      g('botlink_token_access_seconds_left').set(7200);
      g('botlink_clock_trusted').set(1); g('botlink_store_persisted').set(1); g('botlink_relay_attached').set(1);
      c('botlink_relay_attaches_total').inc(2);
      c('botlink_relay_frames_total', ['direction']).inc({ direction: 'up' }, 10);
      c('botlink_relay_bytes_total', ['direction']).inc({ direction: 'up' }, 100);
      c('botlink_relay_dropped_total');
      c('botlink_local_requests_total', ['path', 'status']).inc({ path: '/v1/status', status: '200' }, 4);
      g('botlink_local_connections').set(1); c('botlink_local_connections_refused_total');
      return reg.metrics();`;
    report(
      'prom-client',
      Array.from({ length: RUNS }, () => measure('', prom)),
    );
  } else console.log('prom-client: not measured (pass the folder of an installed prom-client)');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
