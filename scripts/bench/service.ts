// getToken throughput and latency of the reference service beside a bare node:http JSON echo server.
// The servers run in a forked child so the load generator does not share their event loop.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { signV2 } from '../../src/protocol/sign.js';
import { createReferenceService } from '../../src/service/server.js';

const CONCURRENCY = [1, 16, 64];
const WARMUP_MS = 500;
const MEASURE_MS = 3000;

interface Urls {
  echo: string;
  /** The default configuration: SQLite in memory. */
  memory: string;
  /** `--db FILE`: SQLite WAL on disk. */
  file: string;
}

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

/** Closed-loop load: `concurrency` callers, each sending the next request when the last answered. */
async function load(
  child: ChildProcess,
  url: string,
  path: string,
  concurrency: number,
  check: (json: unknown) => boolean,
): Promise<Result> {
  const pool = new Pool(url, { connections: concurrency });
  const latencies: number[] = [];
  let cpuStart = 0;
  let answered = 0;
  let errors = 0;
  const warmEnd = performance.now() + WARMUP_MS;
  const end = warmEnd + MEASURE_MS;
  const warm = new Promise<void>((resolve) => setTimeout(resolve, WARMUP_MS)).then(async () => {
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
  await Promise.all([warm, ...Array.from({ length: concurrency }, caller)]);
  const cpuUs = (await serverCpu(child)) - cpuStart;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { rps: latencies.length / (MEASURE_MS / 1000), p50: at(0.5), p99: at(0.99), errors, cpuUs: cpuUs / answered };
}

async function main(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const urls = await new Promise<Urls>((resolve) => child.once('message', (m) => resolve(m as Urls)));
  const tokenOk = (json: unknown): boolean => (json as { code?: unknown }).code === 0;
  const rows: string[] = [];
  const ratios: { memory: number; file: number }[] = [];
  const cell = (r: Result): string =>
    `${r.rps.toFixed(0).padStart(7)} ${r.p50.toFixed(2).padStart(6)} ${r.p99.toFixed(2).padStart(6)} ${r.cpuUs.toFixed(0).padStart(4)}`;
  for (const c of CONCURRENCY) {
    // Back to back at each level so the three see the same machine state.
    const echo = await load(child, urls.echo, '/', c, () => true);
    const memory = await load(child, urls.memory, '/auth/getToken', c, tokenOk);
    const file = await load(child, urls.file, '/auth/getToken', c, tokenOk);
    ratios.push({ memory: memory.rps / echo.rps, file: file.rps / echo.rps });
    const errors = memory.errors + file.errors;
    rows.push(
      `${String(c).padStart(4)} │${cell(echo)} │${cell(memory)} │${cell(file)} │${String(errors).padStart(4)} ${(memory.rps / echo.rps).toFixed(2).padStart(5)} ${(file.rps / echo.rps).toFixed(2).padStart(5)}`,
    );
  }
  child.disconnect();
  console.log(`getToken vs a node:http JSON echo server; loopback, undici Pool, servers in a forked child;`);
  console.log(`${MEASURE_MS / 1000} s per cell after ${WARMUP_MS} ms warm-up. cpu = server CPU µs per request.`);
  console.log('     │ echo                      │ getToken, SQLite :memory: │ getToken, SQLite file WAL │      ratio to echo');
  console.log('conc │  req/s    p50    p99  cpu │  req/s    p50    p99  cpu │  req/s    p50    p99  cpu │ errs   mem  file');
  for (const row of rows) console.log(row);
  const at64 = ratios[CONCURRENCY.indexOf(64)]!;
  const verdict = (r: number): string => `${r.toFixed(2)} ${r >= 0.5 ? '(goal ≥ 0.50 met)' : '(goal ≥ 0.50 NOT met)'}`;
  console.log(`ratio at concurrency 64: in memory ${verdict(at64.memory)}, on file ${verdict(at64.file)}`);
}

if (process.argv[2] === '--child') await serveAll();
else await main();
