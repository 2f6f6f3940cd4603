import type { CheckAnswer } from '../agent/broker/answers.js';
import { BrokerError } from '../agent/broker/errors.js';
import { withSkewRetry } from '../agent/broker/skew.js';
import type { ResolvedIdentity } from '../agent/daemon/provisioning.js';
import type { TokenPair } from '../agent/store/token-store.js';
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
 * Broker mode: the broker answers (`/v1/health`), and holds this device key active — a signed `/v1/check`,
 * which costs the device none of its hourly tokens (DESIGN §3.7). Doctor asks the broker for no token: the
 * WebSocket check uses the token the daemon keeps, when it holds a valid one. Signing mode has no broker.
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
    let checked: CheckAnswer;
    try {
      // Stamped with the wall clock when no time is trusted: a refused time costs one more round trip, no harm.
      checked = await withSkewRetry(rt.clock, at.ok ? at.ms : rt.clock.wallNow(), (ts) => broker.check(ts));
    } catch (err) {
      ctx.broker.answer = { ok: false, error: err };
      const refusal = err instanceof BrokerError ? err.refusal : undefined;
      if (refusal === undefined || !AFTER_THE_KEY[refusal]) {
        return failWith(err, "check brokerUrl and this device's clock");
      }
      return ok(`${where} answers (store ${store}) and knows this device key (keyId ${broker.keyId}), but refused the check`);
    }
    ctx.broker.answer = { ok: true, checked };
    if (checked.state === 'pending') {
      return fail(
        `${where} answers (store ${store}); this device key (keyId ${broker.keyId}) waits for the vendor to accept it`,
        `read keyId ${broker.keyId} to the vendor, who accepts it (botlink broker accept KEYID --device-id SN)`,
      );
    }
    return ok(`${where} answers (store ${store}) and holds this device key active (keyId ${broker.keyId})`);
  },
};

/**
 * The getToken check in broker mode: what the broker answered the signed /v1/check above, and no token
 * asked for; the WebSocket check then uses the daemon's cached token, when it is valid.
 */
export function brokerTokenOutcome(ctx: DoctorContext, identity: ResolvedIdentity, cached: TokenPair | undefined): Outcome {
  const answer = ctx.broker?.answer;
  if (answer === undefined) return skip('needs the broker (see above)');
  if (!answer.ok) return failWith(answer.error, 'see the broker check above');
  if (answer.checked.state === 'pending') return fail('this device key waits for the vendor to accept it', 'see the broker check above');
  const { botId } = answer.checked;
  if (identity.kind === 'vendor') {
    return fail(`the broker binds this key to botId ${botId}, but this device has no botId yet`, 'start the daemon, which keeps it');
  }
  if (botId !== identity.id) {
    return fail(
      `the broker binds this device key to botId ${botId}, but the config names ${identity.id}`,
      `set botId to "${botId}" in the config`,
    );
  }
  const valid = cached !== undefined && cached.accessExpiresAt > ctx.clock.wallNow() ? cached : undefined;
  if (valid) ctx.token = valid.accessToken;
  const held = valid ? 'the token the daemon keeps is tested below' : 'no valid token cached here, so the WebSocket is not tested';
  return ok(`bot ${botId}: the broker holds its key active; doctor asks for no token (the hourly tokens stay the device's); ${held}`);
}
