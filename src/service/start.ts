// Builds and starts one reference service: its public handle (server.ts hands it out) and its test
// controls (testing.ts adds them), made together over the same state.
import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceContext, ServiceEvents } from './context.js';
import { PURGE_EVERY_MS, SERVICE_DEFAULTS, TIMEOUT_CHECK_MAX_MS } from './defaults.js';
import { FaultState, type BrokenResponse, type WsRefusal, type WsRefusalForm } from './faults.js';
import { createRequestListener } from './http.js';
import { answerClientError } from './raw-response.js';
import { DEFAULT_SEED, parseSeed, type Seed } from './seed.js';
import { StatsRecorder, type ServiceStats } from './stats.js';
import { ServiceStore } from './store.js';
import { VOICE_CHAT_PATH } from '../protocol/conversation.js';
import { VoiceChatEndpoint, type DisplacementMarker } from './ws.js';

/** What `botlink serve` and the demo set; each left out takes its SERVICE_DEFAULTS value. */
export interface ReferenceServiceOptions {
  host?: string;
  port?: number;
  /** SQLite file; a file lets a restarted service keep its tokens. Default ':memory:'. */
  dbFile?: string;
  seed?: Seed;
  accessTtlS?: number;
  refreshTtlS?: number;
  timestampWindowMs?: number;
  pingIntervalMs?: number;
  /** How long a client may take to send a whole request (headers: half of it). */
  requestTimeoutMs?: number;
  /** How a displaced WebSocket is told (DESIGN §1.4): the public guide's EVENT frame or the seed's code-400 frame. */
  displacementMarker?: DisplacementMarker;
  /** Pause between two frames of a conversation round (DESIGN §1.7); 0 answers a round at once. */
  roundDelayMs?: number;
  /** Free mode (DESIGN §1.7): silence after speech that ends an utterance. */
  vadSilenceMs?: number;
}

/** What only tests and benchmarks set. */
export interface TestServiceOptions extends ReferenceServiceOptions {
  /** The service's wall clock. Default Date.now. */
  now?: () => number;
  /** Echo every binary audio frame back at once (benchmarks of the relay's data path). Default false. */
  echoAudio?: boolean;
}

export interface ServiceFaults {
  /** The next n getToken calls that would succeed answer 1006 instead. */
  failNextGetToken(n: number): void;
  /** Delays every HTTP answer by ms, WebSocket handshakes included. */
  setLatencyMs(ms: number): void;
  /** Sets (not adds to) the offset of the service clock: expiries, the timestamp window and Date. */
  shiftClockMs(ms: number): void;
  /** Terminates every WebSocket without a close frame. */
  dropAllSockets(): void;
  /** Refuses new WebSockets with msg in the given carrier (default handshake); undefined stops refusing. */
  refuseWebSockets(msg: WsRefusal | undefined, form?: WsRefusalForm): void;
  /** The next n HTTP answers, optionally only on route (a path), are broken this way; the request is not processed. */
  nextResponses(kind: BrokenResponse, n: number, route?: string): void;
  /** Clears every fault. */
  reset(): void;
}

/** The running service as `botlink serve` and the demo use it. */
export interface ReferenceService {
  url: string;
  wsUrl: string;
  port: number;
  /** Closes http, every socket and the database; the port is free again when it resolves. */
  close(): Promise<void>;
  /** The one fault the demo shows a person: every link drops, and the agent reconnects. */
  faults: Pick<ServiceFaults, 'dropAllSockets'>;
  stats: ServiceStats;
  events: EventEmitter<ServiceEvents>;
}

/** What tests and benchmarks drive the service with, besides its public handle. */
export interface TestControls {
  faults: ServiceFaults;
  /** Sends a frame to the bot's current WebSocket as the cloud would (tests of the relay); false when it has none. */
  push(botId: string, data: string | Buffer, opts?: { binary?: boolean }): boolean;
  /** Turns the echo of binary audio frames (option echoAudio) on or off, for the sessions open now too. */
  setEchoAudio(on: boolean): void;
}

