import { randomBytes } from 'node:crypto';
import { WsMessage } from '../../protocol/codes.js';
import { WireError } from '../../protocol/errors.js';
import { parseRegisterDeviceRequest, type RegisterDeviceRequest } from '../../protocol/wire.js';
import type { Route } from '../context.js';
import { bearerAccess } from '../tokens.js';

function failure(code: '400' | '401' | '403', msg: string): Record<string, unknown> {
  return { state: 'FAILURE', code, msg };
}

/** POST /device/register, DESIGN §1.5: a vendor's access token registers a device, once per deviceId. */
export const register: Route = (ctx, { input, authorization }) => {
  const token = bearerAccess(ctx, authorization);
  if (token?.identity.kind !== 'vendor') return failure('401', WsMessage.UNAUTHORIZED);
  if (!input.ok) return failure('400', input.reason);
  let req: RegisterDeviceRequest;
  try {
    req = parseRegisterDeviceRequest(input.value);
  } catch (err) {
    if (err instanceof WireError) return failure('400', err.message);
    throw err;
  }
  if (req.vendorId !== token.identity.id) return failure('403', 'vendorId does not match the access token');
  const botId = ctx.store.registerDevice(req, `bot-${randomBytes(8).toString('hex')}`);
  return { state: 'SUCCESS', code: '0000', data: botId };
};
