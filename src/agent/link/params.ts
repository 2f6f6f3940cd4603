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

/** How an app's parameters fit the open socket (see ConnChoice.match). */
export type ParamsMatch = 'kept' | 'reused' | 'reattach' | 'other';

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
  /** `spentBy`: the parameters of the app that conversed on the socket, once one did. */
  #opened: { params: ConnParams; sessionId: string; spentBy?: ConnParams } | undefined;

  constructor(fresh: () => string) {
    this.#fresh = fresh;
  }

  want(params: ConnParams): void {
    this.#wanted = params;
  }

  /**
   * No app decides any more: later sockets get fresh sessions. `spent`: the app conversed on the open
   * socket, so the cloud holds its voice config, its history and maybe the tail of a round: only an app
   * with the same parameters, or one naming this socket's session, gets it again (see match).
   */
  forget(spent = false): void {
    if (spent && this.#opened) this.#opened.spentBy = this.#wanted;
    this.#wanted = NO_PARAMS;
  }

  /**
   * Whether the wanted parameters can use the last socket, and how: `kept` (nobody conversed on it),
   * `reused` (an app conversed on it, and these are its parameters or name this very socket: the same
   * app coming back), `reattach` (an app that names no session would take one another app conversed
   * on: it needs a fresh one) or `other` (other parameters: another socket).
   */
  get match(): ParamsMatch {
    const opened = this.#opened;
    if (opened === undefined) return 'other';
    const wanted = this.#wanted;
    // A fresh sessionId is the socket's too: an app asking for the one it was shown asks for this socket.
    const withSession: ConnParams =
      decidedSessionId(opened.params) === undefined ? [...opened.params, ['sessionId', opened.sessionId]] : opened.params;
    const exact = sameParams(opened.params, wanted) || sameParams(withSession, wanted);
    // An app that names no session leaves the choice to botlink: any socket with its other parameters will do.
    const fits = exact || (decidedSessionId(wanted) === undefined && sameParams(withoutSession(withSession), wanted));
    if (!fits) return 'other';
    if (opened.spentBy === undefined) return 'kept';
    return exact || sameParams(opened.spentBy, wanted) ? 'reused' : 'reattach';
  }

  /** The app's sessionId when it decided one, else the last socket's. */
  get sessionId(): string | null {
    return decidedSessionId(this.#wanted) ?? this.#opened?.sessionId ?? null;
  }

  /** The URL of a new socket, remembered as the one opened last. */
  open(wsUrl: string, botId: string): URL {
    const params = this.#wanted;
    const sessionId = decidedSessionId(params) ?? this.#fresh();
    this.#opened = { params, sessionId };
    return cloudUrl(wsUrl, botId, params, sessionId);
  }
}
