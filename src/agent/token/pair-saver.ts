import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import { nextBackoff, resetBackoff, type BackoffSettings, type BackoffState } from './backoff.js';
import type { Cancel, Clock, Random } from '../../clock.js';
import { LAST_SERVER_TIME_KEY, type StoreIdentity, type TokenPair, type TokenStore } from '../store/token-store.js';

export interface PairSaverOptions {
  store: TokenStore;
  identity: StoreIdentity;
  clock: Clock;
  log: Logger;
  backoff: BackoffSettings;
  random: Random;
  /** Called when a retry falls due: the owner calls save() again (under its renew lock). */
  wake: () => void;
  /** Called when whether the pair is on disk changes. */
  onChange: () => void;
}

/** A failed save costs nothing and the disk may come back any time: retry often, but not in a tight loop. */
export const SAVE_BACKOFF: BackoffSettings = Object.freeze({ baseMs: 2_000, capMs: 60_000 });

/**
 * Writes the token manager's pair (and the clock floor) to the store. A pair the store refuses
 * (full or read-only disk) is still the one in use: it is marked unsaved, the log and status say
 * "state not persisted", and saving is tried again on a backoff schedule until the disk takes it.
 */
export class PairSaver {
  readonly #store: TokenStore;
  readonly #identity: StoreIdentity;
  readonly #log: Logger;
  readonly #onChange: () => void;
  readonly #retry: SaveRetry;
  #unsaved = false;
  /** A trusted server time to record with the pair: the clock floor after a reboot. */
  #floorMs: number | undefined;
  #error: string | undefined;

  constructor(opts: PairSaverOptions) {
    this.#store = opts.store;
    this.#identity = opts.identity;
    this.#log = opts.log;
    this.#onChange = opts.onChange;
    this.#retry = new SaveRetry(opts);
  }

  /** The pair held is newer than the store's. */
  get unsaved(): boolean {
    return this.#unsaved;
  }

  /** A failed save waits for its retry time. */
  get due(): boolean {
    return this.#unsaved && this.#retry.due;
  }

  status(): { persisted: boolean; lastError: string | null } {
    return { persisted: this.#error === undefined, lastError: this.#error ?? null };
  }

  /** Saves `pair`, the one now in use; `floorMs` is the trusted server time it was issued at, if known. */
  save(pair: TokenPair, floorMs?: number): void {
    this.#unsaved = true;
    if (floorMs !== undefined) this.#floorMs = floorMs;
    this.#retry.cancel();
    try {
      this.#store.savePair(this.#identity, pair);
      if (this.#floorMs !== undefined) this.#store.setMeta(LAST_SERVER_TIME_KEY, String(this.#floorMs));
    } catch (err) {
      this.#failed(err);
      return;
    }
    this.settled();
  }

  /** Nothing is left to save: the pair was written, or the owner took a newer one from the store. */
  settled(): void {
    this.#unsaved = false;
    this.#floorMs = undefined;
    this.#retry.reset();
    if (this.#error === undefined) return;
    this.#error = undefined;
    this.#log.info({ path: this.#store.path }, 'state persisted again: the token store holds the token in use');
    this.#onChange();
  }

  stop(): void {
    this.#retry.stop();
  }

  #failed(err: unknown): void {
    const first = this.#error === undefined;
    this.#error = messageOf(err);
    const retryInMs = this.#retry.schedule();
    this.#log[first ? 'error' : 'warn'](
      {
        code: 'ERR_STORE_WRITE',
        sqlite: (err as { code?: unknown }).code,
        path: this.#store.path,
        retryInMs,
        fix: 'free space on the disk that holds stateDir, or make it writable',
      },
      `state not persisted: cannot save the token (${this.#error}); it is kept in memory and used, and saved once the disk takes it`,
    );
    if (first) this.#onChange();
  }
}

/** When a refused save is tried again: on the backoff schedule, timed on the clock, waking the owner when due. */
class SaveRetry {
  readonly #clock: Clock;
  readonly #settings: BackoffSettings;
  readonly #random: Random;
  readonly #wake: () => void;
  #backoff: BackoffState = resetBackoff();
  #dueAtMono = Number.NEGATIVE_INFINITY;
  #cancel: Cancel | undefined;
  #stopped = false;

  constructor(opts: Pick<PairSaverOptions, 'clock' | 'backoff' | 'random' | 'wake'>) {
    this.#clock = opts.clock;
    this.#settings = opts.backoff;
    this.#random = opts.random;
    this.#wake = opts.wake;
  }

  get due(): boolean {
    return this.#clock.monoNow() >= this.#dueAtMono;
  }

  /** A save failed: the next try is due after the schedule's next wait, which is returned. */
  schedule(): number {
    const next = nextBackoff(this.#backoff, this.#settings, this.#random());
    this.#backoff = next.state;
    this.#dueAtMono = this.#clock.monoNow() + next.delayMs;
    if (!this.#stopped) {
      // Unref'd: a save waiting for the disk never keeps a command alive.
      this.#cancel = this.#clock.setTimer(next.delayMs, () => {
        // Due now, whatever the clock reads: the owner's next step must not find it early and wait again.
        this.#dueAtMono = Number.NEGATIVE_INFINITY;
        this.#wake();
      });
    }
    return next.delayMs;
  }

  /** A try is under way: the one scheduled is not needed. */
  cancel(): void {
    this.#cancel?.();
  }

  /** A save succeeded: the next failure starts the schedule afresh. */
  reset(): void {
    this.#backoff = resetBackoff();
    this.#cancel?.();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
  }
}
