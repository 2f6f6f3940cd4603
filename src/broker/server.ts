/**
 * The broker's HTTP(S) front (DESIGN §3.7): routes, bodies of at most 16 KiB read with a deadline,
 * JSON answers that always carry Date, and every failure as `{code, msg}` with its status.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { messageOf } from '../protocol/errors.js';
import type { Duplex } from 'node:stream';
import { METRICS_CONTENT_TYPE } from '../exposition.js';
import { BROKER_BODY_LIMIT as BODY_LIMIT, BROKER_ROUTES, REFUSAL_STATUS, type RefusalCode } from '../protocol/broker.js';
import type { ConnectionGuard } from './connections.js';
import { type StoreHealth, storeUnavailable } from './store-health.js';
import { StoreUnavailable } from './store/errors.js';
import { writeRawResponse } from '../raw-response.js';
import type { SignedRoute } from './auth/authenticate.js';
import type { BrokerContext, SignedRequest } from './context.js';
import type { RouteName } from './metrics.js';
import { Refusal } from './refusal.js';
import { requestSource } from './source.js';
import { check } from './routes/check.js';
import { enroll } from './routes/enroll.js';
import { rotate } from './routes/rotate.js';
import { token } from './routes/token.js';

/** The signed routes by path: each served only through its authentication stages (auth/authenticate.ts). */
const SIGNED: ReadonlyMap<string, SignedRoute> = new Map([
  [BROKER_ROUTES.enroll, enroll],
  [BROKER_ROUTES.token, token],
  [BROKER_ROUTES.rotate, rotate],
  [BROKER_ROUTES.check, check],
]);

export interface FrontDeps {
  ctx: BrokerContext;
  log: Logger;
  trustedProxies: ReadonlySet<string>;
  /** Told of every request, so that each connection's deadlines follow it (connections.ts). */
  guard: Pick<ConnectionGuard, 'request' | 'stats'>;
  /** Whether the store answers and agrees on the time: health says so, and requests wait while it does not. */
  health: Pick<StoreHealth, 'check' | 'refuseWhileSkewed'>;
}

/** What a request's handling got to: its route, and its signed request once read (for its refusal's audit). */
interface Handling {
  route: RouteName;
  request: SignedRequest | undefined;
}

export function createListener(deps: FrontDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    deps.guard.request(req, res);
    const handling: Handling = { route: 'other', request: undefined };
    handle(deps, req, res, handling).then(
      (outcome) => deps.ctx.metrics.request(handling.route, outcome),
      (err: unknown) => {
        const name = handling.route;
        if (err instanceof Abandoned) {
          // The client's doing, not the broker's: no error, no answer.
          deps.ctx.metrics.request(name, 'abandoned');
          deps.log.info({ route: name, source: sourceOf(req, deps.trustedProxies) }, 'request abandoned by the client');
          return void res.destroy();
        }
        const refusal = err instanceof StoreUnavailable ? storeUnavailable(err.message) : err instanceof Refusal ? err : undefined;
        deps.ctx.metrics.request(name, refusal ? refusal.code : 'error');
        if (refusal) auditRefusal(deps, req, handling.request, refusal.code);
        if (err instanceof StoreUnavailable) deps.log.warn({ err: messageOf(err), route: name }, 'the store did not answer a request');
        else if (!refusal) deps.log.error({ err: messageOf(err), route: name }, 'request failed');
        if (res.headersSent) return void res.destroy();
        if (refusal)
          return send(deps, res, refusal.status, { code: refusal.code, msg: refusal.message, ...refusal.extra }, retryAfter(refusal));
        send(deps, res, 500, { code: 'internal', msg: 'the broker failed; see its log' });
      },
    );
  };
}

async function handle(deps: FrontDeps, req: IncomingMessage, res: ServerResponse, handling: Handling): Promise<'ok'> {
  const url = req.url ?? '/';
  const [path = '/'] = url.split('?', 1);
  if (path === '/v1/health' || path === '/metrics') {
    handling.route = path === '/metrics' ? 'metrics' : 'health';
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new Refusal('bad-request', 'GET only');
    if (path === '/metrics') {
      const { ctx } = deps;
      const devices = await ctx.census.counts();
      const sources = { gate: ctx.gate.stats(), store: ctx.store.kind, connections: deps.guard.stats(), audit: ctx.audit.stats(), devices };
      sendRaw(deps, res, 200, METRICS_CONTENT_TYPE, ctx.metrics.text(sources));
      return 'ok';
    }
    const verdict = await deps.health.check();
    const store = deps.ctx.store.kind;
    if (verdict.ok) send(deps, res, 200, { ok: true, store });
    else send(deps, res, 503, { ok: false, store, error: verdict.error, msg: verdict.msg });
    return 'ok';
  }
  const signed = SIGNED.get(path);
  if (!signed) throw new Refusal('not-found', `no route ${path}`);
  handling.route = signed.name;
  deps.health.refuseWhileSkewed();
  if (req.method !== 'POST') throw new Refusal('bad-request', `${path} takes POST`);
  if (url !== path) throw new Refusal('bad-request', 'a query string is not allowed');
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/json') throw new Refusal('bad-request', 'Content-Type must be application/json');
  const raw = await readBody(req);
  const request: SignedRequest = {
    method: 'POST',
    path,
    authorization: req.headers.authorization,
    raw,
    source: sourceOf(req, deps.trustedProxies),
  };
  handling.request = request;
  const answer = await signed.handle(deps.ctx, request);
  send(deps, res, answer.status, answer.body, answer.retryAfterS === undefined ? {} : { 'Retry-After': String(answer.retryAfterS) });
  return 'ok';
}

