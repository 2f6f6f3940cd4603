// A benchmark run's scratch folder: the agent bundle, device dirs, and the minimal baseline clients.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ReferenceService } from '../../src/service/server.js';
import { LINK_DEFAULTS } from '../../src/agent/link/options.js';
import { cleanEnv } from '../lib/env.js';
import { Child } from './child.js';
import { Device } from './fixture.js';
import { NODE_FLAGS, UNIT_ENV } from './unit.js';
import { ROOT, scratchDir } from './root.js';

/** Builds the CLI bundle exactly as scripts/build.mjs does, into our own file: tests rebuilding dist/ cannot race us. */
async function buildAgentBundle(dir: string): Promise<string> {
  const build = (await import(pathToFileURL(join(ROOT, 'scripts', 'build.mjs')).href)) as typeof import('../build.mjs');
  return build.buildBundle(join(dir, 'botlink.mjs'));
}

/** Opens the WebSocket with a given token and keeps it, pinging as often as the agent: the floor. */
const WS_CLIENT = `import WebSocket from 'ws';
const url = new URL(process.env.WS_URL); url.searchParams.set('botId', process.env.BOT_ID);
const ws = new WebSocket(url, { headers: { Authorization: 'Bearer ' + process.env.TOKEN }, perMessageDeflate: false });
ws.on('open', () => setInterval(() => ws.ping(), ${LINK_DEFAULTS.heartbeatIntervalMs}));
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
ws.on('open', () => setInterval(() => ws.ping(), ${LINK_DEFAULTS.heartbeatIntervalMs}));
ws.on('error', (e) => { console.error(e.message); process.exit(1); });
ws.on('close', () => process.exit(0));
`;

/** The scratch folder, the agent bundle and the baseline scripts of one benchmark run. */
export class Workspace {
  readonly dir: string;
  readonly wsClient: string;
  readonly signFetchWsClient: string;
  /** $CACHE_DIRECTORY of every agent: the unit's CacheDirectory=, one per installation. */
  readonly cacheDir: string;
  /**
   * The devices' runtimeDirs, on a tmpfs as RuntimeDirectory= (/run) is on a device: status.json is
   * replaced there on every state change, and a rename over a file on ext4 first writes its data out.
   */
  readonly runDir: string;
  #bundle: string | undefined;

  private constructor(dir: string) {
    this.dir = dir;
    this.runDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'botlink-bench-run-'));
    this.wsClient = join(dir, 'ws-client.mjs');
    this.signFetchWsClient = join(dir, 'sign-fetch-ws-client.mjs');
    writeFileSync(this.wsClient, WS_CLIENT);
    writeFileSync(this.signFetchWsClient, SIGN_FETCH_WS_CLIENT);
    this.cacheDir = join(dir, 'cache');
    mkdirSync(this.cacheDir, { mode: 0o700 });
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
    return new Device(this.dir, this.runDir, botId, svc.url);
  }

  /**
   * `botlink run` from the bundle as the unit runs it: its node flags and `Environment=` (as every child
   * here), and a code cache directory as its CacheDirectory= gives one. `o` varies them for comparisons.
   */
  agent(device: Device, o: { flags?: readonly string[]; env?: Readonly<Record<string, string>>; cacheDir?: string } = {}): Child {
    return new Child(
      [...(o.flags ?? NODE_FLAGS), this.bundle, 'run', '--config', device.configFile],
      cleanEnv({ ...(o.env ?? UNIT_ENV), CACHE_DIRECTORY: o.cacheDir ?? this.cacheDir }),
    );
  }

  /** The minimal client holding `token` for `botId`. */
  client(svc: ReferenceService, botId: string, token: string): Child {
    return new Child([...NODE_FLAGS, this.wsClient], cleanEnv({ ...UNIT_ENV, WS_URL: svc.wsUrl, BOT_ID: botId, TOKEN: token }));
  }

  /** The minimal sign + fetch + ws script for the device's botId (or a variant of it in `script`). */
  signingClient(svc: ReferenceService, device: Device, script = this.signFetchWsClient): Child {
    const env = { BASE_URL: svc.url, WS_URL: svc.wsUrl, BOT_ID: device.botId, SECRET_FILE: join(device.dir, 'secret-key') };
    return new Child([...NODE_FLAGS, script], cleanEnv({ ...UNIT_ENV, ...env }));
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
    rmSync(this.runDir, { recursive: true, force: true });
  }
}
