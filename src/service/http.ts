import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code } from '../protocol/codes.js';
import type { JsonInput, Route, ServiceContext } from './context.js';
import { writeBroken } from './faults.js';
import { getToken } from './routes/get-token.js';
import { refreshToken } from './routes/refresh-token.js';
import { register } from './routes/register.js';
import type { StatsRecorder } from './stats.js';
import { VOICE_CHAT_PATH } from '../protocol/conversation.js';

const BODY_LIMIT = 16 * 1024;

const ROUTES: ReadonlyMap<string, Route> = new Map([
  ['/auth/getToken', getToken],
  ['/auth/refreshToken', refreshToken],
  ['/device/register', register],
]);

export interface RequestDeps {
  ctx: ServiceContext;
  stats: StatsRecorder;
  /** Waits out the latency fault; never settles once the service is closing. */
  delay(ms: number): Promise<void>;
  /** A bug, not a bad input: the caller still got a 200 with code 1006. */
  onInternalError(err: unknown): void;
  /** A POST to a route, its body read and counted, before it is answered. */
  onReceived(path: string): void;
}

/** The node:http request listener: every answer is JSON with a Date from the service clock, never a 5xx. */
export function createRequestListener(deps: RequestDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(deps, req, res).catch((err: unknown) => {
      deps.onInternalError(err);
      if (res.headersSent) res.destroy();
      else sendJson(res, 200, { code: Code.SYSTEM_ERROR, msg: 'system error' }, deps.ctx.now());
    });
  };
}

async function handle(deps: RequestDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { ctx, stats } = deps;
  const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
  const route = ROUTES.get(path);
  if (req.method === 'HEAD') stats.headReceived();
  if (!route) {
    await deps.delay(ctx.faults.latencyMs);
    if (path === VOICE_CHAT_PATH) return sendJson(res, 426, { code: 426, msg: 'WebSocket upgrade required' }, ctx.now());
    return sendJson(res, 404, { code: 404, msg: 'not found' }, ctx.now());
  }
  if (req.method !== 'POST') {
    await deps.delay(ctx.faults.latencyMs);
    return sendJson(res, 405, { code: 405, msg: 'method not allowed' }, ctx.now(), { Allow: 'POST' });
  }
  const body = await readBody(req, BODY_LIMIT);
  if (body === 'aborted') return;
  if (body === 'too-large') {
    await deps.delay(ctx.faults.latencyMs);
    const msg = `request body larger than ${BODY_LIMIT} bytes`;
    return sendJson(res, 413, { code: Code.ILLEGAL_PARAMETERS, msg }, ctx.now(), { Connection: 'close' });
  }
  const input = parseJson(body);
  stats.received(path, input.ok ? input.value : undefined);
  deps.onReceived(path);
  const broken = ctx.faults.takeBroken(path);
  if (broken) {
    await deps.delay(ctx.faults.latencyMs);
    return writeBroken(res, broken, path, new Date(ctx.now()).toUTCString());
  }
  const answer = route(ctx, { input, authorization: req.headers.authorization });
  // Never hand out a token the database has not committed.
  await ctx.store.committed();
  stats.answered(path, answer);
  await deps.delay(ctx.faults.latencyMs);
  sendJson(res, 200, answer, ctx.now());
}

/** The body; 'too-large' as soon as it is known to exceed limit; 'aborted' when the client went away. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too-large' | 'aborted'> {
  return new Promise((resolve) => {
    if (Number(req.headers['content-length']) > limit) return resolve('too-large');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      if (size > limit) return;
      size += chunk.length;
      if (size > limit) resolve('too-large');
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve('aborted'));
    req.on('close', () => resolve('aborted'));
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function parseJson(body: Buffer): JsonInput {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return { ok: false, reason: 'body is not valid UTF-8' };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, reason: 'body is not valid JSON' };
  }
}

/** Date is set from the service clock, not node's: the agent reads it as the server's time. */
function sendJson(res: ServerResponse, status: number, body: unknown, nowMs: number, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(payload),
    'Cache-Control': 'no-store',
    Date: new Date(nowMs).toUTCString(),
  });
  res.end(payload);
}
