/**
 * Enrollment with no code (DESIGN §3.7 "The device in broker mode"), as pure decisions: how long a
 * pending key waits before it asks again, and what a refusal means to a device that enrolls itself.
 * The daemon's zero-touch loop and `botlink provision --vendor-id` both follow them.
 */
import { type BotlinkError, messageOf } from '../../protocol/errors.js';
import { BrokerError } from './errors.js';

/** The key's state as `status` shows it in broker mode (`identity.state`). */
export type KeyState = 'active' | 'pending' | 'rejected' | 'revoked' | 'conflict';

/** A pending key asks again this often when the broker names no Retry-After. */
export const PENDING_ASK_MS = 60_000;
/** At most this share of jitter either side of 60 s; a Retry-After is only ever stretched by it, never cut. */
export const ASK_JITTER = 0.2;
/** A device the broker will not enroll as it is (device-exists, cloud-refused) asks hourly: a person must act first. */
export const CONFLICT_ASK_MS = 3_600_000;

/** The wait before a pending key asks again: its Retry-After stretched by up to 20 %, else 60 s ±20 %. */
export function pendingWaitMs(retryAfterMs: number | undefined, random: number): number {
  const r = Number.isFinite(random) ? Math.min(Math.max(random, 0), 1) : 0;
  if (retryAfterMs !== undefined) return Math.round(retryAfterMs * (1 + ASK_JITTER * r));
  return Math.round(PENDING_ASK_MS * (1 - ASK_JITTER + 2 * ASK_JITTER * r));
}

/** What the broker last said of this key: a token refusal names it; else the enrollment's state; else active. */
export function keyState(enrollment: KeyState | undefined, tokenError: string | undefined): KeyState {
  if (tokenError === 'ERR_BROKER_REVOKED') return 'revoked';
  if (tokenError === 'ERR_BROKER_REJECTED') return 'rejected';
  if (tokenError === 'ERR_BROKER_PENDING') return 'pending';
  return enrollment ?? 'active';
}

/** What a refused enrollment leaves the device to do: stop asking, ask hourly (a conflict), or retry on the schedule. */
export type RefusedEnrollment = 'rejected' | 'revoked' | 'conflict' | 'retry';

export function refusedEnrollment(err: unknown): RefusedEnrollment {
  if (!(err instanceof BrokerError)) return 'retry';
  switch (err.code) {
    case 'ERR_BROKER_REJECTED':
      return 'rejected';
    case 'ERR_BROKER_REVOKED':
      return 'revoked';
    case 'ERR_BROKER_DEVICE_EXISTS':
    case 'ERR_BROKER_BAD_CODE':
      return 'conflict';
    // The cloud's "system error" passes (retry-backoff); any other refusal of the cloud waits for a person.
    case 'ERR_BROKER_CLOUD_REFUSED':
      return err.retry === 'retry-backoff' ? 'retry' : 'conflict';
    default:
      return 'retry';
  }
}

/** The code a person asks the vendor for, and the command that uses it, for one device. */
export function replaceCodeFix(vendorId: string | undefined, deviceId: string): string {
  const vendor = vendorId === undefined ? 'V' : vendorId;
  return (
    `ask the vendor for a --replace code for deviceId ${deviceId} ` +
    `(\`botlink broker code --vendor-id ${vendor} --device-id ${deviceId} --replace\`), ` +
    `then run \`botlink provision --broker URL --code CODE --device-id ${deviceId}\``
  );
}

/** A conflict as status shows it: the broker's own words, and the fix naming the --replace code. */
export function conflictError(err: unknown, vendorId: string | undefined, deviceId: string): BotlinkError {
  const message = messageOf(err);
  const said = err instanceof BrokerError && err.code === 'ERR_BROKER_CLOUD_REFUSED' ? `${err.fix ?? ''}; or ` : '';
  return new BrokerError(err instanceof BrokerError ? err.code : 'ERR_BROKER_DEVICE_EXISTS', message, 'needs-provisioning', {
    cause: err,
    fix: `${said}${replaceCodeFix(vendorId, deviceId)}`,
  });
}
