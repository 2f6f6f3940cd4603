import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import type { Identity } from '../../protocol/wire.js';
import { BUILD_TIME_MS } from '../../version.js';
import { CloudClient } from '../../cloud/client.js';
import type { Clock, Random } from '../../clock.js';
import type { AgentConfig } from '../config/config.js';
import { settingsFrom, type AgentSettings } from '../config/settings.js';
import { ServerTime } from '../time/servertime.js';
import { LAST_SERVER_TIME_KEY, TokenStore } from '../store/token-store.js';
import { checkTimeSync, type TimeSyncOptions, type TimeSyncResult } from '../time/timesync.js';
import { TokenManager } from '../token/manager.js';

/** The agent's shared parts, built once from a loaded config; commands and the daemon compose them. */
export interface AgentRuntime {
  readonly config: AgentConfig;
  /** What each part takes from the config, mapped once (settingsFrom). */
  readonly settings: AgentSettings;
  readonly clock: Clock;
  readonly log: Logger;
  readonly store: TokenStore;
  readonly serverTime: ServerTime;
  readonly api: CloudClient;
  checkTimeSync(toolsAtOnce?: boolean): Promise<TimeSyncResult>;
  /** A token manager for one identity, wired to this runtime's store, client and clock. */
  tokensFor(identity: Identity, onChange?: () => void): TokenManager;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  log: Logger;
  /** The only source of time and timers (systemClock, chosen by the command that composes the agent). */
  clock: Clock;
  /** The only source of jitter (systemRandom, likewise). */
  random: Random;
  /** Overrides for the time-sync sources (tests, demo). */
  timeSync?: Partial<Omit<TimeSyncOptions, 'clock' | 'floorMs'>>;
  /** Open the token store only to read it (`botlink status`): nothing on disk is created, moved or written. */
  readOnlyStore?: boolean;
}

export function openRuntime(config: AgentConfig, opts: RuntimeOptions): AgentRuntime {
  const { clock, log } = opts;
  const settings = settingsFrom(config);
  const store = TokenStore.open(config.stateDir, {
    clock,
    readOnly: opts.readOnlyStore === true,
    onCorrupt: ({ movedTo, error }) =>
      log.error({ movedTo, err: messageOf(error) }, 'token database was corrupt: moved aside, starting with an empty cache'),
  });
  const serverTime = new ServerTime(clock);
  const api = new CloudClient({
    baseUrl: config.baseUrl,
    accessKeyId: config.accessKeyId,
    secretKey: config.secretKey,
    clock,
    onDateSample: (date, sent, received) => serverTime.addSample(date, sent, received),
    ...settings.cloud,
  });
  // A wall clock earlier than this build or than a time the server confirmed cannot be right.
  const floorMs = (): number => Math.max(BUILD_TIME_MS, Number(store.getMeta(LAST_SERVER_TIME_KEY) ?? 0) || 0);
  const managers: TokenManager[] = [];
  return {
    config,
    settings,
    clock,
    log,
    store,
    serverTime,
    api,
    checkTimeSync: (toolsAtOnce) => checkTimeSync({ clock, floorMs, ...opts.timeSync }, toolsAtOnce),
    tokensFor(identity, onChange) {
      const manager = new TokenManager({
        identity,
        baseUrl: config.baseUrl,
        accessKeyId: config.accessKeyId,
        store,
        api,
        serverTime,
        clock,
        random: opts.random,
        checkTimeSync: this.checkTimeSync,
        log: log.child({ identity: `${identity.kind}:${identity.id}` }),
        policy: settings.policy,
        backoff: settings.tokenBackoff,
        ...(onChange && { onChange }),
      });
      managers.push(manager);
      return manager;
    },
    async close() {
      for (const m of managers) m.stop();
      await api.close();
      store.close();
    },
  };
}
