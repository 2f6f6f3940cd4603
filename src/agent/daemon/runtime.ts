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
import { BrokerClient } from '../broker/client.js';
import { brokerSource } from '../token/broker-source.js';
import { signingSource } from '../token/sign-source.js';

/** The agent's shared parts, built once from a loaded config; commands and the daemon compose them. */
export interface AgentRuntime {
  readonly config: AgentConfig;
  /** What each part takes from the config, mapped once (settingsFrom). */
  readonly settings: AgentSettings;
  readonly clock: Clock;
  readonly log: Logger;
  readonly store: TokenStore;
  readonly serverTime: ServerTime;
  /** Who issues the tokens: the cloud, to this device's signature; or the vendor's broker (DESIGN §3.7). */
  readonly issuer: TokenIssuer;
  /** One server time sample from the issuer: the cloud's HEAD, or the broker's health. */
  sampleServerTime(): Promise<void>;
  checkTimeSync(toolsAtOnce?: boolean): Promise<TimeSyncResult>;
  /** A token manager for one identity, wired to this runtime's store, client and clock. */
  tokensFor(identity: Identity, onChange?: () => void): TokenManager;
  close(): Promise<void>;
}

/** Signing mode holds the cloud client that signs; broker mode the broker's client, and no secret. */
export type TokenIssuer = { mode: 'sign'; api: CloudClient } | { mode: 'broker'; broker: BrokerClient };

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
  const issuer = issuerFor(config, clock, serverTime, settings);
  const source = issuer.mode === 'sign' ? signingSource(issuer.api, clock) : brokerSource(issuer.broker, clock);
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
    issuer,
    sampleServerTime: () => source.sampleServerTime(),
    checkTimeSync: (toolsAtOnce) => checkTimeSync({ clock, floorMs, ...opts.timeSync }, toolsAtOnce),
    tokensFor(identity, onChange) {
      const manager = new TokenManager({
        identity,
        baseUrl: config.baseUrl,
        accessKeyId: config.accessKeyId,
        store,
        source,
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
      await (issuer.mode === 'sign' ? issuer.api : issuer.broker).close();
      store.close();
    },
  };
}

/** The client of whoever issues the tokens; each answer's Date is a server time sample (DESIGN §4). */
function issuerFor(config: AgentConfig, clock: Clock, serverTime: ServerTime, settings: AgentSettings): TokenIssuer {
  const onDateSample = (date: string | undefined, sent: number, received: number): boolean => serverTime.addSample(date, sent, received);
  if (config.mode === 'broker') {
    const { brokerUrl, brokerCa: ca, deviceKey: key } = config;
    return { mode: 'broker', broker: new BrokerClient({ brokerUrl, ca, key, clock, onDateSample, ...settings.cloud }) };
  }
  const { baseUrl, accessKeyId, secretKey } = config;
  return { mode: 'sign', api: new CloudClient({ baseUrl, accessKeyId, secretKey, clock, onDateSample, ...settings.cloud }) };
}
