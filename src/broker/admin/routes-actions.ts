/** The admin API's actions on a device (DESIGN §3.8): revoke (displacing by default) and reset-limits, audited as the token's name. */
import { displaceRevoked, OperatorInputError, type RevokeResult, resetLimits, revoke } from '../operator.js';
import { type AdminRoute, ok, operatorOf } from './context.js';
import { AdminError, notFound } from './errors.js';
import { BodyReader } from './input.js';

const BOT_ID = '(?<botId>[A-Za-z0-9._:@-]{1,128})';

/**
 * §3.7's revoke: every active key of the botId; `displace` (default true) closes the socket the device holds, now and once
 * its last token ends. The answer extends §3.8's `{revoked}` with what the store path prints: `displaceAt` (the later
 * displacement, null when none is due) and, when displacing, `displacement` (`{outcome, reason?}`).
 */
const revokeDevice: AdminRoute = {
  method: 'POST',
  path: new RegExp(`^/devices/${BOT_ID}/revoke$`),
  role: 'operator',
  async handle(ctx, req) {
    const displace = new BodyReader(req.body, ['displace']).boolean('displace') ?? true;
    const botId = req.params['botId'] ?? '';
    if (!(await ctx.store.findDeviceByBotId(botId))) throw notFound(`no device with botId ${botId}`);
    const by = operatorOf(ctx, req);
    let result: RevokeResult;
    try {
      result = await revoke(ctx.store, botId, ctx.clock.wallNow(), by, { displace });
    } catch (err) {
      if (err instanceof OperatorInputError) throw new AdminError('conflict', err.message);
      throw err;
    }
    const { revoked, displaceAt } = result;
    if (!displace) return ok({ revoked, displaceAt });
    return ok({ revoked, displaceAt, displacement: await displaceRevoked(ctx.displacer, botId, by) });
  },
};

const resetDeviceLimits: AdminRoute = {
  method: 'POST',
  path: new RegExp(`^/devices/${BOT_ID}/reset-limits$`),
  role: 'operator',
  async handle(ctx, req) {
    new BodyReader(req.body, []);
    const botId = req.params['botId'] ?? '';
    try {
      // §3.8 answers {}; `cleared` (the count windows cleared) extends it with what the store path prints.
      return ok({ cleared: await resetLimits(ctx.store, botId, operatorOf(ctx, req)) });
    } catch (err) {
      if (err instanceof OperatorInputError) throw notFound(err.message);
      throw err;
    }
  },
};

export const ACTION_ROUTES: readonly AdminRoute[] = [revokeDevice, resetDeviceLimits];
