import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import type { Cancel, Clock } from '../../clock.js';
import { writeMetricsFile } from './status.js';

/** metricsFile is rewritten this often (DESIGN §3.2); node_exporter reads it at each of its own scrapes. */
export const METRICS_FILE_MS = 60_000;

/** Keeps metricsFile (node_exporter's textfile collector) fresh: now, every METRICS_FILE_MS, and once more at stop. */
export class MetricsFile {
  readonly #file: string;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #text: () => string;
  #cancel: Cancel | undefined;
  #failed = false;

  constructor(file: string, clock: Clock, log: Logger, text: () => string) {
    this.#file = file;
    this.#clock = clock;
    this.#log = log;
    this.#text = text;
  }

  start(): void {
    this.#write();
    this.#cancel = this.#clock.setTimer(METRICS_FILE_MS, () => this.start());
  }

  /** The last write: the link stopped, as a scrape after the daemon is gone should show. */
  stop(): void {
    if (!this.#cancel) return;
    this.#cancel();
    this.#cancel = undefined;
    this.#write();
  }

  #write(): void {
    try {
      writeMetricsFile(this.#file, this.#text());
      this.#failed = false;
    } catch (err) {
      // Said once: a folder that is missing stays missing every minute.
      if (!this.#failed) this.#log.warn({ err: messageOf(err), metricsFile: this.#file }, 'cannot write metricsFile');
      this.#failed = true;
    }
  }
}
