/** The admin listener's answers and bodies (DESIGN §3.8): JSON only, never cached, never sniffed, bodies ≤ 1 MiB. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AdminError, badRequest } from './errors.js';

export const ADMIN_BODY_LIMIT = 1024 * 1024;

/** Headers every answer carries; no Access-Control-Allow-* header is ever sent. */
const ALWAYS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } as const;

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  nowMs: number,
  headers: Record<string, string | string[]> = {},
): void {
  const payload = JSON.stringify(body);
  // A body the listener did not read (refused before it) leaves the connection in an unknown state: close it after the answer.
  const unread = !res.req.complete;
  res.writeHead(status, {
    ...headers,
    ...(unread ? { Connection: 'close' } : {}),
    ...ALWAYS,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(payload),
    Date: new Date(nowMs).toUTCString(),
  });
  res.end(payload);
}

/** Whether the request says it has a body (a length above 0, or chunks). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The JSON body, or undefined for none; Content-Type must say JSON (400), and more than `limit` bytes is 413 as soon as known. */
export async function readJsonBody(req: IncomingMessage, limit = ADMIN_BODY_LIMIT): Promise<unknown> {
  if (!hasBody(req)) return undefined;
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/json') throw badRequest('Content-Type must be application/json');
  const raw = await readRaw(req, limit);
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('the body is not JSON');
  }
}

function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new AdminError('too-large', `the body is larger than ${limit} bytes`);
    if (Number(req.headers['content-length']) > limit) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.pause();
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => reject(new ClientGone()));
    req.on('close', () => {
      if (!req.complete) reject(new ClientGone());
    });
  });
}

/** The connection closed before the request arrived whole: nobody is left to answer. */
export class ClientGone extends Error {
  constructor() {
    super('the connection closed before the request arrived whole');
    this.name = 'ClientGone';
  }
}
