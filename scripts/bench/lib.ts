// Shared by the benchmarks: statistics and tables, child processes and /proc readings, and the
// fixture (a private agent bundle, reference services, device dirs, the minimal baseline clients).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { signV2 } from '../../src/protocol/sign.js';
import { createReferenceService, type ReferenceService } from '../../src/service/server.js';
import { TokenStore } from '../../src/agent/store/token-store.js';

// ---------- where we are ----------

/** The repo root: the first folder above this (bundled) file that holds a package.json. */
export const ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('benchmarks must run inside the botlink repo');
    dir = up;
  }
  return dir;
})();

/** scripts/bench/run.mjs names its bundle <bench>.mjs: lets link.ts export its scenarios to all.ts. */
export function isMain(bench: string): boolean {
  return basename(process.argv[1] ?? '') === `${bench}.mjs`;
}

/** A fresh folder under node_modules/.cache, so scripts and bundles written there resolve bare imports. */
function scratchDir(prefix: string): string {
  const cache = join(ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, `${prefix}-`));
}

/** Builds the CLI bundle exactly as scripts/build.mjs does, into our own file: tests rebuilding dist/ cannot race us. */
async function buildAgentBundle(dir: string): Promise<string> {
  const build = (await import(pathToFileURL(join(ROOT, 'scripts', 'build.mjs')).href)) as typeof import('../build.mjs');
  return build.buildBundle(join(dir, 'botlink.mjs'));
}

// ---------- statistics and output ----------

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Interquartile range over the median: a one-number noise figure for a sample. */
export function spread(xs: readonly number[]): number {
  if (xs.length < 4) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return (q(0.75) - q(0.25)) / median(xs);
}

/**
 * Runs each variant `n` times, rotating which goes first every round so slow drifts of a shared
 * machine hit all of them alike; one warm-up round (page cache, JIT of this process) is discarded.
 */
export async function alternate(n: number, variants: readonly (() => Promise<number>)[]): Promise<number[][]> {
  const samples = variants.map((): number[] => []);
  for (let round = -1; round < n; round++) {
    for (let k = 0; k < variants.length; k++) {
      const i = (Math.max(round, 0) + k) % variants.length;
      const value = await variants[i]!();
      if (round >= 0) samples[i]!.push(value);
    }
  }
  return samples;
}

export const ms = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(x < 10 ? 1 : 0)} ms` : 'n/a');
export const times = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(2)}×` : 'n/a');
export const verdict = (ok: boolean): string => (ok ? 'PASS' : 'MISS');

/** Prints rows as aligned columns under a header and a rule. */
export function printTable(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Date, CPU model, cores and node version: the line every result needs beside it. */
export function machineLine(): string {
  let model = cpus()[0]?.model ?? 'unknown cpu';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    // x86 says "model name"; Raspberry Pi kernels say "Model" (the board) instead.
    model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1] ?? /^Model\s*:\s*(.+)$/m.exec(info)?.[1] ?? model;
  } catch {
    // not Linux: os.cpus() has it
  }
  return `${new Date().toISOString()} · ${model.trim()} · ${availableParallelism()} cores · node ${process.version} · ${process.arch}`;
}

// ---------- child processes and /proc ----------

/** A child we started, with its output kept for error messages and its exit as a promise. */
export class Child {
  readonly proc: ChildProcess;
  readonly pid: number;
  out = '';
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv = cleanEnv(), execPath = process.execPath) {
    this.proc = spawn(execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    this.pid = this.proc.pid ?? -1;
    const keep = (d: Buffer): void => {
      if (this.out.length < 20_000) this.out += d.toString();
    };
    this.proc.stdout?.on('data', keep);
    this.proc.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve(signal ? 128 : code)));
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Signals, then SIGKILLs after `graceMs`; resolves on exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Our environment without BOTLINK_* and systemd variables, so a developer's shell cannot steer a run. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('BOTLINK_') && !['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'CREDENTIALS_DIRECTORY'].includes(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

/** Milliseconds from spawn to exit of `node args`; throws on a nonzero exit. */
export async function timeRun(args: readonly string[], execPath = process.execPath): Promise<number> {
  const started = performance.now();
  const child = new Child(args, cleanEnv(), execPath);
  const code = await child.exited;
  const took = performance.now() - started;
  if (code !== 0) throw new Error(`node ${args.join(' ')} exited ${code}: ${child.out.slice(0, 2000)}`);
  return took;
}

/** VmRSS of a live process, in KiB. */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

/** Linux reports utime/stime in USER_HZ, 100 on every architecture botlink targets. */
export const CLOCK_TICKS_PER_S = 100;

/** utime + stime of a live process (all its threads), in clock ticks. */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; fields after its closing parenthesis are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * CPU time of a live process in ms at nanosecond resolution: the sum over its threads of
 * /proc/<pid>/task/<tid>/schedstat, since an idle minute is often less than one 10 ms tick.
 * Falls back to ticks on kernels without schedstat.
 */
export function cpuMs(pid: number): number {
  if (!existsSync(`/proc/${pid}/schedstat`)) return (cpuTicks(pid) * 1000) / CLOCK_TICKS_PER_S;
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended since the listing
    }
  }
  return ns / 1e6;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------- fixture ----------

