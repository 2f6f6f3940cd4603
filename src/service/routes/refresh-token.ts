import { Code, CODE_TABLE } from '../../protocol/codes.js';
import { WireError } from '../../protocol/errors.js';
import { identityOf, parseRefreshTokenRequest, type RefreshTokenRequest } from '../../protocol/wire.js';
import type { Route } from '../context.js';
import { issueRefreshedToken, liveToken, sameIdentity } from '../tokens.js';

/**
 * Our answer to an unknown, expired or mismatched refresh token. The specification leaves the code open;
 * 1007 is outside its getToken table so it cannot be mistaken for one of those.
 */
export const INVALID_REFRESH_TOKEN = { code: 1007, msg: 'invalid refresh token' } as const;

/** POST /auth/refreshToken, DESIGN §1.3: bound to the accessKeyId and identity of the issuing getToken. */
export const refreshToken: Route = (ctx, { input }) => {
  const illegal = CODE_TABLE[Code.ILLEGAL_PARAMETERS].msg;
  if (!input.ok) return { code: Code.ILLEGAL_PARAMETERS, msg: `${illegal}: ${input.reason}` };
  let req: RefreshTokenRequest;
  try {
    req = parseRefreshTokenRequest(input.value);
  } catch (err) {
    if (err instanceof WireError) return { code: Code.ILLEGAL_PARAMETERS, msg: `${illegal}: ${err.message}` };
    throw err;
  }
  const record = liveToken(ctx, req.refreshToken, 'refresh');
  const identity = identityOf(req);
  if (!record || record.accessKeyId !== req.accessKeyId || !sameIdentity(record.identity, identity)) {
    return { ...INVALID_REFRESH_TOKEN };
  }
  const accessToken = ctx.store.transaction(() => issueRefreshedToken(ctx, req.refreshToken, record));
  return { accessToken, expireIn: ctx.accessTtlS, code: Code.OK, msg: '' };
};
