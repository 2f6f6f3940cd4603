/**
 * The link's decisions as one pure function: how a connection ended, what the link remembers, its
 * settings and a random draw in; what to do next out. Nothing here reads a clock, a socket or chance.
 */

import { WS_FAILURE_FIXES, WsMessage, type WsFailure } from '../../protocol/codes.js';
import { parseWsFailure } from '../../protocol/wire.js';
import { nextBackoff, resetBackoff, shouldReset, type BackoffState } from '../token/backoff.js';
import { paceAppReconnect, type AppPacingMemory, type AppReconnectCause } from './app-pacing.js';
import { MAX_CLOUD_MESSAGE_BYTES, type LinkSettings } from './options.js';

/** Displacements this close together mean two devices share one botId. */
export const DUPLICATE_WINDOW_MS = 10 * 60_000;
export const DUPLICATE_COUNT = 3;
/** The displaced backoff only starts over after a connection held this long. */
export const DISPLACED_RESET_MS = 10 * 60_000;
/** The backoff attempt a dropped, established connection retries from. */
export const DROPPED_FIRST_ATTEMPT = 2;
/** Failure answers (refusal bodies, frames) are short JSON: no more than this is read or parsed. */
export const MAX_FAILURE_BODY = 4096;

/** Why the link reconnected: status.json's link.reconnectsByCause and the metrics' `cause` label. */
export type ReconnectCause =
  | AppReconnectCause
  | 'closed'
  | 'network'
  | 'pong-timeout'
  | 'handshake-timeout'
  | 'refused'
  | 'unauthorized'
  | 'bot-invalid'
  | 'displaced'
  | 'oversized'
  | 'no-token'
  | 'unopenable';

/** How one connection attempt ended, as the shell saw it first (the close itself when nothing came before). */
export type LinkEnding =
  /** The token manager could not give a token; `fix` is its error's. */
  | { readonly kind: 'no-token'; readonly message: string; readonly fix?: string | undefined }
  /** The WebSocket request could not even be built (a bad URL or token). */
  | { readonly kind: 'unopenable'; readonly message: string }
  /** The upgrade was answered with HTTP: its status and (the start of) its body. */
  | { readonly kind: 'refused'; readonly status: number; readonly body: string }
  /** The cloud sent a failure as a frame (see frameFailure); the link closed the socket with 1000. */
  | { readonly kind: 'frame'; readonly failure: WsFailure }
  | { readonly kind: 'handshake-timeout' }
  | { readonly kind: 'pong-timeout' }
  /** The socket failed (network error, protocol error, a message over the limit: ws closes with 1009). */
  | { readonly kind: 'socket-error'; readonly code: string | undefined; readonly message: string }
  | { readonly kind: 'closed'; readonly code: number; readonly reason: string }
  /**
   * Not an ending: an app wants a socket the open one is not (other parameters, or a session another
   * app conversed on). The open socket is still up; the decision says when to replace it.
   */
  | { readonly kind: 'app'; readonly cause: AppReconnectCause };

/** What the link carries from one connection to the next: its backoff and app reconnects (AppPacingMemory), and these. */
export interface LinkMemory extends AppPacingMemory {
  readonly displacedBackoff: BackoffState;
  /** Monotonic times of the recent displacements (within DUPLICATE_WINDOW_MS of the last). */
  readonly displacements: readonly number[];
  /** Unauthorized answers in a row since the cloud last accepted a session. */
  readonly unauthorizedStreak: number;
}

/** The memory plus the facts of the connection that just ended. */
export interface LinkFacts extends LinkMemory {
  /** Monotonic ms now. */
  readonly now: number;
  /** How long the socket was open; absent when it never opened (or there was no socket). */
  readonly upMs?: number;
  /** The cloud answered this session (a pong or a message): it had accepted us. */
  readonly accepted: boolean;
}

/** Reconnect at once, or wait `delayMs` in `backoff` or `displaced`. */
export type LinkNext = { readonly state: 'connecting' } | { readonly state: 'backoff' | 'displaced'; readonly delayMs: number };

