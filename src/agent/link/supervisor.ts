import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { WsMessage, type WsFailure } from '../../protocol/codes.js';
import { parseWsFailure } from '../../protocol/wire.js';
import {
  BOT_INVALID_RETRY_MS,
  DISPLACED_BACKOFF,
  LINK_BACKOFF,
  nextBackoff,
  resetBackoff,
  shouldReset,
  type BackoffSettings,
  type BackoffState,
} from '../token/backoff.js';
import type { Clock } from '../time/clock.js';

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

/** What the link needs from the token manager. */
export interface TokenSource {
  current(opts: { minLeftMs?: number; signal?: AbortSignal }): Promise<string>;
  invalidate(token?: string): void;
}

export interface LinkOptions {
  wsUrl: string;
  botId: string;
  tokens: TokenSource;
  clock: Clock;
  log: Logger;
  /** A token with less life than this is renewed before connecting (default 5 min). */
  tokenMarginMs?: number;
  backoff?: BackoffSettings;
  displacedBackoff?: BackoffSettings;
  botInvalidRetryMs?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** The whole handshake (connect, upgrade, any refusal body) gets this long in total (default 10 s). */
  connectTimeoutMs?: number;
  /** A connection up this long resets the reconnect backoff (default 60 s). */
  stableAfterMs?: number;
  random?: () => number;
  /** Resolves the WebSocket host; default the system resolver (tests inject failures and recovery). */
  lookup?: LookupFunction;
}

/** Displacements this close together mean two devices share one botId. */
const DUPLICATE_WINDOW_MS = 10 * 60_000;
const DUPLICATE_COUNT = 3;
/** The displaced backoff only starts over after a connection held this long. */
const DISPLACED_RESET_MS = 10 * 60_000;
const MAX_ERROR_BODY = 4096;
/** The backoff attempt a dropped, established connection retries from (see #onClose). */
export const DROPPED_FIRST_ATTEMPT = 2;
/** A closing handshake the peer leaves unfinished is cut after this (ws would wait 30 s). */
const CLOSE_GRACE_MS = 2000;
/** 300 ms of 48 kHz 16-bit stereo PCM is 57,600 B (76,800 in base64 JSON): 1 MiB is ~13× that, as the relay's app limit (§3.5). */
export const MAX_CLOUD_MESSAGE_BYTES = 1024 * 1024;

type Ending = { kind: 'failure'; failure: WsFailure } | { kind: 'drop'; reason: string };

/**
 * Keeps exactly one authenticated WebSocket open: connects with a fresh token, watches it with
 * ping/pong, and reconnects with backoff. Emits 'state' (LinkStatus), 'connected', 'message'
 * (data, isBinary), 'backoff' ({delayMs, reason}), 'displaced' ({count}) and 'stopped'.
 */
export class LinkSupervisor extends EventEmitter {
  readonly #o: LinkOptions;
  #status: LinkStatus;
  #ws: WebSocket | undefined;
  #token: string | undefined;
  #ending: Ending | undefined;
  #upSinceMono: number | undefined;
  #backoff: BackoffState = resetBackoff();
  #displacedBackoff: BackoffState = resetBackoff();
  #displacements: number[] = [];
  #unauthorizedStreak = 0;
  #timer: NodeJS.Timeout | undefined;
  #pingTimer: NodeJS.Timeout | undefined;
  #pongTimer: NodeJS.Timeout | undefined;
  #abort: AbortController | undefined;
  #stopped = true;

  constructor(opts: LinkOptions) {
    super();
    this.#o = opts;
    this.#status = { state: 'stopped', since: opts.clock.wallNow(), reconnects: 0, lastError: null };
  }