/**
 * A refusal in the audit (DESIGN §3.7): against its key once its signature verified (the stages set
 * `signer`), else — before any signature was read, or one that failed — per source and code, never per keyId.
 */
function auditRefusal(deps: FrontDeps, req: IncomingMessage, request: SignedRequest | undefined, code: RefusalCode): void {
  const source = request?.source ?? sourceOf(req, deps.trustedProxies);
  if (request?.signer) deps.ctx.audit.refusedSigned({ ...request.signer, code, source });
  else deps.ctx.audit.refusedUnsigned(source, code);
}

/** The body, or a Refusal 'too-large' as soon as it is known to pass the limit (the connection closes after the answer). */
function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length']) > BODY_LIMIT) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT) {
        req.removeAllListeners('data');
        req.pause();
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    // The connection closed before the body ended (the client went, or its deadline passed and it was answered 408).
    req.on('error', () => reject(new Abandoned()));
    req.on('close', () => {
      if (!req.complete) reject(new Abandoned());
    });
  });
}

/** A request whose connection closed before it was read whole: nobody is left to answer. */
class Abandoned extends Error {
  constructor() {
    super('the connection closed before the request arrived whole');
    this.name = 'Abandoned';
  }
}

function tooLarge(): Refusal {
  return new Refusal('too-large', `the body is larger than ${BODY_LIMIT} bytes`);
}

/** The request's source (source.ts). */
export function sourceOf(req: IncomingMessage, trusted: ReadonlySet<string>): string {
  return requestSource(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], trusted);
}

function retryAfter(refusal: Refusal): Record<string, string> {
  return refusal.retryAfterS === undefined ? {} : { 'Retry-After': String(refusal.retryAfterS) };
}

function send(deps: FrontDeps, res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendRaw(deps, res, status, 'application/json; charset=utf-8', JSON.stringify(body), headers);
}

/** Date comes from the broker's clock: the device reads it as the broker's time (DESIGN §3.7). */
function sendRaw(
  deps: FrontDeps,
  res: ServerResponse,
  status: number,
  type: string,
  payload: string,
  headers: Record<string, string> = {},
): void {
  // A body the broker did not read keeps the connection in an unknown state: close it after the answer.
  const unread = !res.req.complete;
  res.writeHead(status, {
    ...headers,
    ...(unread ? { Connection: 'close' } : {}),
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(payload),
    'Cache-Control': 'no-store',
    Date: new Date(deps.ctx.clock.wallNow()).toUTCString(),
  });
  res.end(payload);
}

/**
 * The server's 'clientError' listener: a request node could not parse, or one too slow to arrive, is
 * answered like every other refusal — `{code, msg}` and the broker's Date — before the socket closes.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, nowMs: number): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const code: RefusalCode = 'bad-request';
  writeRawResponse(
    socket,
    REFUSAL_STATUS[code],
    { code, msg: `the request is not well-formed HTTP (${err.code ?? 'parse error'})` },
    nowMs,
  );
}

/**
 * A connection whose request head or body did not arrive in time (connections.ts): 408 `timeout`, through
 * the request's answer when its head came, else on the bare socket; then it closes.
 */
export function answerTimedOut(socket: Duplex, res: ServerResponse | undefined, nowMs: number): void {
  const code: RefusalCode = 'timeout';
  const body = { code, msg: 'the request did not arrive in time' };
  if (res === undefined || res.headersSent) {
    if (socket.writable) writeRawResponse(socket, REFUSAL_STATUS[code], body, nowMs);
    else socket.destroy();
    return;
  }
  const payload = JSON.stringify(body);
  res.writeHead(REFUSAL_STATUS[code], {
    Connection: 'close',
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(payload),
    'Cache-Control': 'no-store',
    Date: new Date(nowMs).toUTCString(),
  });
  res.end(payload, () => socket.destroy());
}
