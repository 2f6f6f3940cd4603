/**
 * The cloud connection's query parameters besides botId (DESIGN §1.7, §3.5): an app on the relay
 * decides them; with none decided each connection gets a fresh sessionId, as the guide advises.
 */

/** Name/value pairs in the app's order; botId is never among them (it is always the device's own). */
export type ConnParams = readonly (readonly [string, string])[];

export const NO_PARAMS: ConnParams = Object.freeze([]);

/** The same parameters whatever their order: what decides whether the open connection can be kept. */
export function sameParams(a: ConnParams, b: ConnParams): boolean {
  if (a.length !== b.length) return false;
  const key = (p: ConnParams): string => JSON.stringify([...p].sort(([x, xv], [y, yv]) => (x === y ? cmp(xv, yv) : cmp(x, y))));
  return key(a) === key(b);
}

function cmp(x: string, y: string): number {
  if (x === y) return 0;
  return x < y ? -1 : 1;
}

/** The sessionId the parameters decide, if they do. */
export function decidedSessionId(params: ConnParams): string | undefined {
  return params.find(([name]) => name === 'sessionId')?.[1];
}

/** The cloud URL: botId first, then the app's parameters, and a sessionId when the app gave none. */
export function cloudUrl(wsUrl: string, botId: string, params: ConnParams, sessionId: string): URL {
  const url = new URL(wsUrl);
  url.searchParams.set('botId', botId);
  for (const [name, value] of params) if (name !== 'botId') url.searchParams.append(name, value);
  if (decidedSessionId(params) === undefined) url.searchParams.set('sessionId', sessionId);
  return url;
}
