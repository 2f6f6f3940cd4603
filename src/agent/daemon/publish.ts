import type { Logger } from 'pino';
import { messageOf, withFix } from '../../protocol/errors.js';
import type { Clock } from '../../clock.js';
import { MetricsFile } from './metrics-file.js';
import { createNotifier, type Notifier } from './notify.js';
import { type Pace, PacedWrite } from './paced.js';
import { writeStatusFile, type StatusDoc } from './status.js';

/**
 * status.json's pace (issue 27): a change is written at once while the daemon has written fewer than
 * `burst` in the last burst × everyMs, else with every change since in one write within everyMs. A boot
 * to connected writes about five; an observer or app attaching in a loop, four a second at most.
 */
export const STATUS_PACE: Pace = Object.freeze({ everyMs: 250, burst: 8 });

export interface PublisherOptions {
  env: NodeJS.ProcessEnv;
  runtimeDir: string;
  /** node_exporter's textfile (DESIGN §3.2), or null for none. */
  metricsFile: string | null;
  clock: Clock;
  log: Logger;
  /** The status document of this moment (DESIGN §3.4). */
  status(): StatusDoc;
  /** The Prometheus text of this moment (DESIGN §3.5). */
  metrics(): string;
}

/** What the daemon tells the world of its state: systemd (sd_notify), status.json and metricsFile. */
export class Publisher {
  readonly #o: PublisherOptions;
  readonly #notify: Notifier;
  readonly #statusFile: PacedWrite;
  #metricsFile: MetricsFile | undefined;
  #ready = false;
  /** A change was published: only then does stop() write the last status (a daemon refused at start never does). */
  #published = false;
  /** The last status is out: a renewal that settles while the runtime closes changes nothing any more. */
  #stopped = false;

  constructor(o: PublisherOptions) {
    this.#o = o;
    this.#notify = createNotifier(o.env, o.log, o.clock);
    this.#statusFile = new PacedWrite(o.clock, STATUS_PACE, () => this.#writeStatus());
  }

  /** The one path of every status change: systemd hears it now, status.json at the pace of STATUS_PACE. */
  changed(): void {
    if (this.#stopped) return;
    this.#tellSystemd();
    this.#published = true;
    this.#statusFile.request();
  }

  /** READY=1, once: a token is held, or the daemon waits on purpose and says for what (DESIGN §2). */
  ready(line: string): void {
    if (this.#ready) return;
    this.#ready = true;
    this.#notify.ready(line);
  }

  /** metricsFile begins: now, then every minute. */
  startMetrics(): void {
    if (this.#o.metricsFile === null || this.#metricsFile) return;
    this.#metricsFile = new MetricsFile(this.#o.metricsFile, this.#o.clock, this.#o.log, this.#o.metrics);
    this.#metricsFile.start();
  }

  /** STOPPING=1: the first thing a stop does. */
  stopping(): void {
    this.#notify.stopping();
  }

  /** The last status (once the link stopped), the last metricsFile, and sd_notify closed. */
  stop(): void {
    this.#stopped = true;
    if (this.#published) {
      this.#tellSystemd();
      this.#statusFile.flush();
    }
    this.#metricsFile?.stop();
    this.#notify.close();
  }

  #tellSystemd(): void {
    const doc = this.#o.status();
    const { link } = doc;
    const line = `${link.state}${link.lastError ? `: ${withFix(link.lastError, link.fix)}` : ''}`;
    if (link.state !== 'stopped' && doc.token.accessExpiresAt !== null) this.ready(line);
    this.#notify.status(line);
    // systemd should not kill a daemon that waits for the network or a fix: READY, saying what it waits on.
    const { lastError, fix } = doc.token;
    if (lastError) this.ready(`waiting for a token: ${withFix(lastError, fix)}`);
  }

  #writeStatus(): void {
    const { runtimeDir, log } = this.#o;
    try {
      writeStatusFile(runtimeDir, this.#o.status());
    } catch (err) {
      log.warn({ err: messageOf(err), runtimeDir }, 'cannot write status.json');
    }
  }
}
