/** The admin API from the page: same-origin fetch with the session cookie, JSON in and out, `{code, msg}` as ApiError. */
import { type ApiFault, faultOf } from './logic.js';

export class ApiError extends Error {
  readonly fault: ApiFault;

  constructor(fault: ApiFault) {
    super(fault.msg);
    this.name = 'ApiError';
    this.fault = fault;
  }
}

let signedOut: (fault: ApiFault) => void = () => undefined;
/** Who is told when a request is answered 401: the session ended or was never there. */
export function onSignedOut(fn: (fault: ApiFault) => void): void {
  signedOut = fn;
}

/**
 * One request. `session` marks sign-in and sign-out, whose 401 is the token's refusal, not the end of a session.
 * Method and body as the API takes them; the browser adds Origin to every method but GET and HEAD.
 */
export async function call<T>(method: string, path: string, body?: unknown, session = false): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const init: RequestInit = { method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch {
    throw new ApiError({ status: 0, code: 'network', msg: 'the broker did not answer: check the connection and try again' });
  }
  let json: unknown = {};
  try {
    const text = await res.text();
    json = text === '' ? {} : JSON.parse(text);
  } catch {
    json = {};
  }
  if (res.ok) return json as T;
  const fault = faultOf(res.status, json);
  if (res.status === 401 && !session) signedOut(fault);
  throw new ApiError(fault);
}

export const API = '/admin/v1';
export const get = <T>(path: string): Promise<T> => call<T>('GET', `${API}${path}`);
export const post = <T>(path: string, body?: unknown): Promise<T> => call<T>('POST', `${API}${path}`, body);
export const del = <T>(path: string): Promise<T> => call<T>('DELETE', `${API}${path}`);
/** A path segment from untrusted text: encoded, so a botId or deviceId never changes the path. */
export const seg = (s: string): string => encodeURIComponent(s);
