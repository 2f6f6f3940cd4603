/** What the admin API's routes share (DESIGN §3.8): the store, the keys, the audit, and how a caller and a request look. */
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { AuditTrail } from '../audit/trail.js';
import type { DisplacerDeps } from '../displace.js';
import type { BrokerKeys } from '../keys.js';
import type { Operator } from '../operator.js';
import type { VendorTokenSource } from '../operator-codes.js';
import type { AdminRole } from '../store/admin-types.js';
import type { BrokerStore } from '../store/types.js';
import type { Cursors } from './cursor.js';
import type { PendingBook } from './pending-book.js';

export interface AdminContext {
  store: BrokerStore;
  keys: BrokerKeys;
  clock: Clock;
  audit: AuditTrail;
  /** The cloud's word on a vendor before a code is made for it. */
  vendors: VendorTokenSource;
  /** What a revoke's displacement needs (displace.ts). */
  displacer: DisplacerDeps;
  cursors: Cursors;
  log: Logger;
  /** Code-less enrollment's queue, once wired (pending-book.ts); absent: its routes answer 404. */
  pending?: PendingBook | undefined;
}

/** Who asks: a live token's name and role, re-read from the store on every request. */
export interface AdminCaller {
  name: string;
  role: AdminRole;
  expiresAt: number;
}

export interface AdminRequest {
  caller: AdminCaller;
  /** The path's named parts (a botId, a keyId…), decoded. */
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  /** The JSON body; undefined when the request had none. */
  body: unknown;
  source: string;
}

export interface AdminAnswer {
  status: number;
  body: unknown;
}

export interface AdminRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** The path after /admin/v1, its named groups the params. */
  path: RegExp;
  /** The least role that may call it: a viewer calling an operator's route is 403. */
  role: AdminRole;
  handle(ctx: AdminContext, req: AdminRequest): Promise<AdminAnswer>;
}

export const ok = (body: unknown, status = 200): AdminAnswer => ({ status, body });

/** The caller as the operator functions (operator.ts) know one: its token's name is the audit's actor. */
export function operatorOf(ctx: AdminContext, req: AdminRequest): Operator {
  return { actor: req.caller.name, audit: ctx.audit };
}
