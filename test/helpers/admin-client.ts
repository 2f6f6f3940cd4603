// The admin listener as a browser or a script reaches it (DESIGN §3.8): raw HTTP, so that Host, Origin, Cookie and
// Sec-Fetch-Site are sent exactly as a test says.
import { request } from 'node:http';

export interface AdminReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: Record<string, unknown>;
}

export interface AdminCall {
  method?: string;
  token?: string;
  cookie?: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Sends from this local address (127.0.0.0/8 on loopback), as another source. */
  from?: string;
}

/** One request to `base` (the admin origin); Host is the origin's unless `headers` say otherwise. */
export async function adminCall(base: string, path: string, o: AdminCall = {}): Promise<AdminReply> {
  const reply = await adminRaw(base, path, o);
  const text = reply.body.toString('utf8');
  return { status: reply.status, headers: reply.headers, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

export interface AdminRawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as sent (not decoded: a gzip answer stays gzip). */
  body: Buffer;
}

/** adminCall, its body left as bytes: the console's page and assets. */
export function adminRaw(base: string, path: string, o: AdminCall = {}): Promise<AdminRawReply> {
  const url = new URL(path, base);
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers: Record<string, string> = {
    host: url.host,
    ...(o.token !== undefined && { authorization: `Bearer ${o.token}` }),
    ...(o.cookie !== undefined && { cookie: `botlink_admin=${o.cookie}` }),
    ...(payload !== undefined && { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }),
    ...o.headers,
  };
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: o.method ?? 'GET', headers, agent: false, ...(o.from !== undefined && { localAddress: o.from }) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The session id of a Set-Cookie answer. */
export function sessionOf(reply: AdminReply): string {
  const cookie = ([] as string[]).concat(reply.headers['set-cookie'] ?? [])[0] ?? '';
  const m = /^botlink_admin=([^;]*);/.exec(cookie);
  if (!m?.[1]) throw new Error(`no session cookie in ${cookie}`);
  return m[1];
}
