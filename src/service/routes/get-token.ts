import { Code, CODE_TABLE, type KnownCode } from '../../protocol/codes.js';
import { WireError } from '../../protocol/errors.js';
import { SIGNATURE_VERSION } from '../../protocol/sign.js';
import { identityOf, parseGetTokenRequest, type GetTokenRequest, type Identity } from '../../protocol/wire.js';
import type { Route, ServiceContext } from '../context.js';
import { signatureValid } from '../credentials.js';
import { issueTokenPair } from '../tokens.js';

const THIRTEEN_DIGITS = /^[0-9]{13}$/;

function failure(code: Exclude<KnownCode, 0>, detail?: string): Record<string, unknown> {
  const { msg } = CODE_TABLE[code];
  return { code, msg: detail === undefined ? msg : `${msg}: ${detail}` };
}

/** POST /auth/getToken, DESIGN §1.2: 1001, 1002, 1003, then the signature (1005) before the identity (1004). */
export const getToken: Route = (ctx, { input }) => {
  if (!input.ok) return failure(Code.ILLEGAL_PARAMETERS, input.reason);
  let req: GetTokenRequest;
  try {
    req = parseGetTokenRequest(input.value);
  } catch (err) {
    if (err instanceof WireError) return failure(Code.ILLEGAL_PARAMETERS, err.message);
    throw err;
  }
  if (req.accessVersion !== SIGNATURE_VERSION) return failure(Code.WRONG_VERSION);
  const now = ctx.now();
  if (!THIRTEEN_DIGITS.test(req.accessTimestamp)) return failure(Code.WRONG_TIMESTAMP);
  const timestamp = Number(req.accessTimestamp);
  if (Math.abs(timestamp - now) > ctx.timestampWindowMs) return failure(Code.WRONG_TIMESTAMP);
  // The signature comes before any lookup, so a caller without the secret learns nothing about identities.
  const { accessKeyId, accessNonce, accessTimestamp, accessVersion } = req;
  const secret = ctx.store.secretOf(accessKeyId);
  if (!signatureValid({ accessKeyId, accessNonce, accessTimestamp, accessVersion }, req.accessSign, secret)) {
    return failure(Code.INVALID_SIGNATURE);
  }
  const identity = identityOf(req);
  if (!ctx.store.owns(accessKeyId, identity)) return failure(Code.UNKNOWN_IDENTITY);
  // No savepoint: a nonce claimed for a request that then fails is only a nonce spent, and an orphan token nobody holds expires.
  return ctx.store.inBatch(() => issue(ctx, req, identity, timestamp, now));
};

function issue(ctx: ServiceContext, req: GetTokenRequest, identity: Identity, timestamp: number, now: number): Record<string, unknown> {
  // Kept until its timestamp leaves the window, after which the same request fails with 1003 anyway.
  if (!ctx.store.claimNonce(req.accessKeyId, req.accessNonce, Math.max(timestamp, now) + ctx.timestampWindowMs)) {
    return { code: Code.ILLEGAL_PARAMETERS, msg: 'nonce already used' };
  }
  if (ctx.faults.takeGetTokenFailure()) return failure(Code.SYSTEM_ERROR);
  const { accessToken, refreshToken } = issueTokenPair(ctx, req.accessKeyId, identity);
  return {
    accessToken,
    expireIn: ctx.accessTtlS,
    refreshToken,
    refreshExpireIn: ctx.refreshTtlS,
    code: Code.OK,
    msg: '',
  };
}
