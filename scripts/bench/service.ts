// getToken throughput and latency of the reference service beside a bare node:http JSON echo server, in
// alternating rounds. The servers run in a forked child so the load generator does not share their event loop.
//   npm run bench:service [-- --rounds N --cell-ms MS --cpu-prof DIR --json]
// all.ts calls serviceRows(), which runs this bench in a process of its own and reads its --json line.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { median, quantile } from '../lib/stats.js';
import { signV2 } from '../../src/protocol/sign.js';
import { createReferenceService } from '../../src/service/server.js';
import { printTable, times, verdict } from './report.js';
import { isMain, ROOT } from './root.js';
import { alternate, spread } from './sample.js';

export const SERVICE_GOAL = 0.5;
const CONCURRENCY = 64;
const JSON_MARK = 'bench:service rows ';

interface Urls {
  echo: string;
  /** The default configuration: SQLite in memory. */
  memory: string;
  /** `--db FILE`: SQLite WAL on disk. */
  file: string;
}
type Variant = keyof Urls;

/** Child: the reference service in memory and on a file, and the echo server, until the parent goes away. */
async function serveAll(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'botlink-bench-'));
  const memory = await createReferenceService();
  const file = await createReferenceService({ dbFile: join(dir, 'service.db') });
  const echo: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  const urls: Urls = { echo: `http://127.0.0.1:${(echo.address() as AddressInfo).port}`, memory: memory.url, file: file.url };
  process.send!(urls);
  process.on('message', () => process.send!(process.cpuUsage()));
  process.once('disconnect', () => {
    echo.close();
    echo.closeAllConnections();
    void Promise.all([memory.close(), file.close()]).then(() => rmSync(dir, { recursive: true, force: true }));
  });
}

function getTokenBody(): string {
  const params = {
    accessKeyId: 'AK',
    accessNonce: randomBytes(16).toString('hex'),
    accessTimestamp: String(Date.now()),
    accessVersion: 'V2',
  };
  return JSON.stringify({ ...params, accessSign: signV2(params, 'SK'), botId: 'bot-1' });
}

interface Result {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** Server CPU time (user + system) per answered request, in µs. */
  cpuUs: number;
}

/** The server process's CPU time so far, in µs. */
function serverCpu(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve((m as NodeJS.CpuUsage).user + (m as NodeJS.CpuUsage).system));
    child.send('cpu');
  });
}

/** Closed-loop load: CONCURRENCY callers, each sending the next request when the last answered. */
async function load(
  child: ChildProcess,
  url: string,
  path: string,
  warmMs: number,
  cellMs: number,
  check: (json: unknown) => boolean,
): Promise<Result> {
  const pool = new Pool(url, { connections: CONCURRENCY });
  const latencies: number[] = [];
  let cpuStart = 0;
  let answered = 0;
  let errors = 0;
  const warmEnd = performance.now() + warmMs;
  const end = warmEnd + cellMs;
  const warm = new Promise<void>((resolve) => setTimeout(resolve, warmMs)).then(async () => {
    answered = 0;
    cpuStart = await serverCpu(child);
  });
  const caller = async (): Promise<void> => {
    for (;;) {
      const started = performance.now();
      if (started >= end) return;
      const res = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body: getTokenBody() });
      const ok = res.statusCode === 200 && check(await res.body.json());
      const finished = performance.now();
      answered += 1;
      if (started < warmEnd || finished > end) continue;
      latencies.push(finished - started);
      if (!ok) errors += 1;
    }
  };
  await Promise.all([warm, ...Array.from({ length: CONCURRENCY }, caller)]);
  const cpuUs = (await serverCpu(child)) - cpuStart;
  await pool.close();
  const rps = latencies.length / (cellMs / 1000);
  return { rps, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), errors, cpuUs: cpuUs / answered };
}

export interface ServiceOptions {
  /** Alternating rounds of the three cells (plus one discarded warm-up round). */
  rounds: number;
  /** Measured window of one cell, after its warm-up. */
  cellMs: number;
  warmMs: number;
  /** Writes the servers' CPU profile (node --cpu-prof) into this folder. */
  cpuProfDir?: string | undefined;
}

interface Measured {
  results: Record<Variant, Result[]>;
}

async function measure(opts: ServiceOptions): Promise<Measured> {
  const execArgv = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [];
  const child = fork(process.argv[1]!, ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const urls = await new Promise<Urls>((resolve) => child.once('message', (m) => resolve(m as Urls)));
    const tokenOk = (json: unknown): boolean => (json as { code?: unknown }).code === 0;
    const results: Record<Variant, Result[]> = { echo: [], memory: [], file: [] };
    const cell = (v: Variant) => async (): Promise<number> => {
      const r = await load(
        child,
        urls[v],
        v === 'echo' ? '/' : '/auth/getToken',
        opts.warmMs,
        opts.cellMs,
        v === 'echo' ? () => true : tokenOk,
      );
      results[v].push(r);
      return r.rps;
    };
    await alternate(opts.rounds, [cell('echo'), cell('memory'), cell('file')]);
    // alternate() discards its warm-up round's values; so do we.
    for (const v of Object.keys(results) as Variant[]) results[v].shift();
    return { results };
  } finally {
    child.disconnect();
    await exited;
  }
}

