// The reference service's lifetimes and limits, named once: the options' defaults (what `botlink serve`
// runs with and its usage text prints) and the timers the service keeps for itself.
import { DEFAULT_SILENCE_MS } from './conversation/vad.js';

/** Every ReferenceServiceOptions default but the seed's and the database's. */
export const SERVICE_DEFAULTS = {
  host: '127.0.0.1',
  /** 0: the system picks a free port. */
  port: 0,
  /** An access token's lifetime (`expireIn`): 2 h, as the real service issues them. */
  accessTtlS: 7200,
  /** A refresh token's lifetime (`refreshExpireIn`): 7 days. */
  refreshTtlS: 604_800,
  /** How far a request's accessTimestamp may be from the service clock, either way: 5 min. */
  timestampWindowMs: 300_000,
  /** A WebSocket PING to every session this often; one not answered by the next ends it. */
  pingIntervalMs: 30_000,
  /** How long a client may take to send a whole request (its headers: half of it). */
  requestTimeoutMs: 10_000,
  /** How a displaced WebSocket is told (DESIGN §1.4): the public guide's EVENT frame. */
  displacementMarker: 'event',
  /** Pause between two frames of a conversation round: streamed like the real service's, still quick in tests. */
  roundDelayMs: 5,
  /** Free mode (DESIGN §1.7): silence after speech that ends an utterance. */
  vadSilenceMs: DEFAULT_SILENCE_MS,
} as const;

/** Expired tokens and nonces leave the database this often. */
export const PURGE_EVERY_MS = 10_000;
/** node checks the request timeouts at most this far apart: its own 30 s would let a slow client linger. */
export const TIMEOUT_CHECK_MAX_MS = 1000;
