/**
 * Zero-touch enrollment (DESIGN §3.2, §3.7): a broker-mode device with a vendorId and no botId enrolls its
 * own key with no code. Pending, it asks again as Retry-After says (else every 60 s ±20 %); accepted, it
 * keeps the botId in its store as self-registration does; rejected or revoked, it stops asking; a conflict
 * (device-exists, cloud-refused) asks hourly. It never gives up the daemon over this.
 */
import type { Logger } from 'pino';
import type { Clock, Random } from '../../clock.js';
import type { BotlinkError } from '../../protocol/errors.js';
import type { EnrollAnswer } from '../broker/answers.js';
import type { BrokerClient } from '../broker/client.js';
import { CONFLICT_ASK_MS, conflictError, type KeyState, pendingWaitMs, refusedEnrollment } from '../broker/enrollment.js';
import { BrokerError } from '../broker/errors.js';
import { withSkewRetry } from '../broker/skew.js';
import type { TokenStore } from '../store/token-store.js';
import type { BackoffSettings } from '../token/backoff.js';
import { FailureRun } from '../token/failures.js';

/** Where the enrollment stands, for status: the key's state, and the error to show with its fix. */
export interface Enrollment {
  state: KeyState;
  error: BotlinkError | undefined;
}

export interface ZeroTouchOptions {
  random: Random;
  signal: AbortSignal;
  log: Logger;
  /** Every change of state or error, for status. */
  onEnrollment(e: Enrollment): void;
}

/** What enrolling needs of the agent: its clock, the token backoff for failures, and the store that keeps the botId. */
export interface ZeroTouchRuntime {
  readonly clock: Clock;
  readonly backoff: BackoffSettings;
  readonly store: Pick<TokenStore, 'setProvisionedBotId' | 'path'>;
  /** The store's key for the botId, as self-registration keys it (accessKeyId '' in broker mode). */
  readonly account: { readonly baseUrl: string; readonly accessKeyId: string };
}

/** The device as it enrolls: under its vendor, with its serial (config or board). */
export interface SelfDevice {
  vendorId: string;
  deviceId: string;
}

/** Enrolls this device's key until the broker binds it; the botId, or undefined once `signal` aborts. */
export async function enrollItself(
  rt: ZeroTouchRuntime,
  broker: BrokerClient,
  device: SelfDevice,
  o: ZeroTouchOptions,
): Promise<string | undefined> {
  const failures = new FailureRun(rt.backoff, o.random, o.log);
  const log = o.log.child({ keyId: broker.keyId, vendorId: device.vendorId, deviceId: device.deviceId });
  let state: KeyState = 'pending';
  log.info('no botId yet: enrolling this device key with the broker, with no code (zero-touch)');
  while (!o.signal.aborted) {
    let waitMs: number;
    try {
      const answer = await ask(rt, broker, device);
      if (answer.state === 'active') {
        rt.store.setProvisionedBotId({ baseUrl: rt.account.baseUrl, accessKeyId: rt.account.accessKeyId, ...device }, answer.botId);
        log.info({ botId: answer.botId }, `enrolled: botId ${answer.botId} under vendorId ${answer.vendorId}, kept in ${rt.store.path}`);
        o.onEnrollment({ state: 'active', error: undefined });
        return answer.botId;
      }
      failures.succeeded();
      state = 'pending';
      waitMs = pendingWaitMs(answer.retryAfterMs, o.random());
      log.info({ retryInMs: waitMs }, `pending: keyId ${broker.keyId} waits for the vendor to accept it`);
      o.onEnrollment({ state, error: undefined });
    } catch (err) {
      if (o.signal.aborted) return undefined;
      const verdict = refusedEnrollment(err);
      if (verdict === 'rejected' || verdict === 'revoked') {
        const error = err as BrokerError;
        log.error({ code: error.code, fix: error.fix }, `enrollment ended: ${error.message}; asking no more`);
        o.onEnrollment({ state: verdict, error });
        await aborted(o.signal);
        return undefined;
      }
      if (verdict === 'conflict') {
        const error = conflictError(err, device.vendorId, device.deviceId);
        state = 'conflict';
        waitMs = Math.max(CONFLICT_ASK_MS, err instanceof BrokerError ? (err.retryAfterMs ?? 0) : 0);
        log.error({ code: error.code, fix: error.fix, retryInMs: waitMs }, `enrollment refused: ${error.message}; asking again in an hour`);
        o.onEnrollment({ state, error });
      } else {
        const failed = failures.failed(err, 'ERR_PROVISION', 'enrollment failed');
        waitMs = failed.waitMs;
        o.onEnrollment({ state, error: failed.error });
      }
    }
    await rt.clock.sleep(waitMs, o.signal);
  }
  return undefined;
}

/** One ask, stamped with the local clock, and once more with the broker's time after `clock-skew`. */
async function ask(rt: ZeroTouchRuntime, broker: BrokerClient, device: SelfDevice): Promise<EnrollAnswer> {
  const answer = await withSkewRetry(rt.clock, rt.clock.wallNow(), (ts) => broker.enroll(device, ts));
  if (answer.keyId !== broker.keyId) {
    throw new BrokerError(
      'ERR_BAD_RESPONSE',
      `the broker answered for keyId ${answer.keyId}, not this key's ${broker.keyId}`,
      'retry-backoff',
      {
        fix: "check that brokerUrl points at the vendor's botlink broker",
      },
    );
  }
  return answer;
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
