/**
 * The console's sessions (DESIGN §3.8): `POST /admin/session` with an admin token (JSON `{token}` or Bearer) makes a
 * new random session id — never adopting a cookie it was sent — kept in the store only as its HMAC, for min(12 h, the
 * token's remaining life); `DELETE /admin/session` signs out. Both only from the console's origin.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken, refuseCrossOrigin, SESSION_COOKIE, sessionCookie, tokenIdentity } from './auth.js';
import type { AdminContext } from './context.js';
import { AdminError, badRequest } from './errors.js';
import { readJsonBody, sendJson } from './http.js';
import { BodyReader } from './input.js';

export const SESSION_MAX_MS = 12 * 3600 * 1000;
/** A sign-in body holds a token and nothing else: it is read before anyone is known, so it is kept small. */
const SIGN_IN_BODY_LIMIT = 4096;

function cookie(value: string, maxAgeS: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Path=/admin; Max-Age=${maxAgeS}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

export async function signIn(ctx: AdminContext, req: IncomingMessage, res: ServerResponse, origin: string, source: string): Promise<void> {
  refuseCrossOrigin(req.method, req.headers, origin);
  const bearer = bearerToken(req);
  if (bearer !== undefined && sessionCookie(req) !== undefined) throw badRequest('send an admin token or the session cookie, not both');
  const body = new BodyReader(await readJsonBody(req, SIGN_IN_BODY_LIMIT), ['token']);
  const given = body.string('token');
  if (given !== undefined && bearer !== undefined) throw badRequest('send the token once: in the body or as Bearer');
  const token = given ?? bearer;
  const now = ctx.clock.wallNow();
  const identity = token === undefined ? undefined : await tokenIdentity(ctx, token, now);
  if (identity === undefined) {
    ctx.audit.record({ action: 'admin-session', actor: 'anonymous', source, outcome: 'refused' }, 'console sign-in refused');
    throw new AdminError('unauthenticated', 'that admin token is unknown, revoked or expired');
  }
  const id = randomBytes(32).toString('base64url');
  const expiresAt = Math.min(now + SESSION_MAX_MS, identity.expiresAt);
  await ctx.store.admin.openAdminSession({ hmac: ctx.keys.sessionHmac(id), tokenName: identity.name, createdAt: now, expiresAt }, now);
  ctx.audit.record({ action: 'admin-session', actor: identity.name, source, outcome: 'opened' }, 'console session opened');
  const secure = new URL(origin).protocol === 'https:';
  sendJson(res, 200, { name: identity.name, role: identity.role, expiresAt }, now, {
    'Set-Cookie': cookie(id, Math.floor((expiresAt - now) / 1000), secure),
  });
}

/** Sign-out: the session ends in the store (every replica) and the cookie is cleared; without a session, only cleared. */
export async function signOut(ctx: AdminContext, req: IncomingMessage, res: ServerResponse, origin: string, source: string): Promise<void> {
  refuseCrossOrigin(req.method, req.headers, origin);
  const id = sessionCookie(req);
  const name = id === undefined ? undefined : await ctx.store.admin.endAdminSession(ctx.keys.sessionHmac(id));
  if (name !== undefined) ctx.audit.record({ action: 'admin-session', actor: name, source, outcome: 'ended' }, 'console session ended');
  sendJson(res, 200, {}, ctx.clock.wallNow(), { 'Set-Cookie': cookie('', 0, new URL(origin).protocol === 'https:') });
}
