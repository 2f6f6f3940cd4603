import type { Logger } from 'pino';
import { BotlinkError, describeError, messageOf, withFix } from '../../protocol/errors.js';
import { VERSION } from '../../version.js';
import type { AgentConfig } from '../config/config.js';
import { claimInstance } from '../store/instance.js';
import type { HeldLock } from '../store/lock.js';
import { LinkSupervisor } from '../link/supervisor.js';
import { PendingRelay } from '../local/pending-relay.js';
import { Relay } from '../local/relay.js';
import { LocalApi } from '../local/server.js';
import type { Cancel } from '../../clock.js';
import { createNotifier, type Notifier } from './notify.js';
import { botIdFor, type BoardPaths } from './provisioning.js';
import { openRuntime, type AgentRuntime, type RuntimeOptions } from './runtime.js';
import { METRICS_CONTENT_TYPE, metricsText } from './metrics.js';
import { MetricsFile } from './metrics-file.js';
import { statusDoc, writeStatusFile, type StatusDoc } from './status.js';
import type { TokenManager } from '../token/manager.js';

/** The longest delay a Node timer takes in one go: the keep-alive timer only needs to exist, not to fire. */
const KEEPALIVE_MS = 2 ** 31 - 1;

export interface DaemonOptions extends Omit<RuntimeOptions, 'log'> {
  log: Logger;
  env: NodeJS.ProcessEnv;
  board?: BoardPaths;
}

/** The running agent: start() brings it up in the order of DESIGN §2, stop() takes it down cleanly. */
export class Daemon {
  readonly #config: AgentConfig;
  readonly #options: DaemonOptions;
  readonly #log: Logger;
  readonly #notify: Notifier;
  readonly #abort = new AbortController();
  #rt: AgentRuntime | undefined;
  #tokens: TokenManager | undefined;
  #link: LinkSupervisor | undefined;
  /** The local API's view of the relay: 503 for apps until the link exists. */
  readonly #relay = new PendingRelay();
  /** The local API (DESIGN §3.5); none when localSocket is "". */
  #local: LocalApi | undefined;
  #identity: { kind: 'bot' | 'vendor'; id: string };
  /** This stateDir's one-daemon lock, held from start() to stop(). */
  #instance: HeldLock | undefined;
  #ready = false;
  /** This daemon has written status.json: only then does its stop write the last one (a refused one never does). */
  #published = false;
  #stopping: Promise<void> | undefined;
  /** metricsFile's writer, once the link runs. */
  #metricsFile: MetricsFile | undefined;
  /** Holds the event loop from start() to stop(): while offline every other timer may be unref'd or idle. */
  #alive: Cancel | undefined;

  constructor(config: AgentConfig, opts: DaemonOptions) {
    this.#config = config;
    this.#options = opts;
    this.#log = opts.log;
    this.#notify = createNotifier(opts.env, opts.log, opts.clock);
    this.#identity = config.botId ? { kind: 'bot', id: config.botId } : { kind: 'vendor', id: config.vendorId ?? '' };
  }