const BENCH_SECRET = 'bench-secret-9f2c';
export const BOTS = Array.from({ length: 24 }, (_, i) => `bot-${i + 1}`);
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: BENCH_SECRET, vendors: [{ vendorId: 'V1', bots: BOTS }] }] };

/** One reference service on a SQLite file, restartable on the same port with the same tokens. */
export async function startService(dbFile: string, port = 0): Promise<ReferenceService> {
  return createReferenceService({ dbFile, port, seed: SEED });
}

/** Resolves with performance.now() when the service accepts a WebSocket for `botId`. */
export function nextWsEvent(svc: ReferenceService, event: 'ws-open' | 'ws-close', botId: string, timeoutMs = 15_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      svc.events.off(event, on);
      reject(new Error(`no ${event} for ${botId} within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (e: { botId: string }): void => {
      if (e.botId !== botId) return;
      clearTimeout(timer);
      svc.events.off(event, on);
      resolve(performance.now());
    };
    svc.events.on(event, on);
  });
}

/** The files of one device: config.json, the secret file, state, runtime and log dirs. */
export class Device {
  readonly dir: string;
  readonly configFile: string;
  readonly stateDir: string;

  constructor(parent: string, readonly botId: string, baseUrl: string) {
    this.dir = mkdtempSync(join(parent, 'device-'));
    this.configFile = join(this.dir, 'config.json');
    this.stateDir = join(this.dir, 'state');
    const secretKeyFile = join(this.dir, 'secret-key');
    writeFileSync(secretKeyFile, `${BENCH_SECRET}\n`, { mode: 0o600 });
    const config = {
      baseUrl,
      accessKeyId: 'AK',
      secretKeyFile,
      botId,
      stateDir: this.stateDir,
      runtimeDir: join(this.dir, 'run'),
      logFile: join(this.dir, 'botlink.log'),
      logLevel: 'info',
    };
    writeFileSync(this.configFile, JSON.stringify(config, null, 2));
  }

  /** The access token the agent cached (read after it stopped). */
  cachedToken(): string {
    const store = TokenStore.open(this.stateDir);
    try {
      const held = store.peekPair();
      if (!held) throw new Error(`no cached token in ${this.stateDir}`);
      return held.pair.accessToken;
    } finally {
      store.close();
    }
  }

  forgetTokens(): void {
    rmSync(this.stateDir, { recursive: true, force: true });
  }

  log(): string {
    try {
      return readFileSync(join(this.dir, 'botlink.log'), 'utf8');
    } catch {
      return '';
    }
  }
}

/** Opens the WebSocket with a given token and keeps it, pinging every 20 s like the agent: the floor. */
const WS_CLIENT = `import WebSocket from 'ws';
const url = new URL(process.env.WS_URL); url.searchParams.set('botId', process.env.BOT_ID);
const ws = new WebSocket(url, { headers: { Authorization: 'Bearer ' + process.env.TOKEN }, perMessageDeflate: false });
ws.on('open', () => setInterval(() => ws.ping(), 20000));
ws.on('error', (e) => { console.error(e.message); process.exit(1); });
ws.on('close', () => process.exit(0));
`;

/** Signs getToken (DESIGN §1.1, inlined), fetches the token, opens the WebSocket: the no-cache floor. */
const SIGN_FETCH_WS_CLIENT = `import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
const env = process.env;
const params = { accessKeyId: 'AK', accessNonce: randomBytes(16).toString('hex'), accessTimestamp: String(Date.now()), accessVersion: 'V2' };
const canonical = Object.entries(params).map(([k, v]) => [k.toLowerCase(), v]).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => k + '=' + v).join('&');
const accessSign = createHmac('md5', readFileSync(env.SECRET_FILE, 'utf8').trim()).update(canonical).digest('hex');
const res = await fetch(env.BASE_URL + '/auth/getToken', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...params, accessSign, botId: env.BOT_ID }) });
const body = await res.json();
if (body.code !== 0) { console.error('getToken', body.code, body.msg); process.exit(1); }
const url = new URL(env.WS_URL); url.searchParams.set('botId', env.BOT_ID);
const ws = new WebSocket(url, { headers: { Authorization: 'Bearer ' + body.accessToken }, perMessageDeflate: false });
ws.on('open', () => setInterval(() => ws.ping(), 20000));
ws.on('error', (e) => { console.error(e.message); process.exit(1); });
ws.on('close', () => process.exit(0));
`;

/** The scratch folder, the agent bundle and the baseline scripts of one benchmark run. */
export class Workspace {
  readonly dir: string;
  readonly wsClient: string;
  readonly signFetchWsClient: string;
  #bundle: string | undefined;

  private constructor(dir: string) {
    this.dir = dir;
    this.wsClient = join(dir, 'ws-client.mjs');
    this.signFetchWsClient = join(dir, 'sign-fetch-ws-client.mjs');
    writeFileSync(this.wsClient, WS_CLIENT);
    writeFileSync(this.signFetchWsClient, SIGN_FETCH_WS_CLIENT);
  }

  static async create(name: string): Promise<Workspace> {
    const ws = new Workspace(scratchDir(`bench-${name}`));
    ws.#bundle = await buildAgentBundle(ws.dir);
    return ws;
  }

  get bundle(): string {
    return this.#bundle!;
  }

  device(botId: string, svc: ReferenceService): Device {
    return new Device(this.dir, botId, svc.url);
  }

  /** `botlink run` from the bundle. */
  agent(device: Device): Child {
    return new Child([this.bundle, 'run', '--config', device.configFile]);
  }

  /** The minimal client holding `token` for `botId`. */
  client(svc: ReferenceService, botId: string, token: string): Child {
    return new Child([this.wsClient], cleanEnv({ WS_URL: svc.wsUrl, BOT_ID: botId, TOKEN: token }));
  }

  /** The minimal sign + fetch + ws script for the device's botId. */
  signingClient(svc: ReferenceService, device: Device): Child {
    const env = { BASE_URL: svc.url, WS_URL: svc.wsUrl, BOT_ID: device.botId, SECRET_FILE: join(device.dir, 'secret-key') };
    return new Child([this.signFetchWsClient], cleanEnv(env));
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Signs getToken in this process: a token for a baseline client with no agent behind it. */
export async function fetchToken(svc: ReferenceService, botId: string): Promise<string> {
  const params = { accessKeyId: 'AK', accessNonce: randomBytes(16).toString('hex'), accessTimestamp: String(Date.now()), accessVersion: 'V2' };
  const res = await fetch(`${svc.url}/auth/getToken`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...params, accessSign: signV2(params, BENCH_SECRET), botId }),
  });
  const body = (await res.json()) as { code: number; accessToken?: string; msg?: string };
  if (body.code !== 0 || !body.accessToken) throw new Error(`getToken for ${botId}: ${body.code} ${body.msg ?? ''}`);
  return body.accessToken;
}

/**
 * Starts `child` and resolves with the milliseconds from spawn until the service accepts its
 * WebSocket; the child keeps running.
 */
export async function timeToConnected(svc: ReferenceService, botId: string, start: () => Child): Promise<{ ms: number; child: Child }> {
  const opened = nextWsEvent(svc, 'ws-open', botId);
  const started = performance.now();
  const child = start();
  const died = child.exited.then((code) => Promise.reject(new Error(`child exited ${code} before connecting: ${child.out.slice(0, 2000)}`)));
  // Whichever loses the race settles later with nobody waiting: keep that from counting as unhandled.
  opened.catch(() => undefined);
  died.catch(() => undefined);
  try {
    return { ms: (await Promise.race([opened, died])) - started, child };
  } catch (err) {
    await child.stop('SIGKILL');
    throw err;
  }
}

/** Stops a connected child and waits until the service has let go of its session too. */
export async function disconnect(svc: ReferenceService, botId: string, child: Child): Promise<void> {
  const closed = nextWsEvent(svc, 'ws-close', botId).catch(() => undefined);
  await child.stop('SIGTERM');
  await closed;
}

/** Lists the TypeScript sources under src/ (declaration files aside), for a per-file build. */
export function sourceFiles(dir = join(ROOT, 'src')): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => join(dir, f));
}
