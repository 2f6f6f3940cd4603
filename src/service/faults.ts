import type { ServerResponse } from 'node:http';
import type { WsMessage } from '../protocol/codes.js';
import { SERVICE_DEFAULTS } from './defaults.js';

/** Ways an HTTP answer can be broken on purpose, for tests of the agent's client. */
export const BROKEN_RESPONSES = [
  'http-500-html',
  'http-503-html',
  'reset-mid-body',
  'never-finish',
  'malformed-json',
  'wrong-types',
  'oversize-body',
] as const;
export type BrokenResponse = (typeof BROKEN_RESPONSES)[number];

export type WsRefusal = typeof WsMessage.UNAUTHORIZED | typeof WsMessage.BOT_INVALID;
/** Which of the three carriers of DESIGN §1.4 a refusal uses. */
export type WsRefusalForm = 'handshake' | 'frame' | 'close-reason';

interface BrokenPlan {
  kind: BrokenResponse;
  remaining: number;
  route: string | undefined;
}

/** The fault knobs' state; the routes and the WebSocket endpoint consult it. */
export class FaultState {
  getTokenFailures = 0;
  latencyMs = 0;
  clockShiftMs = 0;
  wsRefusal: { msg: WsRefusal; form: WsRefusalForm } | undefined;
  #broken: BrokenPlan[] = [];

  /** Queues n broken answers, on any route or only on `route` (a path such as '/auth/getToken'). */
  breakNext(kind: BrokenResponse, n: number, route?: string): void {
    if (!BROKEN_RESPONSES.includes(kind)) throw new TypeError(`unknown broken response kind '${String(kind)}'`);
    if (n > 0) this.#broken.push({ kind, remaining: n, route });
  }

  /** Consumes one queued broken answer that applies to this route, if any. */
  takeBroken(route: string): BrokenResponse | undefined {
    const plan = this.#broken.find((p) => p.route === undefined || p.route === route);
    if (!plan) return undefined;
    plan.remaining -= 1;
    if (plan.remaining <= 0) this.#broken.splice(this.#broken.indexOf(plan), 1);
    return plan.kind;
  }

  /** Consumes one forced 1006, if any are pending. */
  takeGetTokenFailure(): boolean {
    if (this.getTokenFailures <= 0) return false;
    this.getTokenFailures -= 1;
    return true;
  }

  reset(): void {
    this.getTokenFailures = 0;
    this.latencyMs = 0;
    this.clockShiftMs = 0;
    this.wsRefusal = undefined;
    this.#broken = [];
  }
}

function html(status: number, title: string): string {
  return `<!DOCTYPE html><html><head><title>${status} ${title}</title></head><body><h1>${title}</h1></body></html>`;
}

/** A body of the route's success shape whose numbers arrive as strings. */
function wrongTypes(route: string): unknown {
  switch (route) {
    case '/auth/getToken':
      return { accessToken: 'wrong-types', expireIn: '7200', refreshToken: 'wrong-types', refreshExpireIn: '604800', code: 0, msg: '' };
    case '/auth/refreshToken':
      return { accessToken: 'wrong-types', expireIn: '7200', code: 0, msg: '' };
    case '/device/register':
      return { state: 'SUCCESS', code: 0, data: 12345 };
    default:
      return { code: '0', msg: 0 };
  }
}

const PLAUSIBLE_BODY = JSON.stringify({
  accessToken: 'x'.repeat(43),
  expireIn: SERVICE_DEFAULTS.accessTtlS,
  refreshToken: 'y'.repeat(43),
  refreshExpireIn: SERVICE_DEFAULTS.refreshTtlS,
  code: 0,
  msg: '',
});

/** Writes the broken answer `kind` to res; dateHeader is the service clock's Date. */
export function writeBroken(res: ServerResponse, kind: BrokenResponse, route: string, dateHeader: string): void {
  const json = { 'Content-Type': 'application/json', Date: dateHeader };
  switch (kind) {
    case 'http-500-html':
    case 'http-503-html': {
      const [status, title] = kind === 'http-500-html' ? [500, 'Internal Server Error'] : [503, 'Service Unavailable'];
      const body = html(status, title);
      res.writeHead(status, { 'Content-Type': 'text/html', 'Content-Length': Buffer.byteLength(body), Date: dateHeader });
      res.end(body);
      return;
    }
    case 'reset-mid-body':
      res.writeHead(200, { ...json, 'Content-Length': PLAUSIBLE_BODY.length });
      res.write(PLAUSIBLE_BODY.slice(0, PLAUSIBLE_BODY.length >> 1), () => res.socket?.destroy());
      return;
    case 'never-finish':
      // Headers and a part of the body, then silence until the client gives up or the service closes.
      res.writeHead(200, { ...json, 'Content-Length': PLAUSIBLE_BODY.length });
      res.write(PLAUSIBLE_BODY.slice(0, 20));
      return;
    case 'malformed-json':
      res.writeHead(200, json);
      res.end('{"code":0,<html>garbage');
      return;
    case 'wrong-types':
      res.writeHead(200, json);
      res.end(JSON.stringify(wrongTypes(route)));
      return;
    case 'oversize-body':
      res.writeHead(200, json);
      res.end(JSON.stringify({ code: 0, msg: '', padding: 'x'.repeat(100 * 1024) }));
      return;
  }
}
