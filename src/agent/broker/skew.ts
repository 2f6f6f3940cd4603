import type { TimeReader } from '../../clock.js';
import { BrokerError } from './errors.js';

/**
 * The timestamp to retry with after `clock-skew` (DESIGN §3.7): the broker's time from the answer,
 * moved on by the time since it arrived; undefined for any other failure.
 */
export function skewRetryTime(err: unknown, monoNow: number): number | undefined {
  if (!(err instanceof BrokerError) || err.code !== 'ERR_BROKER_CLOCK_SKEW' || err.serverTime === undefined) return undefined;
  return Math.round(err.serverTime.ms + Math.max(0, monoNow - err.serverTime.atMono));
}

/** Runs a signed call at `tsMs`; refused for `clock-skew`, once more at the broker's time, and no more. */
export async function withSkewRetry<T>(
  clock: TimeReader,
  tsMs: number,
  call: (tsMs: number) => Promise<T>,
  onRetry?: (offByMs: number) => void,
): Promise<T> {
  try {
    return await call(tsMs);
  } catch (err) {
    const again = skewRetryTime(err, clock.monoNow());
    if (again === undefined) throw err;
    onRetry?.(tsMs - again);
    return call(again);
  }
}
