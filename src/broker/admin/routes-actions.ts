/** The admin API's actions on a device (DESIGN §3.8): revoke (displacing by default) and reset-limits, audited as the token's name. */
import { displaceRevoked, OperatorInputError, resetLimits, revoke } from '../operator.js';
import { type AdminRoute, ok, operatorOf } from './context.js';
import { AdminError, notFound } from './errors.js';
import { BodyReader } from './input.js';

const BOT_ID = '(?<botId>[A-Za-z0-9._:@-]{1,128})';

/** §3.7's revoke: every active key of the botId; `displace` (default true) closes the socket the device holds, now and once its last token ends. */
const revokeDevice: AdminRoute = {
  method: 'POST',
  path: new RegExp(`^/devices/${BOT_ID}/revoke$`),
  role: 'operator',
  async handle(ctx, req) {
    const displace = new BodyReader(req.body, ['displace']).boolean('displace') ?? true;
    const botId = req.params['botId'] ?? '';
    if (!(await ctx.store.findDeviceByBotId(botId))) throw notFound(`no device with botId ${botId}`);
    const by = operatorOf(ctx, req);
    let revoked: number;
    try {
      ({ revoked } = await revoke(ctx.store, botId, ctx.clock.wallNow(), by, { displace }));
    } catch (err) {
      if (err instanceof OperatorInputError) throw new AdminError('conflict', err.message);
      throw err;
    }
    if (displace) await displaceRevoked(ctx.displacer, botId, by);
    return ok({ revoked });
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
      await resetLimits(ctx.store, botId, operatorOf(ctx, req));
    } catch (err) {
      if (err instanceof OperatorInputError) throw notFound(err.message);
      throw err;
    }
    return ok({});
  },
};

export const ACTION_ROUTES: readonly AdminRoute[] = [revokeDevice, resetDeviceLimits];
