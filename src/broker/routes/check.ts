/**
 * POST /v1/check (DESIGN §3.7): every check a token request makes — form, window, key, signature, state,
 * its own limit — then nothing but the nonce. No token, no cloud call: `doctor` diagnoses a device with
 * it without spending the device's tokens. A key that still waits for an operator: 202 pending.
 */
import { keyRoute } from '../auth/authenticate.js';
import { Refusal } from '../refusal.js';

const HOUR_MS = 3_600_000;
/** §3.7: a check's own limit, per botId; apart from deviceTokensPerHour, which it neither counts in nor is refused by. */
export const CHECKS_PER_HOUR = 60;

export const check = keyRoute({
  name: 'check',
  form(body) {
    if (Object.keys(body).length > 0) throw new Refusal('bad-request', 'the body of a check must be {}');
    return {};
  },
  // A key that waits for an operator is answered 202 pending, at its two asks a minute (§3.7).
  pending: {},
  async admit(_ctx, req) {
    return { admitted: undefined, limit: { kind: 'check', id: req.botId, windowMs: HOUR_MS, max: CHECKS_PER_HOUR } };
  },
  async serve(_ctx, req) {
    const { botId, keyId } = req.key;
    return { status: 200, body: { botId, keyId, state: 'active' } };
  },
});
