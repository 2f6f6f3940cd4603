/**
 * Refusals counted per minute in memory, for the audit's log lines (DESIGN §3.7): one line per key, or per
 * source, and code in each minute, with its count — never one per request. Bounded: past `maxKeys` in a
 * minute, further keys are only counted together.
 */
import { minuteOf } from './queue.js';

export interface TalliedMinute<F> {
  /** The minute's first ms. */
  minute: number;
  entries: { fields: F; count: number }[];
  /** Refusals of keys past the bound, not told apart. */
  overflow: number;
}

export class MinuteTally<F> {
  readonly #maxKeys: number;
  #minute = Number.NaN;
  #entries = new Map<string, { fields: F; count: number }>();
  #overflow = 0;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /** One more under `key` (`fields` are kept from its first); the minute before, when `at` starts a new one. */
  add(key: string, fields: F, at: number): TalliedMinute<F> | undefined {
    const closed = minuteOf(at) === this.#minute ? undefined : this.take(at, true);
    this.#minute = minuteOf(at);
    const entry = this.#entries.get(key);
    if (entry) entry.count += 1;
    else if (this.#entries.size < this.#maxKeys) this.#entries.set(key, { fields, count: 1 });
    else this.#overflow += 1;
    return closed;
  }

  /** The minute counted, once it has ended by `now` (or at once when `force`); undefined when there is none to give. */
  take(now: number, force = false): TalliedMinute<F> | undefined {
    if (this.#entries.size === 0 && this.#overflow === 0) return undefined;
    if (!force && minuteOf(now) === this.#minute) return undefined;
    const closed = { minute: this.#minute, entries: [...this.#entries.values()], overflow: this.#overflow };
    this.#entries = new Map();
    this.#overflow = 0;
    return closed;
  }

  /** Whether anything is counted and not yet taken. */
  get pending(): boolean {
    return this.#entries.size > 0 || this.#overflow > 0;
  }
}
