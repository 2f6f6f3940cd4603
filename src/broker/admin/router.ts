/**
 * The admin listener's handling of one request (DESIGN §3.8), in the order that keeps a stranger cheap: Host,
 * method, route, caller and role from the headers — then, only for a caller allowed the route, its body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CloudError } from '../../cloud/errors.js';
import { messageOf } from '../../protocol/errors.js';
import type { ConnectionGuard } from '../connections.js';
import type { UnsignedRefusals } from '../auth/unsigned.js';
import { Refusal } from '../refusal.js';
import { sourceOf } from '../server.js';
import { StoreUnavailable } from '../store/errors.js';
import { identify, refuseForeignHost } from './auth.js';
import { serveConsole } from './console-route.js';
import type { AdminContext, AdminRoute } from './context.js';
import { AdminError, type AdminErrorCode, badRequest, notFound } from './errors.js';
import { ClientGone, hasBody, readJsonBody, sendJson } from './http.js';
import { ACTION_ROUTES } from './routes-actions.js';
import { CODE_ROUTES } from './routes-codes.js';
import { FLEET_ROUTES } from './routes-fleet.js';
import { PENDING_ROUTES } from './routes-pending.js';
import { signIn, signOut } from './session.js';

export const ADMIN_API = '/admin/v1';
/** Failed authentications (401) per source and minute before the source is told 429 for the rest of the minute. */
export const ADMIN_FAILURES_PER_MINUTE = 30;
const ROUTES: readonly AdminRoute[] = [...FLEET_ROUTES, ...ACTION_ROUTES, ...CODE_ROUTES, ...PENDING_ROUTES];

export interface AdminFrontDeps {
  ctx: AdminContext;
  /** adminOrigin, known once the listener is bound (port 0). */
  origin(): string;
  trustedProxies: ReadonlySet<string>;
  guard: Pick<ConnectionGuard, 'request'>;
  /** Failed authentications per source, in this replica's memory (auth/unsigned.ts): a guesser costs no store reads past the limit. */
  failures: UnsignedRefusals;
}

export function createAdminHandler(deps: AdminFrontDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    deps.guard.request(req, res);
    handle(deps, req, res).catch((err: unknown) => {
      const { ctx } = deps;
      if (err instanceof ClientGone) {
        ctx.log.info({ listener: 'admin' }, 'request abandoned by the client');
        return void res.destroy();
      }
      const refused = asAdminError(err);
      if (!refused) ctx.log.error({ err: messageOf(err), listener: 'admin' }, 'admin request failed');
      if (refused?.code === 'unauthenticated') deps.failures.count(sourceOf(req, deps.trustedProxies), ctx.clock.wallNow());
      if (res.headersSent) return void res.destroy();
      const retry = refused?.retryAfterS === undefined ? {} : { 'Retry-After': String(refused.retryAfterS) };
      if (refused) sendJson(res, refused.status, { code: refused.code, msg: refused.message }, ctx.clock.wallNow(), retry);
      else sendJson(res, 500, { code: 'internal', msg: 'the broker failed; see its log' }, ctx.clock.wallNow());
    });
  };
}

/** What the caller is told: the API's own refusals, the store away, the cloud's answer, the device API's refusals by status. */
function asAdminError(err: unknown): AdminError | undefined {
  if (err instanceof AdminError) return err;
  if (err instanceof StoreUnavailable) return new AdminError('unavailable', 'the store does not answer; try again');
  if (err instanceof CloudError)
    return err.serviceCode === undefined
      ? new AdminError('unavailable', 'the cloud did not answer; try again')
      : new AdminError('cloud-refused', err.message);
  if (err instanceof Refusal) {
    const byStatus: Record<number, AdminErrorCode> = {
      400: 'bad-request',
      404: 'not-found',
      409: 'conflict',
      429: 'rate-limited',
      502: 'cloud-refused',
      503: 'unavailable',
    };
    return new AdminError(byStatus[err.status] ?? 'conflict', err.message, err.retryAfterS);
  }
  return undefined;
}

async function handle(deps: AdminFrontDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { ctx } = deps;
  const origin = deps.origin();
  refuseForeignHost(req, origin);
  if (req.method === 'OPTIONS') throw new AdminError('method-not-allowed', 'OPTIONS is not served: the admin API allows no other origin');
  const url = new URL(req.url ?? '/', 'http://admin.invalid');
  // The console's page and assets: static, no caller needed (they hold no secret), before any store read.
  if (serveConsole(req, res, url.pathname, ctx.clock.wallNow())) return;
  const source = sourceOf(req, deps.trustedProxies);
  deps.failures.refuseIfOver(source, ctx.clock.wallNow());
  if (url.pathname === '/admin/session') {
    if (url.search !== '') throw badRequest('a query string is not allowed');
    if (req.method === 'POST') return signIn(ctx, req, res, origin, source);
    if (req.method === 'DELETE') return signOut(ctx, req, res, origin, source);
    throw new AdminError('method-not-allowed', '/admin/session takes POST (sign in) or DELETE (sign out)');
  }
  if (!url.pathname.startsWith(`${ADMIN_API}/`)) throw notFound(`no route ${url.pathname}`);
  // HEAD is GET without its body (node leaves the body out).
  const found = match(url.pathname.slice(ADMIN_API.length), req.method === 'HEAD' ? 'GET' : (req.method ?? ''));
  const caller = await identify(ctx, req, origin);
  if (found.route.role === 'operator' && caller.role !== 'operator')
    throw new AdminError('forbidden', `${caller.name} is a viewer: this is an operator's action`);
  if (found.route.method !== 'POST' && hasBody(req)) throw badRequest(`${found.route.method} takes no body`);
  const body = found.route.method === 'POST' ? await readJsonBody(req) : undefined;
  const answer = await found.route.handle(ctx, { caller, params: found.params, query: url.searchParams, body, source });
  sendJson(res, answer.status, answer.body, ctx.clock.wallNow());
}

/** The route of the path and method: none is 404, another method's is 405. */
function match(path: string, method: string): { route: AdminRoute; params: Record<string, string> } {
  let other = false;
  for (const route of ROUTES) {
    const m = route.path.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      other = true;
      continue;
    }
    try {
      return { route, params: Object.fromEntries(Object.entries(m.groups ?? {}).map(([k, v]) => [k, decodeURIComponent(v)])) };
    } catch {
      throw badRequest('a malformed escape in the path');
    }
  }
  if (other) throw new AdminError('method-not-allowed', `${method} is not allowed on ${ADMIN_API}${path}`);
  throw notFound(`no route ${ADMIN_API}${path}`);
}
