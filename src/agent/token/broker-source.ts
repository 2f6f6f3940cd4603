import type { TimeReader } from '../../clock.js';
import { BotlinkError } from '../../protocol/errors.js';
import type { BrokerClient } from '../broker/client.js';
import { BrokerError } from '../broker/errors.js';
import { withSkewRetry } from '../broker/skew.js';
import { ClockNotTrustedError } from '../time/signingtime.js';
import { brokeredPair } from './pairs.js';
import type { RenewContext, Renewed, TokenSource } from './source.js';

/**
 * Broker mode (DESIGN §3.7): wherever the manager would sign or refresh, it asks the broker for a token,
 * signed with the device key at a trusted time, and once more at the broker's time after `clock-skew`.
 * Once the broker says `revoked` (or `rejected`), it asks no more: the key is spent, and only re-enrollment (a new key,
 * a restart) helps; the token held meanwhile is used until it ends.
 */
export function brokerSource(client: BrokerClient, clock: TimeReader): TokenSource {
  let revoked: BrokerError | undefined;
  const obtain = async (ctx: RenewContext): Promise<Renewed> => {
    if (revoked) throw revoked;
    if (ctx.identity.kind !== 'bot') {
      throw new BotlinkError(
        'ERR_PROVISION',
        `broker mode issues tokens for this device's botId only, not for ${ctx.identity.kind} ${ctx.identity.id}`,
        'needs-config',
        {
          fix: 'broker mode registers devices through the broker: botlink provision --broker URL --code CODE --device-id SN',
        },
      );
    }
    const chosen = await ctx.time.forSigning();
    if (!chosen.ok) throw new ClockNotTrustedError(chosen.reason);
    let issued: Awaited<ReturnType<BrokerClient['token']>>;
    try {
      issued = await withSkewRetry(
        clock,
        chosen.ms,
        (ts) => client.token(ts, ctx.minValidityMs / 1000),
        (offByMs) =>
          ctx.log.warn({ offByMs, source: chosen.source }, 'the broker refused the timestamp (clock-skew); asking once more with its time'),
      );
    } catch (err) {
      // Revoked or rejected is final for this key: asking again only spends the broker's time.
      if (err instanceof BrokerError && (err.code === 'ERR_BROKER_REVOKED' || err.code === 'ERR_BROKER_REJECTED')) revoked = err;
      throw err;
    }
    if (issued.botId !== ctx.identity.id) {
      throw new BrokerError(
        'ERR_BROKER_BOT_MISMATCH',
        `the broker issued a token for botId ${issued.botId}, but the config names ${ctx.identity.id}`,
        'needs-config',
        {
          fix: `set botId to "${issued.botId}", the one the broker bound to this device key (keyId ${client.keyId})`,
        },
      );
    }
    await ctx.time.verdict();
    return { pair: brokeredPair(issued), serverNow: ctx.time.now() };
  };
  return {
    mode: 'broker',
    obtained: 'issued by the broker',
    obtain,
    // A broker's pair holds no refresh token, so renewing it is asking the broker again.
    refresh: (ctx) => obtain(ctx),
    sampleServerTime: () => client.sampleServerTime(),
  };
}