export async function startService(opts: TestServiceOptions = {}): Promise<{ service: ReferenceService; controls: TestControls }> {
  const host = opts.host ?? SERVICE_DEFAULTS.host;
  const clock = opts.now ?? Date.now;
  const faultState = new FaultState();
  const store = new ServiceStore(opts.dbFile ?? ':memory:');
  const events = new EventEmitter<ServiceEvents>();
  const ctx: ServiceContext = {
    store,
    faults: faultState,
    now: () => clock() + faultState.clockShiftMs,
    accessTtlS: opts.accessTtlS ?? SERVICE_DEFAULTS.accessTtlS,
    refreshTtlS: opts.refreshTtlS ?? SERVICE_DEFAULTS.refreshTtlS,
    timestampWindowMs: opts.timestampWindowMs ?? SERVICE_DEFAULTS.timestampWindowMs,
    issued: (tokens) => events.emit('tokens-issued', tokens),
  };
  const recorder = new StatsRecorder();
  const delays = new Set<NodeJS.Timeout>();
  let closing = false;
  let echoAudio = opts.echoAudio ?? false;

  const delay = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      if (closing) return; // never settles: the socket is being destroyed anyway
      if (ms <= 0) return resolve();
      const timer = setTimeout(() => {
        delays.delete(timer);
        resolve();
      }, ms);
      delays.add(timer);
    });

  const requestTimeoutMs = opts.requestTimeoutMs ?? SERVICE_DEFAULTS.requestTimeoutMs;
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.ceil(requestTimeoutMs / 2),
      connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_MAX_MS, Math.ceil(requestTimeoutMs / 4)),
    },
    createRequestListener({
      ctx,
      stats: recorder,
      delay,
      onInternalError: (err) => events.emit('internal-error', err),
      onReceived: (path) => events.emit('http-request', { path }),
    }),
  );
  const endpoint = new VoiceChatEndpoint({
    ctx,
    stats: recorder,
    events,
    delay,
    pingIntervalMs: opts.pingIntervalMs ?? SERVICE_DEFAULTS.pingIntervalMs,
    displacementMarker: opts.displacementMarker ?? SERVICE_DEFAULTS.displacementMarker,
    roundDelayMs: opts.roundDelayMs ?? SERVICE_DEFAULTS.roundDelayMs,
    vadSilenceMs: opts.vadSilenceMs ?? SERVICE_DEFAULTS.vadSilenceMs,
    echoAudio: () => echoAudio,
  });
  server.on('upgrade', (req, socket, head: Buffer) => endpoint.upgrade(req, socket, head));
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket, ctx.now()));
  const purger = setInterval(() => store.purgeExpired(ctx.now()), PURGE_EVERY_MS).unref();

  try {
    store.applySeed(parseSeed(opts.seed ?? DEFAULT_SEED));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? SERVICE_DEFAULTS.port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    clearInterval(purger);
    endpoint.close();
    store.close();
    throw err;
  }

  const { port } = server.address() as AddressInfo;
  const authority = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  let closed: Promise<void> | undefined;

  const faults: ServiceFaults = {
    failNextGetToken: (n) => {
      faultState.getTokenFailures = n;
    },
    setLatencyMs: (ms) => {
      faultState.latencyMs = ms;
    },
    shiftClockMs: (ms) => {
      faultState.clockShiftMs = ms;
    },
    dropAllSockets: () => endpoint.dropAll(),
    refuseWebSockets: (msg, form = 'handshake') => {
      faultState.wsRefusal = msg === undefined ? undefined : { msg, form };
    },
    nextResponses: (kind, n, route) => faultState.breakNext(kind, n, route),
    reset: () => faultState.reset(),
  };
  const service: ReferenceService = {
    url: `http://${authority}`,
    wsUrl: `ws://${authority}${VOICE_CHAT_PATH}`,
    port,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        closing = true;
        for (const timer of delays) clearTimeout(timer);
        clearInterval(purger);
        endpoint.close();
        server.close(() => {
          store.close();
          resolve();
        });
        server.closeAllConnections();
      });
      return closed;
    },
    faults: { dropAllSockets: faults.dropAllSockets },
    stats: recorder.stats,
    events,
  };
  const controls: TestControls = {
    faults,
    push: (botId, data, o = {}) => endpoint.push(botId, data, o.binary ?? typeof data !== 'string'),
    setEchoAudio: (on) => {
      echoAudio = on;
    },
  };
  return { service, controls };
}