const pick = (rs: readonly Result[], k: keyof Result): number[] => rs.map((r) => r[k]);
const rate = (x: number): string => (Number.isFinite(x) ? `${Math.round(x)}/s` : 'n/a');
const lat = (rs: readonly Result[]): string => `p50 ${median(pick(rs, 'p50')).toFixed(1)} · p99 ${median(pick(rs, 'p99')).toFixed(1)} ms`;

/** all.ts's rows: figure, botlink, baseline, ratio, goal, result, IQR/median. */
function rowsOf({ results }: Measured): string[][] {
  const echo = results.echo;
  const row = (label: string, rs: readonly Result[]): string[] => {
    const r = median(pick(rs, 'rps')) / median(pick(echo, 'rps'));
    return [
      `service getToken/s vs node:http echo, c=${CONCURRENCY}, ${label}`,
      `${rate(median(pick(rs, 'rps')))} (${lat(rs)})`,
      `${rate(median(pick(echo, 'rps')))} (${lat(echo)})`,
      times(r),
      `≥ ${SERVICE_GOAL}×`,
      verdict(r >= SERVICE_GOAL),
      `${spread(pick(rs, 'rps')).toFixed(2)} · ${spread(pick(echo, 'rps')).toFixed(2)}`,
    ];
  };
  return [row('SQLite file (WAL, synchronous=NORMAL)', results.file), row('SQLite in memory', results.memory)];
}

function printDetails(opts: ServiceOptions, { results }: Measured): void {
  console.log(
    `getToken vs a node:http JSON echo server; loopback, undici Pool of ${CONCURRENCY}, servers in a forked child;` +
      ` ${opts.rounds} alternating rounds of ${opts.cellMs} ms cells after ${opts.warmMs} ms warm-up; medians.`,
  );
  const rows = (Object.keys(results) as Variant[]).map((v) => {
    const rs = results[v];
    return [
      v,
      rate(median(pick(rs, 'rps'))),
      spread(pick(rs, 'rps')).toFixed(2),
      median(pick(rs, 'p50')).toFixed(2),
      median(pick(rs, 'p99')).toFixed(2),
      median(pick(rs, 'cpuUs')).toFixed(0),
      String(pick(rs, 'errors').reduce((a, b) => a + b, 0)),
    ];
  });
  printTable(['server', 'req/s', 'IQR/median', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'errors'], rows);
  const perRound = (v: Variant): string => results[v].map((r, i) => (r.rps / results.echo[i]!.rps).toFixed(2)).join(' ');
  console.log(`ratio to echo per round — file: ${perRound('file')}`);
  console.log(`                       memory: ${perRound('memory')}\n`);
  printTable(['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median'], rowsOf({ results }));
  // The summary line all.ts parsed before serviceRows(); kept so an older all.ts still finds its figures.
  const ratio = (v: Variant): string => (median(pick(results[v], 'rps')) / median(pick(results.echo, 'rps'))).toFixed(2);
  console.log(
    `\nratio at concurrency ${CONCURRENCY}: in memory ${ratio('memory')} (goal ≥ ${SERVICE_GOAL}), on file ${ratio('file')} (goal ≥ ${SERVICE_GOAL})`,
  );
}

/**
 * Runs this bench in a process of its own (its servers live in a forked child) and returns all.ts's rows
 * and its human-readable output.
 */
export async function serviceRows(args: readonly string[] = []): Promise<{ rows: string[][]; output: string }> {
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'bench', 'run.mjs'), 'service', '--json', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const line = output.split('\n').find((l) => l.startsWith(JSON_MARK));
  const text = output.replace(/^bench:service rows .*\n?/m, '').trimEnd();
  if (code !== 0 || !line) {
    const row = ['service getToken/s vs node:http echo', '', '', 'n/a', `≥ ${SERVICE_GOAL}×`, 'MISS', `bench:service exited ${code}`];
    return { rows: [row], output: text };
  }
  return { rows: JSON.parse(line.slice(JSON_MARK.length)) as string[][], output: text };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      rounds: { type: 'string', default: '10' },
      'cell-ms': { type: 'string', default: '1000' },
      'warm-ms': { type: 'string', default: '300' },
      'cpu-prof': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const opts: ServiceOptions = {
    rounds: Number(values.rounds),
    cellMs: Number(values['cell-ms']),
    warmMs: Number(values['warm-ms']),
    cpuProfDir: values['cpu-prof'],
  };
  const measured = await measure(opts);
  printDetails(opts, measured);
  if (values.json) console.log(`${JSON_MARK}${JSON.stringify(rowsOf(measured))}`);
}

if (isMain('service')) await (process.argv[2] === '--child' ? serveAll() : main());
