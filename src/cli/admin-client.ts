/**
 * The admin API (DESIGN §3.8) as the operator's commands reach it from any machine (§3.1 `--admin URL`): https
 * (or http on loopback), `Authorization: Bearer` from the environment only, JSON, no cookie, no redirect
 * followed, bounded answers and time; each refusal told as the exit code §3.1 gives its status.
 */
import { readFileSync } from 'node:fs';
import { type IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isLoopbackHost } from '../loopback.js';
import { messageOf } from '../protocol/errors.js';
import { Failure, type FailureKind, UsageError } from './frame/exit.js';
import type { Env } from './frame/io.js';

export const ADMIN_URL_ENV = 'BOTLINK_BROKER_ADMIN_URL';
export const ADMIN_TOKEN_ENV = 'BOTLINK_BROKER_ADMIN_TOKEN';
export const ADMIN_CA_ENV = 'BOTLINK_BROKER_ADMIN_CA_FILE';
/** One request's whole time: an accept waits on the cloud's registration. */
const TIMEOUT_MS = 30_000;
/** The largest answer read: a page of 500 items is far below it. */
const ANSWER_MAX = 8 * 1024 * 1024;
/** Items asked per page (the API's most). */
export const PAGE_LIMIT = 500;
/** The most of a server's message printed: it is untrusted text. */
const MSG_MAX = 500;

export type Query = Record<string, string | number | undefined>;

/**
 * The admin API the command acts through, or undefined: it acts on the store. `--admin`, else (without --config)
 * $BOTLINK_BROKER_ADMIN_URL; its URL is judged before the token is read, so a token never goes where it should not.
 */
export function adminClientFor(flags: { admin?: string | undefined; config?: string | undefined }, env: Env): AdminClient | undefined {
  if (flags.admin !== undefined && flags.config !== undefined)
    throw new UsageError('--admin and --config exclude each other: --admin acts through the admin API, --config on the store');
  const given = flags.admin ?? (flags.config === undefined ? nonEmpty(env[ADMIN_URL_ENV]) : undefined);
  if (given === undefined) return undefined;
  const base = adminBase(given, flags.admin === undefined ? ADMIN_URL_ENV : '--admin');
  const token = nonEmpty(env[ADMIN_TOKEN_ENV]);
  if (token === undefined)
    throw new UsageError(`${ADMIN_TOKEN_ENV} is not set: the admin token (blk_…) goes in this variable, never on the command line`);
  if (!/^[\x21-\x7e]+$/.test(token)) throw new UsageError(`${ADMIN_TOKEN_ENV} holds spaces or control characters: not an admin token`);
  const caFile = nonEmpty(env[ADMIN_CA_ENV]);
  let ca: Buffer | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile);
    } catch (err) {
      throw new UsageError(`${ADMIN_CA_ENV}: cannot read ${caFile} (${messageOf(err)})`);
    }
  }
  return new AdminClient(base, token, ca);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** The admin URL, its path ending in `/`: https, or http on loopback (127.0.0.0/8, ::1, localhost); else 64. */
function adminBase(text: string, source: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`${source}: not a URL: ${text}`);
  }
  if (url.username !== '' || url.password !== '')
    throw new UsageError(`${source}: no user or password in the URL: the token goes in ${ADMIN_TOKEN_ENV}`);
  if (url.search !== '' || url.hash !== '') throw new UsageError(`${source}: the admin URL takes no query or fragment`);
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname))
    throw new UsageError(`${source} ${url.origin}: plain http only to loopback (127.0.0.0/8, ::1, localhost); elsewhere use https`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`${source}: the admin URL is https:// (or http:// on loopback)`);
  if (!url.pathname.endsWith('/')) url.pathname = `${url.pathname}/`;
  return url;
}

/** A path segment as the API's routes decode it. */
export const segment = (text: string): string => encodeURIComponent(text);

export class AdminClient {
  readonly #base: URL;
  readonly #token: string;
  readonly #ca: Buffer | undefined;

  constructor(base: URL, token: string, ca: Buffer | undefined) {
    this.#base = base;
    this.#token = token;
    this.#ca = ca;
  }

  get<T>(path: string, query: Query = {}): Promise<T> {
    return this.#call('GET', path, query, undefined) as Promise<T>;
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.#call('POST', path, {}, body) as Promise<T>;
  }

  delete(path: string): Promise<unknown> {
    return this.#call('DELETE', path, {}, undefined);
  }

