/**
 * `pendingEnrollment` (DESIGN §3.7): the vendors whose devices may wait for an operator when they enroll with
 * no code, and the serials each admits — `{"<vendorId>": {"devicePattern": "<anchored regex>"}}`, default `{}`.
 */
import { messageOf } from '../protocol/errors.js';

/** Per vendor, the serials that may wait for an operator: each pattern matches a whole deviceId. */
export type PendingPolicy = ReadonlyMap<string, RegExp>;

/**
 * The key's value, from the config file (an object) or its variable (the object's JSON text); anything else,
 * or a pattern that does not compile, is `refuse(message)`, which names the key.
 */
export function parsePendingPolicy(value: unknown, refuse: (message: string) => Error): PendingPolicy {
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (err) {
      throw refuse(`pendingEnrollment must be JSON (${messageOf(err)})`);
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw refuse('pendingEnrollment must be an object {"<vendorId>": {"devicePattern": "<regex>"}}');
  const policy = new Map<string, RegExp>();
  for (const [vendorId, entry] of Object.entries(value)) {
    const pattern = (entry as { devicePattern?: unknown } | null)?.devicePattern;
    if (typeof pattern !== 'string' || pattern === '' || Object.keys(entry as object).length !== 1)
      throw refuse(`pendingEnrollment.${vendorId} must be {"devicePattern": "<regex>"}`);
    try {
      // Anchored whatever was written: a pattern matches the whole serial, never a part of it.
      policy.set(vendorId, new RegExp(`^(?:${pattern})$`, 'u'));
    } catch (err) {
      throw refuse(`pendingEnrollment.${vendorId}.devicePattern is not a regular expression (${messageOf(err)})`);
    }
  }
  return policy;
}

/** Whether the vendor lets this serial wait for an operator. */
export function mayWait(policy: PendingPolicy, vendorId: string, deviceId: string): boolean {
  return policy.get(vendorId)?.test(deviceId) === true;
}
