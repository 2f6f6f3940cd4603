/**
 * The console's pure parts (no DOM, no fetch): its routes, the keyId check before an accept, the query strings of the
 * admin API's lists, times and the API's errors. test/unit/console/logic.test.ts runs them in node.
 */

/** The views the navigation lists, by their names in the hash (`#/devices`), and their titles. */
export const NAV = [
  ['summary', 'Summary'],
  ['devices', 'Devices'],
  ['pending', 'Pending'],
  ['codes', 'Codes'],
  ['preauth', 'Preauth'],
  ['audit', 'Audit'],
] as const;

export type NavView = (typeof NAV)[number][0];
/** A device's page by botId (`#/device/<botId>`), or a key's by keyId (`#/key/<keyId>`), for one without a botId. */
export type View = NavView | 'device' | 'key';

export interface Route {
  view: View;
  /** The botId or keyId of a device's page. */
  id?: string;
  /** The view's filters and cursor, as the hash's query holds them. */
  query: Record<string, string>;
}

const NAV_NAMES: readonly string[] = NAV.map(([name]) => name);

/** The route a location hash names; anything else is the summary. */
export function parseRoute(hash: string): Route {
  const text = hash.replace(/^#\/?/, '');
  const at = text.indexOf('?');
  const path = at < 0 ? text : text.slice(0, at);
  const query: Record<string, string> = {};
  if (at >= 0) for (const [k, v] of new URLSearchParams(text.slice(at + 1))) if (v !== '') query[k] = v;
  const [name = '', id, ...rest] = path.split('/');
  if (NAV_NAMES.includes(name) && id === undefined) return { view: name as NavView, query };
  if ((name === 'device' || name === 'key') && id !== undefined && id !== '' && rest.length === 0) {
    try {
      return { view: name, id: decodeURIComponent(id), query };
    } catch {
      return { view: 'summary', query: {} };
    }
  }
  return { view: 'summary', query: {} };
}

/** The hash of a route: `#/devices?state=active`, `#/device/<botId>`. */
export function routeHash(view: View, id?: string, query: Record<string, string | undefined> = {}): string {
  const path = id === undefined ? view : `${view}/${encodeURIComponent(id)}`;
  const qs = queryString(query);
  return `#/${path}${qs === '' ? '' : `?${qs}`}`;
}

/** A query string of the parameters that have a value (none: the empty string). */
export function queryString(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  return q.toString();
}

/** An API path with the parameters that have a value. */
export function apiPath(path: string, params: Record<string, string | undefined> = {}): string {
  const qs = queryString(params);
  return qs === '' ? path : `${path}?${qs}`;
}

/** The query's values of `names` alone, so a list's page never sends a parameter the route refuses. */
export function pick(query: Record<string, string>, names: readonly string[]): Record<string, string | undefined> {
  return Object.fromEntries(names.map((n) => [n, query[n]]));
}

export const KEY_ID = /^[0-9a-f]{32}$/;

/**
 * Whether the keyId a technician typed (read from the device) is the row's, all 32 characters: spaces around it are
 * forgiven, nothing else (a prefix, a near miss or another case is not the key).
 */
export function keyIdMatches(typed: string, keyId: string): boolean {
  const given = typed.trim();
  return KEY_ID.test(keyId) && given.length === keyId.length && given === keyId;
}

/** A time in ms as UTC, to the second: `2026-12-01 21:30:05Z`; none: an em dash. */
export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '\u2014';
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? '\u2014' : `${d.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

export interface ApiFault {
  status: number;
  code: string;
  msg: string;
}

/** The API's `{code, msg}` of a failed answer; a body without them (a proxy's page) is told by its status. */
export function faultOf(status: number, body: unknown): ApiFault {
  const b = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const code = typeof b['code'] === 'string' ? b['code'] : `http-${status}`;
  const msg = typeof b['msg'] === 'string' ? b['msg'] : `the broker answered ${status}`;
  return { status, code, msg };
}

/** What a `Make code` form asks, as the fields' text. */
export interface CodeForm {
  vendorId: string;
  deviceId: string;
  anyDevice: boolean;
  uses: string;
  ttlS: string;
  kind: string;
}

/** The body of POST /admin/v1/codes, or what is wrong with the form (the API judges the rest). */
export function codeBody(f: CodeForm): { body: Record<string, unknown> } | { error: string } {
  const body: Record<string, unknown> = { vendorId: f.vendorId.trim() };
  const deviceId = f.deviceId.trim();
  if (f.anyDevice && deviceId !== '') return { error: 'Give a deviceId or tick Any device, not both.' };
  if (f.anyDevice) body['anyDevice'] = true;
  else if (deviceId !== '') body['deviceId'] = deviceId;
  else return { error: 'Give a deviceId, or tick Any device.' };
  for (const [name, text] of [
    ['uses', f.uses],
    ['ttlS', f.ttlS],
  ] as const) {
    const t = text.trim();
    if (t === '') continue;
    if (!/^\d{1,9}$/.test(t)) return { error: `${name === 'uses' ? 'Uses' : 'Lifetime'} must be a whole number.` };
    body[name] = Number(t);
  }
  if (f.kind !== '' && f.kind !== 'plain') body['kind'] = f.kind;
  return { body };
}

/** The lines of a pasted preauth list, numbered as the API numbers them (a trailing newline adds no line). */
export function preauthLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** What `Reject all` would send for the Pending view's filters, or why it cannot. */
export function rejectAllBody(query: Record<string, string>): { body: { vendorId?: string; source?: string } } | { error: string } {
  if (query['q'] !== undefined) return { error: 'Reject all takes the vendor and source filters only: clear the serial prefix first.' };
  const body: { vendorId?: string; source?: string } = {};
  if (query['vendorId'] !== undefined) body.vendorId = query['vendorId'];
  if (query['source'] !== undefined) body.source = query['source'];
  if (body.vendorId === undefined && body.source === undefined)
    return { error: 'Reject all needs a filter: filter by vendor or source first.' };
  return { body };
}