  /** Every item of a list, page after page (the API's most per page) until its `next` cursor is null. */
  async all<T>(path: string, field: string, query: Query = {}): Promise<T[]> {
    const items: T[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.get<Record<string, unknown>>(path, { ...query, limit: PAGE_LIMIT, cursor });
      const list = page[field];
      const next = page['next'];
      if (!Array.isArray(list) || (next !== null && typeof next !== 'string'))
        throw new Failure(`the admin API's answer to ${path} is not a page of ${field}`, { kind: 'unavailable' });
      items.push(...(list as T[]));
      cursor = next ?? undefined;
    } while (cursor !== undefined);
    return items;
  }

  async #call(method: string, path: string, query: Query, body: unknown): Promise<unknown> {
    const url = new URL(`admin/v1${path}`, this.#base);
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    const { status, headers, text } = await this.#send(method, url, body === undefined ? undefined : JSON.stringify(body));
    if (status >= 300 && status < 400) {
      const where = clean(String(headers.location ?? 'nowhere'));
      throw new Failure(`${this.#base.origin} answered ${status}, redirecting to ${where}: no redirect is followed`, {
        kind: 'unavailable',
        fix: `give the admin listener's own URL as --admin or ${ADMIN_URL_ENV}`,
      });
    }
    let json: unknown;
    try {
      json = text === '' ? {} : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (status >= 200 && status < 300) {
      if (json === undefined)
        throw new Failure(`the admin API at ${this.#base.origin} answered ${status} with no JSON`, { kind: 'unavailable' });
      return json;
    }
    throw refusal(status, json);
  }

  #send(
    method: string,
    url: URL,
    payload: string | undefined,
  ): Promise<{ status: number; headers: IncomingMessage['headers']; text: string }> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#token}`,
      accept: 'application/json',
      ...(payload !== undefined && { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }),
    };
    const options = { method, headers, agent: false as const, signal: AbortSignal.timeout(TIMEOUT_MS), ...(this.#ca && { ca: this.#ca }) };
    return new Promise((resolve, reject) => {
      const fail = (err: unknown): void => reject(unreachable(this.#base.origin, err));
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= ANSWER_MAX) return void chunks.push(chunk);
          req.destroy();
          reject(new Failure(`the admin API's answer is larger than ${ANSWER_MAX} bytes`, { kind: 'unavailable' }));
        });
        res.on('error', fail);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      });
      req.on('error', fail);
      req.end(payload);
    });
  }
}

/** The server's words, untrusted: control and format characters dropped, and bounded. */
function clean(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu, '').slice(0, MSG_MAX);
}

/** A refusal by its status (§3.1): 401/403 → 77, 429/5xx → 69, any other 4xx (404, 409, 400…) → 65. */
function refusal(status: number, json: unknown): Failure {
  const body = typeof json === 'object' && json !== null ? (json as Record<string, unknown>) : {};
  const said = typeof body['msg'] === 'string' ? clean(body['msg']) : `status ${status}`;
  const kind: FailureKind = status === 401 || status === 403 ? 'denied' : status === 429 || status >= 500 ? 'unavailable' : 'data';
  if (status === 401)
    return new Failure(`the admin API refused the token: ${said}`, {
      kind,
      fix: `set ${ADMIN_TOKEN_ENV} to a live admin token (botlink broker admin-token create, on the broker's host)`,
    });
  if (status === 403) return new Failure(said, { kind, fix: 'an operator token is needed for this action' });
  return new Failure(said, { kind });
}

/** No answer at all: the broker down, the network, the time, or TLS (a certificate this machine does not trust). */
function unreachable(origin: string, err: unknown): Failure {
  if (err instanceof Failure) return err;
  const code = String((err as NodeJS.ErrnoException).code ?? '');
  const name = (err as Error).name;
  if (name === 'TimeoutError' || name === 'AbortError')
    return new Failure(`the admin API at ${origin} did not answer within ${TIMEOUT_MS / 1000} s`, { kind: 'unavailable' });
  const tls = /CERT|SELF_SIGNED|TLS|SSL|ISSUER|ALTNAME/.test(code);
  return new Failure(`cannot reach the admin API at ${origin}: ${messageOf(err)}`, {
    kind: 'unavailable',
    ...(tls && { fix: `trust the listener's certificate: set ${ADMIN_CA_ENV} to the CA file (PEM) that signed it` }),
  });
}
