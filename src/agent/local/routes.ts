import type { IncomingMessage, ServerResponse } from 'node:http';
import { OBSERVE_PATH, VOICE_CHAT_PATH } from '../../protocol/conversation.js';
import { withFix } from '../../protocol/errors.js';
import type { HeldToken } from '../token/manager-types.js';

/** What /v1/token needs of the token manager: an answer now, never a wait on the cloud. */
export interface HeldTokens {
  peek(minLeftMs: number): HeldToken | undefined;
  snapshot(): { lastError: { message: string; fix?: string | undefined } | undefined };
}

export interface RouteDeps {
  /** The status object of DESIGN §3.4, as the daemon writes it to status.json. */
  status(): object;
  /** The token manager, once the device's identity is known. */
  tokens(): HeldTokens | undefined;
  /** GET /v1/metrics: the text and its Content-Type. */
  metrics?(): { text: string; type: string };
}

interface Answer {
  status: number;
  /** JSON, or a text already in its own format. */
  body: object | { text: string; type: string };
}

const fault = (status: number, msg: string): Answer => ({ status, body: { code: status, msg } });

/** The path of a request line, or undefined for one that is not an absolute path (`*`, a full URL, garbage). */
export function pathOf(url: string | undefined): string | undefined {
  if (url === undefined || !url.startsWith('/')) return undefined;
  try {
    return new URL(url, 'http://botlink.local').pathname;
  } catch {
    return undefined;
  }
}

const ROUTES: Readonly<Record<string, (deps: RouteDeps) => Answer | Promise<Answer>>> = {
  '/v1/status': (deps) => ({ status: 200, body: deps.status() }),
  '/v1/token': (deps) => tokenAnswer(deps.tokens()),
  '/v1/metrics': (deps) => (deps.metrics ? { status: 200, body: deps.metrics() } : fault(404, 'no metrics here')),
};

/** The path a request is counted under: its route, or "other" (any path a client makes up is one label value). */
export function routeOf(url: string | undefined): string {
  const path = pathOf(url) ?? '';
  return path in ROUTES || path === VOICE_CHAT_PATH || path === OBSERVE_PATH ? path : 'other';
}

/** Answers one plain (non-upgrade) request; only GET without a body is served. */
export async function answer(req: IncomingMessage, res: ServerResponse, deps: RouteDeps): Promise<void> {
  const route = ROUTES[pathOf(req.url) ?? ''];
  let reply: Answer;
  if (!route)
    reply = fault(
      404,
      `no such path on the botlink local API: GET /v1/status, GET /v1/token, GET /v1/metrics, ${VOICE_CHAT_PATH} or ${OBSERVE_PATH}`,
    );
  else if (req.method !== 'GET') {
    res.setHeader('Allow', 'GET');
    reply = fault(405, `${req.method} is not allowed here: use GET`);
  } else if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) {
    reply = fault(413, 'the local API takes no request body');
  } else reply = await route(deps);
  // A body left unread would be drained: close instead, so nobody streams into a connection we ignore.
  if (reply.status === 413) res.shouldKeepAlive = false;
  const plain = 'text' in reply.body && 'type' in reply.body ? (reply.body as { text: string; type: string }) : undefined;
  const text = plain ? plain.text : JSON.stringify(reply.body);
  res.writeHead(reply.status, {
    'Content-Type': plain ? plain.type : 'application/json',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
  });
  res.end(text);
}

const TOKEN_MIN_LEFT_MS = 30_000;

/** `{accessToken, expiresAt}` when a usable token is held now; else 503 saying why. Never waits. */
function tokenAnswer(tokens: HeldTokens | undefined): Answer {
  if (!tokens) return fault(503, 'no token yet: this device has no botId yet (botlink is provisioning it; see GET /v1/status)');
  // An app needs time to use what it gets: a token about to expire is not handed out.
  const held = tokens.peek(TOKEN_MIN_LEFT_MS);
  if (held) return { status: 200, body: { accessToken: held.token, expiresAt: held.expiresAt } };
  const why = tokens.snapshot().lastError;
  return fault(503, `no token now: ${why ? withFix(why.message, why.fix) : 'botlink is getting one right now; ask again in a moment'}`);
}