  get status(): LinkStatus {
    return { ...this.#status };
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    void this.#connect();
  }

  /** Closes the socket with 1000 and never reconnects. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#stopHeartbeat();
    this.#abort?.abort();
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          ws.terminate();
          resolve();
        }, CLOSE_GRACE_MS);
        ws.once('close', () => {
          clearTimeout(force);
          resolve();
        });
        if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'shutdown');
        else ws.terminate();
      });
    }
    this.#setState('stopped', this.#status.lastError);
    this.emit('stopped');
  }

  /** Sends on the open socket; false when not connected. */
  send(data: string | Buffer): boolean {
    if (this.#status.state !== 'connected' || this.#ws?.readyState !== WebSocket.OPEN) return false;
    this.#ws.send(data);
    return true;
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    this.#setState('connecting', this.#status.lastError);
    this.#abort = new AbortController();
    let token: string;
    try {
      token = await this.#o.tokens.current({ minLeftMs: this.#o.tokenMarginMs ?? 300_000, signal: this.#abort.signal });
    } catch (err) {
      if (this.#stopped) return;
      this.#retry(LINK_BACKOFF, `no token: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    if (this.#stopped) return;
    const url = new URL(this.#o.wsUrl);
    url.searchParams.set('botId', this.#o.botId);
    let ws: WebSocket;
    try {
      ws = new WebSocket(url, {
        headers: { Authorization: `Bearer ${token}` },
        perMessageDeflate: false,
        followRedirects: false,
        maxPayload: MAX_CLOUD_MESSAGE_BYTES,
        closeTimeout: CLOSE_GRACE_MS,
        ...(this.#o.lookup && { lookup: this.#o.lookup }),
      });
    } catch (err) {
      // The request could not even be built (a bad URL or token): renew, and retry with backoff.
      this.#o.tokens.invalidate(token);
      this.#retry(this.#o.backoff ?? LINK_BACKOFF, `cannot open the WebSocket: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    this.#ws = ws;
    this.#token = token;
    this.#ending = undefined;
    const handshake = this.#handshakeDeadline(ws);
    ws.on('unexpected-response', (_req, res) => this.#onRejected(ws, res));
    ws.on('open', () => {
      clearTimeout(handshake);
      this.#onOpen(ws);
    });
    ws.on('message', (data, isBinary) => this.#onMessage(ws, data, isBinary));
    ws.on('pong', () => {
      clearTimeout(this.#pongTimer);
      this.#unauthorizedStreak = 0;
    });
    ws.on('error', (err) => {
      if (ws === this.#ws && !this.#ending) this.#ending = { kind: 'drop', reason: describeSocketError(err) };
    });
    ws.on('close', (code, reason) => {
      clearTimeout(handshake);
      this.#onClose(ws, code, reason.toString('utf8'));
    });
  }

  /** ws's handshakeTimeout restarts on every byte: bound connect, upgrade and any refusal body in total. */
  #handshakeDeadline(ws: WebSocket): NodeJS.Timeout {
    const timeoutMs = this.#o.connectTimeoutMs ?? 10_000;
    return setTimeout(() => {
      if (ws !== this.#ws || ws.readyState !== WebSocket.CONNECTING) return;
      this.#ending = { kind: 'drop', reason: `WebSocket handshake not complete within ${timeoutMs} ms` };
      ws.terminate();
    }, timeoutMs);
  }

  #onOpen(ws: WebSocket): void {
    if (ws !== this.#ws) return;
    this.#upSinceMono = this.#o.clock.monoNow();
    this.#startHeartbeat(ws);
    this.#setState('connected', null);
    this.emit('connected');
  }

  /** A handshake refused with an HTTP answer: the body (or the status) says which of the 400 failures. */
  #onRejected(ws: WebSocket, res: IncomingMessage): void {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_ERROR_BODY) body += chunk;
    });
    res.on('end', () => {
      if (ws !== this.#ws) return;
      const failure = parseWsFailure(body) ?? (res.statusCode === 401 ? WsMessage.UNAUTHORIZED : undefined);
      this.#ending = failure ? { kind: 'failure', failure } : { kind: 'drop', reason: `handshake refused with HTTP ${res.statusCode}` };
      ws.terminate();
    });
    res.on('error', () => ws.terminate());
  }

  #onMessage(ws: WebSocket, data: RawData, isBinary: boolean): void {
    if (ws !== this.#ws) return;
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
    if (!isBinary && size <= MAX_ERROR_BODY) {
      const failure = parseWsFailure(data.toString(), { bare: false });
      if (failure) {
        this.#ending = { kind: 'failure', failure };
        ws.close(1000);
        return;
      }
    }
    // The service only talks to a session it accepted: an Unauthorized streak is over.
    this.#unauthorizedStreak = 0;
    this.#o.log.debug({ size, isBinary }, 'message received');
    this.emit('message', data, isBinary);
  }

  #onClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.#ws) return;
    this.#ws = undefined;
    this.#stopHeartbeat();
    if (this.#stopped) return;
    const upMs = this.#upSinceMono === undefined ? 0 : this.#o.clock.monoNow() - this.#upSinceMono;
    this.#upSinceMono = undefined;
    if (shouldReset(upMs, this.#o.stableAfterMs)) this.#backoff = resetBackoff();
    if (upMs >= DISPLACED_RESET_MS) this.#displacedBackoff = resetBackoff();
    const closeFailure = parseWsFailure(reason);
    const ending: Ending = this.#ending ?? (closeFailure ? { kind: 'failure', failure: closeFailure } : { kind: 'drop', reason: `closed (${code}${reason ? ` ${reason}` : ''})` });
    this.#status.reconnects++;
    if (ending.kind === 'failure') {
      this.#onFailure(ending.failure);
      return;
    }
    if (upMs > 0) {
      this.#unauthorizedStreak = 0;
      // An established socket that drops has usually dropped for the whole fleet (a cloud restart):
      // spread the first retry over the window of attempt 2 (4 × base) so the fleet does not return at once.
      this.#backoff = { attempt: Math.max(this.#backoff.attempt, DROPPED_FIRST_ATTEMPT) };
    }
    this.#retry(this.#o.backoff ?? LINK_BACKOFF, ending.reason);
  }

  #onFailure(failure: WsFailure): void {
    switch (failure) {
      case WsMessage.UNAUTHORIZED:
        this.#o.tokens.invalidate(this.#token);
        if (this.#unauthorizedStreak++ === 0) {
          this.#o.log.warn('link refused: Unauthorized; renewing the token and reconnecting at once');
          this.#status.lastError = 'Unauthorized';
          void this.#connect();
          return;
        }
        this.#retry(this.#o.backoff ?? LINK_BACKOFF, 'Unauthorized again with a renewed token: the account configuration may be incomplete — check it with the service provider');
        return;
      case WsMessage.BOT_INVALID:
        this.#schedule('backoff', this.#o.botInvalidRetryMs ?? BOT_INVALID_RETRY_MS, 'botId not found or invalid — check botId in the config or run botlink provision');
        return;
      case WsMessage.REPEAT_SESSION:
        this.#onDisplaced();
        return;
    }
  }

  #onDisplaced(): void {
    const now = this.#o.clock.monoNow();
    this.#displacements = [...this.#displacements.filter((t) => now - t < DUPLICATE_WINDOW_MS), now];
    const count = this.#displacements.length;
    const next = nextBackoff(this.#displacedBackoff, this.#o.displacedBackoff ?? DISPLACED_BACKOFF, this.#random());
    this.#displacedBackoff = next.state;
    const reason =
      count >= DUPLICATE_COUNT
        ? `REPEAT_CLIENT_SESSION: displaced ${count} times in 10 min — two devices share botId ${this.#o.botId}`
        : 'REPEAT_CLIENT_SESSION: another connection holds this botId';
    if (count >= DUPLICATE_COUNT) this.#o.log.error({ botId: this.#o.botId, displacements: count }, reason);
    this.emit('displaced', { count });
    this.#schedule('displaced', next.delayMs, reason);
  }

  #retry(settings: BackoffSettings, reason: string): void {
    const next = nextBackoff(this.#backoff, settings, this.#random());
    this.#backoff = next.state;
    this.#schedule('backoff', next.delayMs, reason);
  }

  #schedule(state: 'backoff' | 'displaced', delayMs: number, reason: string): void {
    if (this.#stopped) return;
    this.#setState(state, reason);
    this.emit('backoff', { delayMs, reason });
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#connect(), delayMs);
  }

  #startHeartbeat(ws: WebSocket): void {
    const interval = this.#o.heartbeatIntervalMs ?? 20_000;
    const timeout = this.#o.heartbeatTimeoutMs ?? 10_000;
    this.#pingTimer = setInterval(() => {
      if (ws !== this.#ws || ws.readyState !== WebSocket.OPEN) return;
      clearTimeout(this.#pongTimer);
      this.#pongTimer = setTimeout(() => {
        if (ws !== this.#ws) return;
        this.#ending = { kind: 'drop', reason: `no pong within ${timeout} ms` };
        ws.terminate();
      }, timeout);
      ws.ping();
    }, interval);
  }

  #stopHeartbeat(): void {
    clearInterval(this.#pingTimer);
    clearTimeout(this.#pongTimer);
  }

  #setState(state: LinkState, lastError: string | null): void {
    const changed = state !== this.#status.state || lastError !== this.#status.lastError;
    if (!changed) return;
    if (state !== this.#status.state) this.#status.since = this.#o.clock.wallNow();
    this.#status.state = state;
    this.#status.lastError = lastError;
    this.#o.log.info({ state, reconnects: this.#status.reconnects, ...(lastError && { reason: lastError }) }, `link ${state}`);
    this.emit('state', this.status);
  }

  #random(): number {
    return (this.#o.random ?? Math.random)();
  }
}

/** ws closes the socket itself (1009, 1002, …) after these; the oversized message deserves its own words. */
function describeSocketError(err: Error): string {
  if ((err as NodeJS.ErrnoException).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
    return `the cloud sent a message over ${MAX_CLOUD_MESSAGE_BYTES} bytes: closed with 1009`;
  }
  return err.message;
}
