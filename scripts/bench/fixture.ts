// The fixture of the benchmarks: reference services, device dirs, and connections timed at the service.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TokenStore } from '../../src/agent/store/token-store.js';
import { signV2 } from '../../src/protocol/sign.js';
import type { ReferenceService } from '../../src/service/server.js';
import { createTestService, type TestService } from '../../src/service/testing.js';
import type { Child } from './child.js';

const BENCH_SECRET = 'bench-secret-9f2c';
export const BOTS = Array.from({ length: 24 }, (_, i) => `bot-${i + 1}`);
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: BENCH_SECRET, vendors: [{ vendorId: 'V1', bots: BOTS }] }] };

/** One reference service on a SQLite file, restartable on the same port with the same tokens. */
export async function startService(dbFile: string, port = 0): Promise<TestService> {
  return createTestService({ dbFile, port, seed: SEED });
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
  readonly runtimeDir: string;

  /** `runParent`: where the runtimeDir goes, on a tmpfs as the unit's RuntimeDirectory= (/run) is on a device. */
  constructor(
    parent: string,
    runParent: string,
    readonly botId: string,
    baseUrl: string,
  ) {
    this.dir = mkdtempSync(join(parent, 'device-'));
    this.configFile = join(this.dir, 'config.json');
    this.stateDir = join(this.dir, 'state');
    this.runtimeDir = mkdtempSync(join(runParent, `${botId}-`));
    const secretKeyFile = join(this.dir, 'secret-key');
    writeFileSync(secretKeyFile, `${BENCH_SECRET}\n`, { mode: 0o600 });
    const config = {
      baseUrl,
      accessKeyId: 'AK',
      secretKeyFile,
      botId,
      stateDir: this.stateDir,
      runtimeDir: this.runtimeDir,
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

/** Signs getToken in this process: a token for a baseline client with no agent behind it. */
export async function fetchToken(svc: ReferenceService, botId: string): Promise<string> {
  const params = {
    accessKeyId: 'AK',
    accessNonce: randomBytes(16).toString('hex'),
    accessTimestamp: String(Date.now()),
    accessVersion: 'V2',
  };
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
  const died = child.exited.then((code) =>
    Promise.reject(new Error(`child exited ${code} before connecting: ${child.out.slice(0, 2000)}`)),
  );
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
