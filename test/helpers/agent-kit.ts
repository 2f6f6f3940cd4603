import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { CloudClient } from '../../src/cloud/client.js';
import { systemClock, systemRandom, type Clock } from '../../src/clock.js';
import { ServerTime } from '../../src/agent/time/servertime.js';
import { TokenStore } from '../../src/agent/store/token-store.js';
import type { TimeSyncResult } from '../../src/agent/time/timesync.js';
import { TokenManager } from '../../src/agent/token/manager.js';
import { signingSource } from '../../src/agent/token/sign-source.js';
import type { TokenManagerOptions } from '../../src/agent/token/manager-types.js';
import type { Identity } from '../../src/protocol/wire.js';

export const SYNCED: TimeSyncResult = { verdict: 'synced', source: 'timesyncd', detail: 'test says synced' };
export const UNKNOWN: TimeSyncResult = { verdict: 'unknown', source: 'none', detail: 'test has no time source' };

export interface AgentKitOptions {
  url: string;
  identity?: Identity;
  stateDir?: string;
  secret?: string;
  accessKeyId?: string;
  clock?: Clock;
  verdict?: TimeSyncResult;
  /** Server time samples slower than this are dropped (default 5 s). */
  maxRttMs?: number;
  manager?: Partial<TokenManagerOptions>;
}

/** One agent's token side wired the way the daemon wires it: real store file, real client, real service. */
export class AgentKit {
  readonly stateDir: string;
  readonly logFile: string;
  readonly store: TokenStore;
  readonly api: CloudClient;
  readonly serverTime: ServerTime;
  readonly tokens: TokenManager;
  readonly log: pino.Logger;
  #ownsDir: boolean;

  constructor(o: AgentKitOptions) {
    this.#ownsDir = o.stateDir === undefined;
    this.stateDir = o.stateDir ?? mkdtempSync(join(tmpdir(), 'botlink-agent-'));
    this.logFile = join(this.stateDir, 'agent.log');
    this.log = pino({ level: 'debug' }, pino.destination({ dest: this.logFile, sync: true, append: true }));
    const clock = o.clock ?? systemClock;
    this.store = TokenStore.open(this.stateDir);
    this.serverTime = new ServerTime(clock, o.maxRttMs === undefined ? {} : { maxRttMs: o.maxRttMs });
    this.api = new CloudClient({
      baseUrl: o.url,
      accessKeyId: o.accessKeyId ?? 'AK',
      secretKey: { reveal: () => o.secret ?? 'SK' },
      clock,
      onDateSample: (date, sent, received) => this.serverTime.addSample(date, sent, received),
      headersTimeoutMs: 2000,
      bodyTimeoutMs: 2000,
    });
    const verdict = o.verdict ?? SYNCED;
    this.tokens = new TokenManager({
      identity: o.identity ?? { kind: 'bot', id: 'bot-1' },
      baseUrl: o.url,
      accessKeyId: o.accessKeyId ?? 'AK',
      store: this.store,
      source: signingSource(this.api, clock),
      serverTime: this.serverTime,
      clock,
      checkTimeSync: async () => verdict,
      log: this.log,
      random: systemRandom,
      ...o.manager,
    });
  }

  logText(): string {
    return readFileSync(this.logFile, 'utf8');
  }

  /** Stops everything; keeps the state dir when the caller passed one (a "reboot" reuses it). */
  async close(): Promise<void> {
    this.tokens.stop();
    await this.api.close();
    this.store.close();
    if (this.#ownsDir) rmSync(this.stateDir, { recursive: true, force: true });
  }
}
