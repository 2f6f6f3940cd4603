/**
 * Whether this replica may serve (DESIGN §3.7): its store answers a query within 2 s, and the store's
 * clock and this replica's agree within 30 s — nonces are kept by the store's clock and the window is
 * judged by the replica's, so a replica whose clock strays serves nothing until they agree again.
 */
import type { Cancel, Clock } from '../clock.js';
import { messageOf } from '../protocol/errors.js';
import { Refusal } from './refusal.js';
import type { Housekeeping } from './store/types.js';

export const STORE_ANSWER_MS = 2_000;
export const MAX_CLOCK_SKEW_MS = 30_000;
/** How often a replica compares its clock with the store's, between health checks. */
export const CLOCK_CHECK_MS = 10_000;
/** What a request refused for the store is told to wait. */
const STORE_RETRY_AFTER_S = 5;

export type StoreVerdict = { ok: true } | { ok: false; error: 'store-unreachable' | 'clock-skew'; msg: string };

export class StoreHealth {
  readonly #store: Pick<Housekeeping, 'now'>;
  readonly #clock: Pick<Clock, 'wallNow' | 'setTimer'>;
  #skewed: string | undefined;
  #cancel: Cancel = () => undefined;

  constructor(store: Pick<Housekeeping, 'now'>, clock: Pick<Clock, 'wallNow' | 'setTimer'>) {
    this.#store = store;
    this.#clock = clock;
  }

  /** Checks now and then every CLOCK_CHECK_MS until stop(). */
  start(): void {
    const again = (): void => {
      void this.check().finally(() => {
        this.#cancel = this.#clock.setTimer(CLOCK_CHECK_MS, again);
      });
    };
    again();
  }

  stop(): void {
    this.#cancel();
  }

  /** Asks the store its time, at most STORE_ANSWER_MS; a skew found is remembered until a check finds none. */
  async check(): Promise<StoreVerdict> {
    let timer: Cancel = () => undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = this.#clock.setTimer(STORE_ANSWER_MS, () => resolve('late'));
    });
    let storeNow: number | 'late';
    try {
      storeNow = await Promise.race([this.#store.now(), late]);
    } catch (err) {
      return { ok: false, error: 'store-unreachable', msg: `the store does not answer (${messageOf(err)})` };
    } finally {
      timer();
    }
    if (storeNow === 'late')
      return { ok: false, error: 'store-unreachable', msg: `the store did not answer in ${STORE_ANSWER_MS / 1000} s` };
    const skew = this.#clock.wallNow() - storeNow;
    this.#skewed = Math.abs(skew) > MAX_CLOCK_SKEW_MS ? `this replica's clock is ${Math.round(skew / 1000)} s from the store's` : undefined;
    return this.#skewed === undefined ? { ok: true } : { ok: false, error: 'clock-skew', msg: this.#skewed };
  }

  /** 503 store-unavailable while the last check found the clocks apart. */
  refuseWhileSkewed(): void {
    if (this.#skewed !== undefined) throw storeUnavailable(this.#skewed);
  }
}

export function storeUnavailable(msg: string): Refusal {
  return new Refusal('store-unavailable', msg, { retryAfterS: STORE_RETRY_AFTER_S });
}
