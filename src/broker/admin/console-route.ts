/**
 * The operator's console (DESIGN §3.8): `GET /admin/` is its page and `GET /admin/<name>` its script and stylesheet,
 * built from src/console into the product (scripts/lib/console-build.mjs, the `botlink:console` module). They hold no
 * secret, so no caller is needed; the Host rule still applies (router.ts checks it first). The page may run only
 * what came from this origin: no inline script or style, no frame, no form or base elsewhere.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { assets, page } from 'botlink:console';
import { AdminError } from './errors.js';

export const CONSOLE_PATH = '/admin/';
export const CONSOLE_CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

interface Served {
  type: string;
  plain: Buffer;
  gzip: Buffer;
}

let files: Map<string, Served> | undefined;

/** The files by path, made into buffers at the first request (not as the CLI loads, for commands that never serve them). */
function served(): Map<string, Served> {
  if (files) return files;
  const entry = (type: string, f: { text: string; gzip: string }): Served => ({
    type,
    plain: Buffer.from(f.text, 'utf8'),
    gzip: Buffer.from(f.gzip, 'base64'),
  });
  files = new Map([[CONSOLE_PATH, entry('text/html; charset=utf-8', page)]]);
  for (const [name, asset] of Object.entries(assets)) files.set(`${CONSOLE_PATH}${name}`, entry(asset.type, asset));
  return files;
}

/** Whether the client takes gzip: `gzip` listed without `q=0`. */
function takesGzip(header: string | undefined): boolean {
  return (header ?? '').split(',').some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    return coding?.trim() === 'gzip' && !params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
  });
}

/**
 * Answers the console's page or asset at `pathname` and says true; false for any other path. Only GET and HEAD:
 * any other method is 405.
 */
export function serveConsole(req: IncomingMessage, res: ServerResponse, pathname: string, nowMs: number): boolean {
  if (pathname === '/admin') {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new AdminError('method-not-allowed', 'the console takes GET or HEAD');
    res.writeHead(308, { Location: CONSOLE_PATH, 'Content-Length': 0, 'Cache-Control': 'no-store', Date: new Date(nowMs).toUTCString() });
    res.end();
    return true;
  }
  const file = served().get(pathname);
  if (!file) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') throw new AdminError('method-not-allowed', 'the console takes GET or HEAD');
  const gzip = takesGzip(req.headers['accept-encoding']);
  const body = gzip ? file.gzip : file.plain;
  res.writeHead(200, {
    ...(!req.complete && { Connection: 'close' }),
    'Content-Type': file.type,
    'Content-Length': body.length,
    ...(gzip && { 'Content-Encoding': 'gzip' }),
    Vary: 'Accept-Encoding',
    'Content-Security-Policy': CONSOLE_CSP,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'same-origin',
    // The page and its assets change with the product: never kept (the names' hashes tell versions apart).
    'Cache-Control': 'no-store',
    Date: new Date(nowMs).toUTCString(),
  });
  res.end(body);
  return true;
}
