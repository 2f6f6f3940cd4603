import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import type { Cancel, Clock } from '../../clock.js';
import { replaceFile } from './replace-file.js';

/** metricsFile is rewritten this often (DESIGN §3.2); node_exporter reads it at each of its own scrapes. */
export const METRICS_FILE_MS = 60_000;
/**
 * metricsFile's mode, set whatever the unit's UMask=0077: node_exporter runs as a user of its own, and the
 * daemon's dynamic user cannot give the file its group, so others must be able to read it.
 */
export const METRICS_FILE_MODE = 0o644;

/**
 * Keeps metricsFile (node_exporter's textfile collector) fresh: now, every METRICS_FILE_MS, and once more
 * at stop; each time through a temp file of a random name, created new, never through a link (replaceFile).
 */
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
      replaceFile(this.#file, this.#text(), { mode: METRICS_FILE_MODE, durable: true });
      this.#failed = false;
    } catch (err) {
      // Said once: a folder that is missing stays missing every minute.
      if (!this.#failed) this.#log.warn({ err: messageOf(err), metricsFile: this.#file }, 'cannot write metricsFile');
      this.#failed = true;
    }
  }
}
