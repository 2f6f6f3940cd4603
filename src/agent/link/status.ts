import type { OpenedWith } from './params.js';

export type LinkState = 'connecting' | 'connected' | 'backoff' | 'displaced' | 'stopped';

export interface LinkStatus {
  state: LinkState;
  /** Wall-clock ms when the state was entered. */
  since: number;
  reconnects: number;
  /** Every reconnect counted by why (DESIGN §3.4): the counts add up to `reconnects`. */
  reconnectsByCause: Record<string, number>;
  lastError: string | null;
  /** What a person can do about lastError, when there is something. */
  fix?: string;
}

/** The 'state' event: the status, plus how long until the next attempt while waiting in backoff or displaced. */
export interface LinkStateChange extends LinkStatus {
  retryInMs?: number;
}

/** What useParams and renewSession did: the open socket is kept, it is being replaced (at once or paced), or the next attempt takes the parameters. */
export type ParamsOutcome = 'kept' | 'reconnecting' | 'later';

/** What the link tells its listeners (the relay, the daemon), by event name. */
export interface LinkEvents {
  /** A change of state, lastError or fix; `retryInMs` while it waits. */
  state: [LinkStateChange];
  /** A new socket is being opened, with these parameters: what was said on the last one stays with it. */
  opening: [OpenedWith];
  /**
   * The link carries frames again, on a socket just opened or on one a paced replacement held (the wait
   * called off): once each time the state becomes connected. The relay sends the app's voice config
   * first on it, and keeps the line from then on.
   */
  connected: [];
  /** A frame from the cloud, as it came (binaryType 'nodebuffer'). */
  message: [data: Buffer, isBinary: boolean];
  backoff: [{ delayMs: number; reason: string }];
  /** Displaced by another connection for the botId; `count` within the displaced window. */
  displaced: [{ readonly count: number }];
  stopped: [];
}

/** A change of the link's status: the new state, and what else changes with it; `retryInMs` while it waits. */
export interface StatePatch {
  state: LinkState;
  /** undefined or absent: null. */
  lastError?: string | null | undefined;
  fix?: string | undefined;
  retryInMs?: number;
}

/**
 * The status after `patch`, or undefined when it changes nothing (a new retryInMs alone is no change):
 * fields the patch leaves out keep their values, `fix: undefined` clears it, and `since` moves with the state.
 */
export function patchStatus(status: LinkStatus, patch: StatePatch, wallNow: number): LinkStatus | undefined {
  const { state } = patch;
  const lastError = 'lastError' in patch ? (patch.lastError ?? null) : status.lastError;
  const fix = 'fix' in patch ? patch.fix : status.fix;
  if (state === status.state && lastError === status.lastError && fix === status.fix) return undefined;
  const { fix: _was, ...rest } = status;
  return { ...rest, state, since: state === status.state ? status.since : wallNow, lastError, ...(fix !== undefined && { fix }) };
}