  /** Resolves once the link is started (or stop() was called first). */
  async start(): Promise<void> {
    if (this.#stopping) return;
    if (!this.#alive) this.#keepAlive();
    const rt = openRuntime(this.#config, this.#options);
    this.#rt = rt;
    const claim = await claimInstance(rt.store);
    if (!claim.ok) {
      await rt.close();
      this.#rt = undefined;
      throw new BotlinkError(
        'ERR_ALREADY_RUNNING',
        `another botlink daemon (pid ${claim.holder.pid}) already runs on ${this.#config.stateDir}`,
        'fatal',
        { fix: 'stop it first (systemctl stop botlink)' },
      );
    }
    if ('lock' in claim) this.#instance = claim.lock;
    else
      this.#log.error({ code: 'ERR_LOCK_UNUSABLE' }, `instance lock unavailable (${claim.unusable}): running without the one-daemon check`);
    // stop() came while the claim was pending: it could not release what it did not see.
    if (this.#stopping) {
      await this.#instance?.release();
      return;
    }
    this.#log.info(
      { version: VERSION, pid: process.pid, mode: this.#config.mode, baseUrl: this.#config.baseUrl, stateDir: this.#config.stateDir },
      'botlink starting',
    );
    // Before provisioning, which may wait for the network: apps can ask /v1/status and learn why.
    await this.#startLocalApi(this.#relay, rt);
    if (this.#stopping) return;
    const botId = await botIdFor(rt, {
      ...(this.#options.board && { board: this.#options.board }),
      random: this.#options.random,
      signal: this.#abort.signal,
      log: this.#log,
      onVendor: (vendorId) => {
        this.#identity = { kind: 'vendor', id: vendorId };
        this.#publish();
      },
      onWaiting: (error) => this.#markReady(`waiting to provision: ${describeError(error)}`),
    });
    if (botId === undefined) return;
    this.#identity = { kind: 'bot', id: botId };
    const tokens = rt.tokensFor(this.#identity, () => this.#onTokenChange());
    this.#tokens = tokens;
    const c = this.#config;
    const link = new LinkSupervisor({
      wsUrl: c.wsUrl,
      botId,
      tokens,
      clock: rt.clock,
      log: this.#log.child({ part: 'link' }),
      ...rt.settings.link,
    });
    this.#link = link;
    link.on('state', () => this.#publish());
    // Attach and detach change status.relay, which no link state change would write to status.json.
    this.#relay.ready(new Relay({ link, clock: rt.clock, log: this.#log.child({ part: 'relay' }), onChange: () => this.#publish() }));
    tokens.start();
    link.start();
    this.#publish();
    if (c.metricsFile !== null) {
      this.#metricsFile = new MetricsFile(c.metricsFile, rt.clock, this.#log, () => this.metricsText());
      this.#metricsFile.start();
    }
  }

  /** GET /v1/metrics and metricsFile: the Prometheus text of this moment (DESIGN §3.5). */
  metricsText(): string {
    const snap = this.#tokens?.snapshot();
    return metricsText({
      status: this.statusDoc(),
      traffic: this.#relay.traffic,
      tokens: { renewals: snap?.renewals ?? { signed: 0, refreshed: 0 }, failures: snap?.failures ?? {} },
      local: { requests: this.#local?.requests ?? [], ...(this.#local?.connections ?? { open: 0, refused: 0 }) },
      now: this.#rt?.clock.wallNow() ?? 0,
    });
  }

  async #startLocalApi(relay: PendingRelay, rt: AgentRuntime): Promise<void> {
    const path = this.#config.localSocket;
    if (path === null) return;
    const api = new LocalApi({
      path,
      clock: rt.clock,
      maxConnections: rt.settings.local.maxConnections,
      gid: this.#config.localGroup,
      relay,
      log: this.#log.child({ part: 'local' }),
      status: () => this.statusDoc(),
      tokens: () => this.#tokens,
      metrics: () => ({ text: this.metricsText(), type: METRICS_CONTENT_TYPE }),
    });
    await api.start();
    this.#local = api;
    // stop() ran while the socket was being bound: it could not remove what it did not see.
    if (this.#stopping) await api.stop();
  }

  get link(): LinkSupervisor | undefined {
    return this.#link;
  }

  /** Closes the socket with 1000, stops renewing, writes the final status; idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#shutdown();
    return this.#stopping;
  }

  async #shutdown(): Promise<void> {
    this.#notify.stopping();
    this.#abort.abort();
    this.#tokens?.stop();
    // The app hears `stopped` while the cloud socket is still there, then the link closes it.
    await (this.#local ? this.#local.stop() : this.#relay.stop());
    await this.#link?.stop();
    const rt = this.#rt;
    if (rt) {
      // A daemon refused at start (the socket or the stateDir in use) must not overwrite the live one's status.
      if (this.#published) this.#publish();
      this.#metricsFile?.stop();
      await this.#instance?.release();
      await rt.close();
    }
    this.#notify.close();
    this.#alive?.();
    this.#log.info('botlink stopped');
  }

  /** A ref'd timer, armed again each time it fires (every 24.8 days), until stop(). */
  #keepAlive(): void {
    if (this.#stopping) return;
    this.#alive = this.#options.clock.setTimer(KEEPALIVE_MS, () => this.#keepAlive(), { ref: true });
  }

  #onTokenChange(): void {
    this.#publish();
    const err = this.#tokens?.snapshot().lastError;
    // systemd should not kill a daemon that waits for the network or a fix: report READY and say what it waits on.
    if (err) this.#markReady(`waiting for a token: ${withFix(err.message, err.fix)}`);
  }

  #markReady(line: string): void {
    if (this.#ready) return;
    this.#ready = true;
    this.#notify.ready(line);
  }

  #publish(): void {
    const doc = this.statusDoc();
    const link = doc.link;
    const line = `${link.state}${link.lastError ? `: ${withFix(link.lastError, link.fix)}` : ''}`;
    if (link.state !== 'stopped' && doc.token.accessExpiresAt !== null) this.#markReady(line);
    this.#notify.status(line);
    try {
      this.#published = true;
      writeStatusFile(this.#config.runtimeDir, doc);
    } catch (err) {
      this.#log.warn({ err: messageOf(err), runtimeDir: this.#config.runtimeDir }, 'cannot write status.json');
    }
  }

  statusDoc(): StatusDoc {
    return statusDoc({
      identity: this.#identity,
      mode: this.#config.mode,
      now: this.#rt?.clock.wallNow(),
      tokens: this.#tokens?.snapshot(),
      link: this.#link?.status,
      relay: this.#relay.counters,
    });
  }
}
