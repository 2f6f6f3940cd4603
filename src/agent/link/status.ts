export type LinkState = 'connecting' | 'connected' | 'backoff' | 'displaced' | 'stopped';

export interface LinkStatus {
  state: LinkState;
  /** Wall-clock ms when the state was entered. */
  since: number;
  reconnects: number;
  lastError: string | null;
  /** What a person can do about lastError, when there is something. */
  fix?: string;
}

/** The 'state' event: the status, plus how long until the next attempt while waiting in backoff or displaced. */
export interface LinkStateChange extends LinkStatus {
  retryInMs?: number;
}

/** What useParams did: the open socket already had them, it is being replaced, or the next attempt takes them. */
export type ParamsOutcome = 'kept' | 'reconnecting' | 'later';
