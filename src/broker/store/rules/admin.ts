/** The admin API's rules that take more than one statement (AdminBook), written once. */
import { type Body, get, run } from '../sql.js';
import { DROP_ENDED_SESSIONS, END_SESSIONS_OF_TOKEN, OPEN_SESSION, REVOKE_ADMIN_TOKEN } from '../admin-statements.js';
import type { AdminSessionRow } from '../admin-types.js';

/** AdminBook.revokeAdminToken: the token and every session it opened, together. */
export function* revokeAdminTokenTx(name: string, now: number): Body<{ sessions: number } | undefined> {
  if (!(yield* get(REVOKE_ADMIN_TOKEN, name, now))) return undefined;
  return { sessions: yield* run(END_SESSIONS_OF_TOKEN, name) };
}

/** AdminBook.openAdminSession: sessions that have ended go as a new one comes (the admin_sessions_expiry index). */
export function* openSessionTx(s: AdminSessionRow, now: number): Body<void> {
  yield* run(DROP_ENDED_SESSIONS, now);
  yield* run(OPEN_SESSION, s.hmac, s.tokenName, s.createdAt, s.expiresAt);
}