export interface LinkDecision {
  readonly memory: LinkMemory;
  readonly next: LinkNext;
  /** What went wrong: the status's lastError and the 'backoff' event's reason. */
  readonly reason: string;
  /** What a person can do about it, when retrying alone will not help. */
  readonly fix?: string;
  /** The token this connection used was refused: renew it before the next attempt. */
  readonly invalidateToken: boolean;
  /** Displaced: the 'displaced' event's payload. */
  readonly displaced?: { readonly count: number };
  /** Displaced DUPLICATE_COUNT times within DUPLICATE_WINDOW_MS: log that two devices share the botId. */
  readonly sharedBotId: boolean;
  /** Why this reconnect happens, for the counters. */
  readonly cause: ReconnectCause;
}

export function initialLinkMemory(): LinkMemory {
  return { backoff: resetBackoff(), displacedBackoff: resetBackoff(), displacements: [], unauthorizedStreak: 0, appReconnects: [] };
}

const FAILURE_WORDS: readonly string[] = Object.values(WsMessage);

/** A failure the cloud sent as a frame; a bare word, a binary frame or anything long is conversation. */
export function frameFailure(isBinary: boolean, size: number, text: () => string): WsFailure | undefined {
  if (isBinary || size > MAX_FAILURE_BODY) return undefined;
  const t = text();
  // Every failure names itself: a frame that names none is conversation, passed on without a JSON parse.
  if (!FAILURE_WORDS.some((w) => t.includes(w))) return undefined;
  return parseWsFailure(t, { bare: false });
}

/** What the link does after `ending`; `random` in [0, 1) draws the jitter. */
export function decideLink(ending: LinkEnding, facts: LinkFacts, settings: LinkSettings, random: number): LinkDecision {
  const upMs = facts.upMs ?? 0;
  const memory: LinkMemory = {
    backoff: shouldReset(upMs, settings.stableAfterMs) ? resetBackoff() : facts.backoff,
    displacedBackoff: upMs >= DISPLACED_RESET_MS ? resetBackoff() : facts.displacedBackoff,
    displacements: facts.displacements,
    // The service only talks to a session it accepted: an Unauthorized streak is over.
    unauthorizedStreak: facts.accepted ? 0 : facts.unauthorizedStreak,
    appReconnects: facts.appReconnects,
  };
  if (ending.kind === 'app') {
    // Not an ending: the open socket stays until the pacing says it may be replaced.
    const { memory: paced, delayMs, reason } = paceAppReconnect(ending.cause, memory, facts.now, settings, random);
    const next: LinkNext = delayMs === 0 ? { state: 'connecting' } : { state: 'backoff', delayMs };
    return { memory: paced, next, reason, invalidateToken: false, sharedBotId: false, cause: ending.cause };
  }
  const cause = causeOf(ending, settings);
  const why = reconnectCause(ending, cause);
  if ('failure' in cause) return { ...onFailure(cause.failure, memory, facts.now, settings, random), cause: why };
  if (facts.upMs !== undefined) {
    // An established socket that drops has usually dropped for the whole fleet (a cloud restart):
    // spread the first retry over the window of attempt 2 (4 × base) so the fleet does not return at once.
    const backoff = { attempt: Math.max(memory.backoff.attempt, DROPPED_FIRST_ATTEMPT) };
    return { ...retry({ ...memory, backoff, unauthorizedStreak: 0 }, cause.drop, settings, random), cause: why };
  }
  const decision = { ...retry(memory, cause.drop, settings, random, ending.kind === 'unopenable'), cause: why };
  return cause.fix === undefined ? decision : { ...decision, fix: cause.fix };
}

/** The counter a reconnect after `ending` goes to. */
function reconnectCause(ending: Exclude<LinkEnding, { kind: 'app' }>, cause: Cause): ReconnectCause {
  if ('failure' in cause) {
    if (cause.failure === WsMessage.UNAUTHORIZED) return 'unauthorized';
    return cause.failure === WsMessage.BOT_INVALID ? 'bot-invalid' : 'displaced';
  }
  switch (ending.kind) {
    case 'socket-error':
      return ending.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'oversized' : 'network';
    case 'frame':
      return 'closed';
    default:
      return ending.kind;
  }
}

type Cause = { readonly failure: WsFailure } | { readonly drop: string; readonly fix?: string | undefined };

