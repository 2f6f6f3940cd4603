import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { WebSocket } from 'ws';
import { signV2 } from '../../src/protocol/sign.js';

/** What an HTTP call to the service came back with. */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed body; undefined when it is not JSON. */
  json: Record<string, unknown> | undefined;
}

/** POSTs a body (an object is sent as JSON, a string or Buffer as is) and reads the whole answer. */
export async function post(baseUrl: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const raw = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const res = await request(new URL(path, baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: raw,
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: jsonOrUndefined(text) };
}

/** The body parsed as JSON; undefined when it is not JSON. */
export function jsonOrUndefined(text: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export interface SignOptions {
  accessKeyId?: string;
  secretKey?: string;
  botId?: string;
  vendorId?: string;
  timestamp?: string;
  nonce?: string;
  version?: string;
}

/** A getToken body signed with V2; by default for bot-1 of the default seed, stamped now. */
export function signedGetTokenBody(o: SignOptions = {}): Record<string, string> {
  const params = {
    accessKeyId: o.accessKeyId ?? 'AK',
    accessNonce: o.nonce ?? randomBytes(16).toString('hex'),
    accessTimestamp: o.timestamp ?? String(Date.now()),
    accessVersion: o.version ?? 'V2',
  };
  const identity = o.botId === undefined && o.vendorId === undefined ? { botId: 'bot-1' } : {};
  return {
    ...params,
    accessSign: signV2(params, o.secretKey ?? 'SK'),
    ...identity,
    ...(o.botId !== undefined && { botId: o.botId }),
    ...(o.vendorId !== undefined && { vendorId: o.vendorId }),
  };
}

export interface Tokens {
  accessToken: string;
  refreshToken: string;
  expireIn: number;
  refreshExpireIn: number;
}

/** Runs the signed flow and fails loudly unless it succeeds. */
export async function getTokens(baseUrl: string, o: SignOptions = {}): Promise<Tokens> {
  const reply = await post(baseUrl, '/auth/getToken', signedGetTokenBody(o));
  if (reply.json?.['code'] !== 0) throw new Error(`getToken failed: ${reply.text}`);
  return reply.json as unknown as Tokens;
}

/** A socket that opened; messages and the close are recorded from the first byte, so none is missed. */
export interface OpenSocket {
  ok: true;
  ws: WebSocket;
  /** Every message received so far, as text. */
  messages: string[];
  closed: Promise<{ code: number; reason: string }>;
}
/** How a WebSocket attempt ended up: opened, or refused at the handshake with a status and body. */
export type WsAttempt = OpenSocket | { ok: false; status: number; body: string };

export function connectWs(
  wsUrl: string,
  botId: string | undefined,
  token: string | undefined,
  options: { autoPong?: boolean } = {},
): Promise<WsAttempt> {
  const url = botId === undefined ? wsUrl : `${wsUrl}?botId=${encodeURIComponent(botId)}`;
  const ws = new WebSocket(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, ...options });
  const messages: string[] = [];
  ws.on('message', (data) => messages.push(String(data)));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })),
  );
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ok: true, ws, messages, closed }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolve({ ok: false, status: res.statusCode ?? 0, body });
        ws.terminate();
      });
    });
    ws.once('error', reject);
  });
}
