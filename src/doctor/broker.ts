import { BrokerError } from '../agent/broker/errors.js';
import { withSkewRetry } from '../agent/broker/skew.js';
import type { ResolvedIdentity } from '../agent/daemon/provisioning.js';
import { chooseSigningTime } from '../agent/time/signingtime.js';
import { NETWORK_FIX } from '../cloud/network.js';
import type { RefusalCode } from '../protocol/broker.js';
import { fixOf, messageOf } from '../protocol/errors.js';
import { type Check, type DoctorContext, fail, failWith, ok, type Outcome, skip } from './check.js';

/**
 * Whether the broker gives each refusal only after it found the key active (DESIGN §3.7's order of
 * checks): those prove the key known. Every code of the contract is named, so a new one must be judged here.
 */
const AFTER_THE_KEY: Readonly<Record<RefusalCode, boolean>> = {
  'bad-request': false,
  'bad-signature': true,
  'unknown-key': false,
  replayed: true,
  'clock-skew': false,
  revoked: false,
  rejected: false,
  pending: false,
  'bad-code': false,
  'not-found': false,
  timeout: false,
  'device-exists': false,
  'too-large': false,
  'rate-limited': true,
  'cloud-refused': true,
  'cloud-unreachable': true,
  'store-unavailable': false,
};

/**
 * Broker mode: the broker answers (`/v1/health`), and knows this device key — a signed `/v1/token`
 * answered with anything the broker says only of a key it found. The token it gives is held in memory
 * for the getToken and websocket checks, never stored. Signing mode has no broker.
 */
export const brokerCheck: Check = {
  name: 'broker',
  needs: ['runtime'],
  async run(ctx) {
    const rt = ctx.rt!;
    if (rt.issuer.mode !== 'broker') return ok('none: signing mode, this device signs with the account secret (see secret file)');
    const { broker } = rt.issuer;
    const where = ctx.config!.brokerUrl;
    let store: string;
    try {
      store = (await broker.health()).store;
    } catch (err) {
      ctx.broker = { reachable: false };
      return fail(`${where}: ${messageOf(err)}`, fixOf(err) ?? `check brokerUrl; ${NETWORK_FIX}`);
    }
    ctx.broker = { reachable: true };
    const at = chooseSigningTime(ctx.verdict ?? (await rt.checkTimeSync()), rt.serverTime, rt.clock);
    try {
      // Stamped with the wall clock when no time is trusted: a refused time costs one more round trip, no harm.
      const issued = await withSkewRetry(rt.clock, at.ok ? at.ms : rt.clock.wallNow(), (ts) => broker.token(ts));
      ctx.broker.answer = { ok: true, issued };
    } catch (err) {
      ctx.broker.answer = { ok: false, error: err };
      const refusal = err instanceof BrokerError ? err.refusal : undefined;
      if (refusal === undefined || !AFTER_THE_KEY[refusal]) {
        return failWith(err, "check brokerUrl and this device's clock");
      }
    }
    return ok(`${where} answers (store ${store}) and knows this device key (keyId ${broker.keyId})`);
  },
};

/** The getToken check in broker mode: what the broker answered the signed /v1/token above. */
export function brokerTokenOutcome(ctx: DoctorContext, identity: ResolvedIdentity): Outcome {
  const answer = ctx.broker?.answer;
  if (answer === undefined) return skip('needs the broker (see above)');
  if (!answer.ok) return failWith(answer.error, 'see the broker check above');
  const { botId, expireIn, accessToken } = answer.issued;
  if (botId !== identity.id) {
    return fail(
      `the broker issues tokens for botId ${botId}, but the config names ${identity.id}`,
      `set botId to "${botId}" in the config`,
    );
  }
  ctx.token = accessToken;
  return ok(`bot ${botId}: token issued by the broker, valid ${expireIn} s`);
}
