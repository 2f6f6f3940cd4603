/**
 * Who calls the admin listener (DESIGN §3.8), decided from the headers alone, before any body is read: the Host
 * must be adminOrigin's; a Bearer admin token or the console's session cookie, not both; a cookie request only
 * from the console's own origin; then the token (or the session's token) as the store has it now.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { AdminIdentity } from '../store/admin-types.js';
import { isAdminTokenShaped } from './admin-tokens.js';
import type { AdminCaller, AdminContext } from './context.js';
import { AdminError, badRequest } from './errors.js';

export const SESSION_COOKIE = 'botlink_admin';
/** Last use is written at most this often per token: not a write per request. */
const TOUCH_EVERY_MS = 60_000;

/** The request's Host must be the origin's host (port included unless the scheme's default). */
export function refuseForeignHost(req: IncomingMessage, origin: string): void {
  const host = req.headers.host;
  let given: string | undefined;
  try {
    given = host === undefined ? undefined : new URL(`${new URL(origin).protocol}//${host}`).host;
  } catch {
    given = undefined;
  }
  if (given !== new URL(origin).host) throw badRequest(`Host must be ${new URL(origin).host}`);
}

/** The session cookie's value, if the request carries one. */
export function sessionCookie(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === SESSION_COOKIE) return value.join('=');
  }
  return undefined;
}

/** The Bearer token, if the request carries Authorization. A scheme other than Bearer is 401. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  const m = /^Bearer ([^\s]+)$/i.exec(header);
  if (!m) throw new AdminError('unauthenticated', 'Authorization must be Bearer <admin token>');
  return m[1];
}

/**
 * A request a browser sends with the cookie is the console's only when it comes from its origin: any method but
 * GET and HEAD must carry Origin equal to adminOrigin (absent or `null`: refused); GET and HEAD may omit Origin,
 * and Sec-Fetch-Site, when sent, must be same-origin or none.
 */
export function refuseCrossOrigin(method: string | undefined, headers: IncomingHttpHeaders, origin: string): void {
  const given = headers.origin;
  const site = headers['sec-fetch-site'];
  const reading = method === 'GET' || method === 'HEAD';
  const originOk = given === origin || (reading && given === undefined);
  const siteOk = !reading || site === undefined || site === 'same-origin' || site === 'none';
  if (!originOk || !siteOk) throw new AdminError('forbidden', `a console request must come from ${origin}`);
}

/** The caller: a live token by its Bearer, or the live session of the cookie (checked for its origin first). */
export async function identify(ctx: AdminContext, req: IncomingMessage, origin: string): Promise<AdminCaller> {
  const bearer = bearerToken(req);
  const cookie = sessionCookie(req);
  if (bearer !== undefined && cookie !== undefined) throw badRequest('send an admin token or the session cookie, not both');
  const now = ctx.clock.wallNow();
  let identity: AdminIdentity | undefined;
  if (bearer !== undefined) {
    identity = await tokenIdentity(ctx, bearer, now);
  } else if (cookie !== undefined) {
    refuseCrossOrigin(req.method, req.headers, origin);
    identity = await ctx.store.admin.adminSessionByHmac(ctx.keys.sessionHmac(cookie), now);
  }
  if (identity === undefined)
    throw new AdminError('unauthenticated', 'an admin token (Authorization: Bearer) or a console session is needed');
  if (identity.lastUsedAt === null || now - identity.lastUsedAt >= TOUCH_EVERY_MS)
    await ctx.store.admin.touchAdminToken(identity.name, now);
  return { name: identity.name, role: identity.role, expiresAt: identity.expiresAt };
}

/** A live token's identity; a string not shaped like a token is never looked up. */
export function tokenIdentity(ctx: AdminContext, token: string, now: number): Promise<AdminIdentity | undefined> {
  if (!isAdminTokenShaped(token)) return Promise.resolve(undefined);
  return ctx.store.admin.adminTokenByHmac(ctx.keys.adminTokenHmac(token), now);
}