/** One of the three 400 failures, or a plain drop with the words the status shows. */
function causeOf(ending: Exclude<LinkEnding, { kind: 'app' }>, settings: LinkSettings): Cause {
  switch (ending.kind) {
    case 'no-token':
      return { drop: `no token: ${ending.message}`, fix: ending.fix };
    case 'unopenable':
      return { drop: `cannot open the WebSocket: ${ending.message}` };
    case 'refused': {
      const failure = parseWsFailure(ending.body) ?? (ending.status === 401 ? WsMessage.UNAUTHORIZED : undefined);
      return failure ? { failure } : { drop: `handshake refused with HTTP ${ending.status}` };
    }
    case 'frame':
      return { failure: ending.failure };
    case 'handshake-timeout':
      return { drop: `WebSocket handshake not complete within ${settings.connectTimeoutMs} ms` };
    case 'pong-timeout':
      return { drop: `no pong within ${settings.heartbeatTimeoutMs} ms` };
    case 'socket-error':
      // ws closes the socket itself (1009) after this one; the oversized message deserves its own words.
      return {
        drop:
          ending.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'
            ? `the cloud sent a message over ${MAX_CLOUD_MESSAGE_BYTES} bytes: closed with 1009`
            : ending.message,
      };
    case 'closed': {
      const failure = parseWsFailure(ending.reason);
      return failure ? { failure } : { drop: `closed (${ending.code}${ending.reason ? ` ${ending.reason}` : ''})` };
    }
  }
}

function onFailure(failure: WsFailure, memory: LinkMemory, now: number, settings: LinkSettings, random: number): Decided {
  switch (failure) {
    case WsMessage.UNAUTHORIZED: {
      const streak = { ...memory, unauthorizedStreak: memory.unauthorizedStreak + 1 };
      if (memory.unauthorizedStreak === 0) {
        // A token the cloud no longer takes (revoked, rotated): one renewal should fix it, so do not wait.
        return { memory: streak, next: { state: 'connecting' }, reason: 'Unauthorized', invalidateToken: true, sharedBotId: false };
      }
      const again = retry(streak, 'Unauthorized again with a renewed token', settings, random, true);
      return { ...again, fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED] };
    }
    case WsMessage.BOT_INVALID:
      return {
        memory,
        next: { state: 'backoff', delayMs: settings.botInvalidRetryMs },
        reason: 'botId not found or invalid',
        fix: WS_FAILURE_FIXES[WsMessage.BOT_INVALID],
        invalidateToken: false,
        sharedBotId: false,
      };
    case WsMessage.REPEAT_SESSION:
      return onDisplaced(memory, now, settings, random);
  }
}

function onDisplaced(memory: LinkMemory, now: number, settings: LinkSettings, random: number): Decided {
  const displacements = [...memory.displacements.filter((t) => now - t < DUPLICATE_WINDOW_MS), now];
  const count = displacements.length;
  const next = nextBackoff(memory.displacedBackoff, settings.displacedBackoff, random);
  const sharedBotId = count >= DUPLICATE_COUNT;
  return {
    memory: { ...memory, displacements, displacedBackoff: next.state },
    next: { state: 'displaced', delayMs: next.delayMs },
    reason: sharedBotId
      ? `REPEAT_CLIENT_SESSION: displaced ${count} times in ${DUPLICATE_WINDOW_MS / 60_000} min — two devices share botId ${settings.botId}`
      : 'REPEAT_CLIENT_SESSION: another connection holds this botId',
    ...(sharedBotId && { fix: WS_FAILURE_FIXES[WsMessage.REPEAT_SESSION] }),
    invalidateToken: false,
    displaced: { count },
    sharedBotId,
  };
}

/** A decision before its cause is named. */
type Decided = Omit<LinkDecision, 'cause'>;

function retry(memory: LinkMemory, reason: string, settings: LinkSettings, random: number, invalidateToken = false): Decided {
  const next = nextBackoff(memory.backoff, settings.backoff, random);
  return {
    memory: { ...memory, backoff: next.state },
    next: { state: 'backoff', delayMs: next.delayMs },
    reason,
    invalidateToken,
    sharedBotId: false,
  };
}
