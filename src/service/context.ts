import type { Identity } from '../protocol/wire.js';
import type { FaultState } from './faults.js';
import type { ServiceStore } from './store.js';

/** What the routes and the WebSocket endpoint share. */
export interface ServiceContext {
  store: ServiceStore;
  faults: FaultState;
  /** The service's wall clock in ms, fault shift included. */
  now(): number;
  accessTtlS: number;
  refreshTtlS: number;
  timestampWindowMs: number;
  /** Told of each access token as it is issued, with the refresh token it goes with (hashes only). */
  issued(tokens: IssuedTokens): void;
}

/** An access token just issued and the refresh token of its pair, as the store names them: by hash. */
export interface IssuedTokens {
  identity: Identity;
  accessHash: string;
  refreshHash: string;
}

/** What the service tells its embedder (tests, benchmarks), by event name; listeners must not throw. */
export interface ServiceEvents {
  /** An upgrade request, before the latency fault holds it. */
  'ws-upgrade': [];
  'ws-open': [{ botId: string }];
  'ws-close': [{ botId: string }];
  displaced: [{ botId: string }];
  /** Every frame a session sends. */
  'ws-message': [{ botId: string; data: Buffer; isBinary: boolean }];
  /** A session closed for leaving too much unread. */
  'not-reading': [{ botId: string; limitBytes: number }];
  /** Each access token, in issue order, synchronously as it is issued: before its batch commits and before the answer. */
  'tokens-issued': [IssuedTokens];
  /** A POST to a route, its body read: before it is answered, or held by a fault. */
  'http-request': [{ path: string }];
  /** A bug: the error an answer could not be built for. */
  'internal-error': [unknown];
}

/** A request body after UTF-8 decoding and JSON parsing; `reason` says what was wrong with it. */
export type JsonInput = { ok: true; value: unknown } | { ok: false; reason: string };

export interface RouteRequest {
  input: JsonInput;
  authorization: string | undefined;
}

/** A route answers HTTP 200 with this JSON body; failures are in the body, never the status. */
export type Route = (ctx: ServiceContext, req: RouteRequest) => Record<string, unknown>;
