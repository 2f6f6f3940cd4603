/**
 * Admin tokens (DESIGN §3.8): `blk_` and 192 random bits, shown once; the store keeps their HMAC under a key
 * derived from tokenKeyFile for this alone. Names are unique and never reused; a revoke ends every session
 * the token opened. `broker admin-token create | list | revoke` on the store's host.
 */
import { randomBytes } from 'node:crypto';
import type { BrokerKeys } from '../keys.js';
import { type Operator, OperatorInputError } from '../operator.js';
import type { AdminRole, AdminTokenListing } from '../store/admin-types.js';
import type { BrokerStore } from '../store/types.js';

export const ADMIN_TOKEN_PREFIX = 'blk_';
export const DEFAULT_ADMIN_TOKEN_TTL_S = 90 * 24 * 3600;
export const ADMIN_ROLES: readonly AdminRole[] = ['viewer', 'operator'];

/** A name is what the audit calls its actor: never `device` nor `cli:…`, which are the device's and the command line's. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/** The shape of a token the broker made: anything else is refused before its HMAC is taken. */
const TOKEN = /^blk_[A-Za-z0-9_-]{32}$/;

export function isAdminTokenShaped(text: string): boolean {
  return TOKEN.test(text);
}

export function isAdminRole(text: string): text is AdminRole {
  return (ADMIN_ROLES as readonly string[]).includes(text);
}

export interface CreatedAdminToken {
  name: string;
  role: AdminRole;
  token: string;
  expiresAt: number;
}

/** A new token; audited by name and role, never the token. A name ever used is 65. */
export async function createAdminToken(
  store: BrokerStore,
  keys: BrokerKeys,
  req: { name: string; role: AdminRole; ttlS: number },
  now: number,
  by: Operator,
): Promise<CreatedAdminToken> {
  if (!NAME.test(req.name) || req.name === 'device')
    throw new OperatorInputError('--name must be 1 to 64 of A-Z a-z 0-9 . _ @ -, beginning with a letter or digit, and not "device"');
  const token = `${ADMIN_TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`;
  const expiresAt = now + req.ttlS * 1000;
  const added = await store.admin.addAdminToken({
    name: req.name,
    hmac: keys.adminTokenHmac(token),
    role: req.role,
    createdAt: now,
    expiresAt,
  });
  if (!added) throw new OperatorInputError(`an admin token named ${req.name} exists or existed: names are never reused`);
  by.audit.record({ action: 'admin-token', actor: by.actor, outcome: `created ${req.name} ${req.role}` }, 'admin token created', {
    name: req.name,
    role: req.role,
    expiresAt,
  });
  return { name: req.name, role: req.role, token, expiresAt };
}

export function listAdminTokens(store: BrokerStore): Promise<AdminTokenListing[]> {
  return store.admin.listAdminTokens();
}

/** Ends the live token of this name and its sessions, on every replica from the next request; none is 65. */
export async function revokeAdminToken(store: BrokerStore, name: string, now: number, by: Operator): Promise<{ sessions: number }> {
  const revoked = await store.admin.revokeAdminToken(name, now);
  if (revoked === undefined) throw new OperatorInputError(`no live admin token is named ${name}: broker admin-token list shows them`);
  by.audit.record(
    { action: 'admin-token', actor: by.actor, outcome: `revoked ${name} sessions=${revoked.sessions}` },
    'admin token revoked',
    { name, sessions: revoked.sessions },
  );
  return revoked;
}
