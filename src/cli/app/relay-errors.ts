import type { Outcome } from '../../protocol/round-reader.js';

// What a relay client's calls fail with, apart from the client (and its ws): the commands' exit
// table (frame/failures.ts) knows them without loading a socket library.

/** The relay could not be reached or refused this app: what happened and what a person does about it. */
export class RelayRefused extends Error {
  constructor(
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

/** A round that cannot finish: the link left `connected`, or the relay closed. */
export class RoundLost extends Error {}

export interface RoundResult {
  reply: string;
  roundId: string;
  /** The final ASR text of the turn, when the cloud recognised speech. */
  heard?: string;
  /** From sending the input to the round's COMPLETE. */
  ms: number;
}

/** The cloud answered the turn without a reply: EMPTY_CONTENT, a cut, moderation or an error frame. */
export class RoundEnded extends Error {
  constructor(
    readonly outcome: Exclude<Outcome, 'complete'>,
    message: string,
    /** What came before the end (a cut reply's first pieces). */
    readonly partial: RoundResult,
  ) {
    super(message);
  }
}
