import type { Clock } from '../../clock.js';
import type { DeviceKey } from '../config/device-key.js';
import type { EnrollAnswer, EnrollRequest } from './answers.js';
import { BrokerClient } from './client.js';
import { BrokerError } from './errors.js';
import { withSkewRetry } from './skew.js';

export interface EnrollOptions {
  brokerUrl: string;
  /** PEM of the broker's private CA; null: the system CAs. */
  ca: string | null;
  key: DeviceKey;
  clock: Clock;
  request: EnrollRequest;
  /** Total time each call may take. */
  timeoutMs?: number;
}

/**
 * Enrolls `key` with the broker (DESIGN §3.7 `/v1/enroll`): bound to a botId, or (no code) pending.
 * Stamped with the local clock, and after a `clock-skew` refusal once more with the broker's time, so a
 * board that boots in 1970 enrolls too.
 */
export async function enrollDevice(opts: EnrollOptions): Promise<EnrollAnswer> {
  const client = new BrokerClient({
    brokerUrl: opts.brokerUrl,
    ca: opts.ca,
    key: opts.key,
    clock: opts.clock,
    ...(opts.timeoutMs !== undefined && {
      connectTimeoutMs: opts.timeoutMs,
      headersTimeoutMs: opts.timeoutMs,
      bodyTimeoutMs: opts.timeoutMs,
    }),
  });
  try {
    const enrolled = await withSkewRetry(opts.clock, opts.clock.wallNow(), (ts) => client.enroll(opts.request, ts));
    if (enrolled.keyId !== opts.key.keyId) {
      throw new BrokerError(
        'ERR_BAD_RESPONSE',
        `the broker answered for keyId ${enrolled.keyId}, not this key's ${opts.key.keyId}`,
        'fatal',
        {
          fix: "check that brokerUrl points at the vendor's botlink broker",
        },
      );
    }
    return enrolled;
  } finally {
    await client.close();
  }
}
