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

/** The parameters and sessionId a socket was opened with (its sessionId: the app's, or a fresh one). */
export interface OpenedWith {
  readonly params: ConnParams;
  readonly sessionId: string;
}

/**
 * How wanted parameters fit a socket: `exact` (its very parameters, or they name its session),
 * `fits` (an app that names no session leaves the choice to botlink: any socket with its other
 * parameters will do) or `other` (another socket is needed; so too when there is none).
 */
export type ParamsFit = 'exact' | 'fits' | 'other';

export function fitOf(opened: OpenedWith | undefined, wanted: ConnParams): ParamsFit {
  if (opened === undefined) return 'other';
  // A fresh sessionId is the socket's too: an app asking for the one it was shown asks for this socket.
  const withSession: ConnParams =
    decidedSessionId(opened.params) === undefined ? [...opened.params, ['sessionId', opened.sessionId]] : opened.params;
  if (sameParams(opened.params, wanted) || sameParams(withSession, wanted)) return 'exact';
  return decidedSessionId(wanted) === undefined && sameParams(withoutSession(withSession), wanted) ? 'fits' : 'other';
}

function withoutSession(params: ConnParams): ConnParams {
  return params.filter(([name]) => name !== 'sessionId');
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

/** The parameters an app wants for the next sockets, and those the current (or last) socket was opened with. */
export class ConnChoice {
  readonly #fresh: () => string;
  #wanted: ConnParams = NO_PARAMS;
  #opened: OpenedWith | undefined;

  constructor(fresh: () => string) {
    this.#fresh = fresh;
  }

  want(params: ConnParams): void {
    this.#wanted = params;
  }

  /** No app decides any more: later sockets get fresh sessions. */
  forget(): void {
    this.#wanted = NO_PARAMS;
  }

  /** How the wanted parameters fit the last socket. */
  get fit(): ParamsFit {
    return fitOf(this.#opened, this.#wanted);
  }

  /** The app's sessionId when it decided one, else the last socket's. */
  get sessionId(): string | null {
    return decidedSessionId(this.#wanted) ?? this.#opened?.sessionId ?? null;
  }

  /** A new socket's URL, and what it is opened with, remembered as the last socket's. */
  open(wsUrl: string, botId: string): { url: URL; opened: OpenedWith } {
    const params = this.#wanted;
    const opened: OpenedWith = { params, sessionId: decidedSessionId(params) ?? this.#fresh() };
    this.#opened = opened;
    return { url: cloudUrl(wsUrl, botId, params, opened.sessionId), opened };
  }
}
