import type { Logger } from 'pino';
import { describeError } from '../../protocol/errors.js';
import type { Cancel } from '../../clock.js';
import type { AgentConfig } from '../config/config.js';
import type { LinkSupervisor } from '../link/supervisor.js';
import { PendingRelay } from '../local/pending-relay.js';
import { closeHost, type Host, openHost } from './host.js';
import { METRICS_CONTENT_TYPE, metricsText } from './metrics.js';
import { botIdFor, type BoardPaths } from './provisioning.js';
import { Publisher } from './publish.js';
import { Running } from './running.js';
import type { RuntimeOptions } from './runtime.js';
import { statusDoc, type StatusDoc } from './status.js';
import type { Enrollment } from './zero-touch.js';

/** The longest delay a Node timer takes in one go: the keep-alive timer only needs to exist, not to fire. */
const KEEPALIVE_MS = 2 ** 31 - 1;

export interface DaemonOptions extends Omit<RuntimeOptions, 'log'> {
  log: Logger;
  env: NodeJS.ProcessEnv;
  board?: BoardPaths;
}

/**
 * The running agent: start() brings it up in the order of DESIGN §2, stop() takes it down backwards.
 * It sequences the Host (runtime, lock, local API) from the claim on, the Running parts (tokens, link,
 * relay) from the botId on, and the Publisher, which every status change goes through; and it composes
 * the status document and the metrics text from those parts.
 */
export class Daemon {
  readonly #config: AgentConfig;
  readonly #options: DaemonOptions;
  readonly #log: Logger;
  readonly #publisher: Publisher;
  /** The local API's view of the relay: 503 for apps until the link exists. */
  readonly #relay = new PendingRelay();
  /** Aborted by stop(): provisioning gives up its waits, and start() builds nothing more. */
  readonly #abort = new AbortController();
  #identity: { kind: 'bot' | 'vendor'; id: string };
  /** Broker mode with no botId yet: where the enrollment of the device key stands. */
  #enrollment: Enrollment | undefined;
  #host: Host | undefined;
  #running: Running | undefined;
  /** Holds the event loop from start() to stop(): while offline every other timer may be unref'd or idle. */
  #alive: Cancel | undefined;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(config: AgentConfig, opts: DaemonOptions) {
    this.#config = config;
    this.#options = opts;
    this.#log = opts.log;
    this.#identity = config.botId ? { kind: 'bot', id: config.botId } : { kind: 'vendor', id: config.vendorId ?? '' };
    this.#publisher = new Publisher({
      env: opts.env,
      runtimeDir: config.runtimeDir,
      metricsFile: config.metricsFile,
      clock: opts.clock,
      log: opts.log,
      status: () => this.statusDoc(),
      metrics: () => this.metricsText(),
    });
  }

  /** Resolves once the link is started (or stop() was called first). */
  start(): Promise<void> {
    if (this.#stopping) return Promise.resolve();
    this.#starting ??= this.#bringUp();
    return this.#starting;
  }

  async #bringUp(): Promise<void> {
    this.#keepAlive();
    const host = await openHost({
      config: this.#config,
      runtime: this.#options,
      log: this.#log,
      relay: this.#relay,
      routes: {
        status: () => this.statusDoc(),
        tokens: () => this.#running?.tokens,
        metrics: () => ({ text: this.metricsText(), type: METRICS_CONTENT_TYPE }),
      },
    });
    this.#host = host;
    const botId = await botIdFor(host.rt, {
      ...(this.#options.board && { board: this.#options.board }),
      random: this.#options.random,
      signal: this.#abort.signal,
      log: this.#log,
      onVendor: (vendorId) => {
        this.#identity = { kind: 'vendor', id: vendorId };
        this.#publisher.changed();
      },
      onWaiting: (error) => this.#publisher.ready(`waiting to provision: ${describeError(error)}`),
      onEnrollment: (enrollment) => {
        this.#enrollment = enrollment;
        // systemd must not time the start out while an operator has yet to accept the key.
        if (enrollment.state !== 'active') this.#publisher.ready(`waiting for enrollment: this device key is ${enrollment.state}`);
        this.#publisher.changed();
      },
    });
    // None: stop() came first.
    if (botId === undefined) return;
    this.#identity = { kind: 'bot', id: botId };
    const running = new Running(host.rt, botId, this.#log, () => this.#publisher.changed());
    this.#running = running;
    this.#relay.ready(running.relay);
    running.start();
    this.#publisher.changed();
    this.#publisher.startMetrics();
  }

  /** GET /v1/metrics and metricsFile: the Prometheus text of this moment (DESIGN §3.5). */
  metricsText(): string {
    const snap = this.#running?.tokens.snapshot();
    const local = this.#host?.local;
    return metricsText({
      status: this.statusDoc(),
      traffic: this.#relay.traffic,
      tokens: { renewals: snap?.renewals ?? { signed: 0, refreshed: 0 }, failures: snap?.failures ?? {} },
      local: { requests: local?.requests ?? [], ...(local?.connections ?? { open: 0, refused: 0 }) },
      now: this.#options.clock.wallNow(),
    });
  }

  statusDoc(): StatusDoc {
    return statusDoc({
      identity: this.#identity,
      mode: this.#config.mode,
      ...(this.#config.mode === 'broker' && { broker: { keyId: this.#config.deviceKey.keyId, enrollment: this.#enrollment } }),
      now: this.#options.clock.wallNow(),
      tokens: this.#running?.tokens.snapshot(),
      link: this.#running?.link.status,
      relay: this.#relay.counters,
    });
  }

  get link(): LinkSupervisor | undefined {
    return this.#running?.link;
  }

  /** Closes the socket with 1000, stops renewing, writes the final status; idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#shutdown();
    return this.#stopping;
  }

  async #shutdown(): Promise<void> {
    this.#publisher.stopping();
    this.#abort.abort();
    // What start() was doing ends first (provisioning gives up at the abort): every part built is then known.
    await this.#starting?.catch(() => undefined);
    const host = this.#host;
    const running = this.#running;
    running?.tokens.stop();
    // The app hears `stopped` while the cloud socket is still there, then the link closes it.
    await (host?.local ? host.local.stop() : this.#relay.stop());
    await running?.link.stop();
    this.#publisher.stop();
    if (host) await closeHost(host);
    this.#alive?.();
    this.#log.info('botlink stopped');
  }

  /** A ref'd timer, armed again each time it fires (every 24.8 days), until stop(). */
  #keepAlive(): void {
    this.#alive = this.#options.clock.setTimer(KEEPALIVE_MS, () => this.#keepAlive(), { ref: true });
  }
}
