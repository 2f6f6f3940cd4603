import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import WebSocket, { type RawData } from 'ws';
import { fixOf, messageOf } from '../../protocol/errors.js';
import { systemRandom, type Cancel, type Random } from '../time/clock.js';
import {
  decideLink,
  frameFailure,
  initialLinkMemory,
  MAX_FAILURE_BODY,
  type LinkDecision,
  type LinkEnding,
  type LinkMemory,
} from './decide.js';
import { MAX_CLOUD_MESSAGE_BYTES, resolveLinkSettings, type LinkOptions, type LinkSettings } from './options.js';

export { DROPPED_FIRST_ATTEMPT } from './decide.js';
export { MAX_CLOUD_MESSAGE_BYTES, type LinkOptions, type TokenSource } from './options.js';

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

/** A closing handshake the peer leaves unfinished is cut after this (ws would wait 30 s). */
const CLOSE_GRACE_MS = 2000;

const idle: Cancel = () => undefined;

/**
 * Keeps exactly one authenticated WebSocket open: connects with a fresh token, watches it with
 * ping/pong, and reconnects as decideLink says. Emits 'state' (LinkStatus), 'connected', 'message'
 * (data, isBinary), 'backoff' ({delayMs, reason}), 'displaced' ({count}) and 'stopped'.
 */
export class LinkSupervisor extends EventEmitter {
  readonly #o: LinkOptions;
  readonly #s: LinkSettings;
  readonly #random: Random;
  #status: LinkStatus;
  #memory: LinkMemory = initialLinkMemory();
  #ws: WebSocket | undefined;
  #token: string | undefined;
  /** What ended the current socket, when something said so before its close. */
  #ending: LinkEnding | undefined;
  /** The cloud answered the current socket (a pong or a message). */
  #accepted = false;
  #upSinceMono: number | undefined;
  #cancelRetry: Cancel = idle;
  #cancelPing: Cancel = idle;
  #cancelPong: Cancel = idle;
  #abort: AbortController | undefined;
  #stopped = true;

  constructor(opts: LinkOptions) {
    super();
    this.#o = opts;
    this.#s = resolveLinkSettings(opts);
    this.#random = opts.random ?? systemRandom;
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
    this.#cancelRetry();
    this.#stopHeartbeat();
    this.#abort?.abort();
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        const cancelForce = this.#timer(CLOSE_GRACE_MS, () => {
          ws.terminate();
          resolve();
        });
        ws.once('close', () => {
          cancelForce();
          resolve();
        });
        if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'shutdown');
        else ws.terminate();
      });
    }
    this.#setState('stopped', this.#status.lastError, this.#status.fix);
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
    this.#setState('connecting', this.#status.lastError, this.#status.fix);
    this.#abort = new AbortController();
    let token: string;
    try {
      token = await this.#o.tokens.current({ minLeftMs: this.#s.tokenMarginMs, signal: this.#abort.signal });
    } catch (err) {
      if (this.#stopped) return;
      this.#decide({ kind: 'no-token', message: messageOf(err), fix: fixOf(err) }, undefined);
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
      this.#decide({ kind: 'unopenable', message: messageOf(err) }, token);
      return;
    }
    this.#ws = ws;
    this.#token = token;
    this.#ending = undefined;
    this.#accepted = false;
    const cancelHandshake = this.#handshakeDeadline(ws);
    ws.on('unexpected-response', (_req, res) => this.#onRejected(ws, res));
    ws.on('open', () => {
      cancelHandshake();
      this.#onOpen(ws);
    });
    ws.on('message', (data, isBinary) => this.#onMessage(ws, data, isBinary));
    ws.on('pong', () => {
      this.#cancelPong();
      this.#accepted = true;
    });
    ws.on('error', (err) => {
      if (ws === this.#ws && !this.#ending)
        this.#ending = { kind: 'socket-error', code: (err as NodeJS.ErrnoException).code, message: err.message };
    });
    ws.on('close', (code, reason) => {
      cancelHandshake();
      this.#onClose(ws, code, reason.toString('utf8'));
    });
  }

  /** ws's handshakeTimeout restarts on every byte: bound connect, upgrade and any refusal body in total. */
  #handshakeDeadline(ws: WebSocket): Cancel {
    return this.#timer(this.#s.connectTimeoutMs, () => {
      if (ws !== this.#ws || ws.readyState !== WebSocket.CONNECTING) return;
      this.#ending = { kind: 'handshake-timeout' };
      ws.terminate();
    });
  }

  #onOpen(ws: WebSocket): void {
    if (ws !== this.#ws) return;
    this.#upSinceMono = this.#o.clock.monoNow();
    this.#startHeartbeat(ws);
    this.#setState('connected', null);
    this.emit('connected');
  }

  /** A handshake refused with an HTTP answer: decideLink reads the failure from its body or status. */
  #onRejected(ws: WebSocket, res: IncomingMessage): void {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_FAILURE_BODY) body += chunk;
    });
    res.on('end', () => {
      if (ws !== this.#ws) return;
      this.#ending = { kind: 'refused', status: res.statusCode ?? 0, body };
      ws.terminate();
    });
    res.on('error', () => ws.terminate());
  }

  #onMessage(ws: WebSocket, data: RawData, isBinary: boolean): void {
    if (ws !== this.#ws) return;
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
    const failure = frameFailure(isBinary, size, () => data.toString());
    if (failure) {
      this.#ending = { kind: 'frame', failure };
      ws.close(1000);
      return;
    }
    this.#accepted = true;
    this.#o.log.debug({ size, isBinary }, 'message received');
    this.emit('message', data, isBinary);
  }

  #onClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.#ws) return;
    this.#ws = undefined;
    this.#stopHeartbeat();
    if (this.#stopped) return;
    const upMs = this.#upSinceMono === undefined ? undefined : this.#o.clock.monoNow() - this.#upSinceMono;
    this.#upSinceMono = undefined;
    this.#status.reconnects++;
    this.#decide(this.#ending ?? { kind: 'closed', code, reason }, this.#token, upMs, this.#accepted);
  }

  /** Asks decideLink what this ending means and carries it out. */
  #decide(ending: LinkEnding, token: string | undefined, upMs?: number, accepted = false): void {
    const facts = { ...this.#memory, now: this.#o.clock.monoNow(), accepted, ...(upMs !== undefined && { upMs }) };
    const d = decideLink(ending, facts, this.#s, this.#random());
    this.#memory = d.memory;
    if (d.invalidateToken) this.#o.tokens.invalidate(token);
    if (d.sharedBotId) this.#o.log.error({ botId: this.#o.botId, displacements: d.displaced?.count, fix: d.fix }, d.reason);
    if (d.displaced) this.emit('displaced', d.displaced);
    this.#carryOut(d);
  }

  #carryOut({ next, reason, fix }: LinkDecision): void {
    if (next.state === 'connecting') {
      this.#o.log.warn(`link refused: ${reason}; renewing the token and reconnecting at once`);
      this.#status.lastError = reason;
      delete this.#status.fix;
      void this.#connect();
      return;
    }
    if (this.#stopped) return;
    this.#setState(next.state, reason, fix);
    this.emit('backoff', { delayMs: next.delayMs, reason });
    this.#cancelRetry();
    this.#cancelRetry = this.#timer(next.delayMs, () => void this.#connect());
  }

  /** A ping every interval; a pong must answer within the timeout or the socket is cut. */
  #startHeartbeat(ws: WebSocket): void {
    const beat = (): void => {
      this.#cancelPing = this.#timer(this.#s.heartbeatIntervalMs, () => {
        if (ws !== this.#ws || ws.readyState !== WebSocket.OPEN) return;
        beat();
        this.#cancelPong();
        this.#cancelPong = this.#timer(this.#s.heartbeatTimeoutMs, () => {
          if (ws !== this.#ws) return;
          this.#ending = { kind: 'pong-timeout' };
          ws.terminate();
        });
        ws.ping();
      });
    };
    beat();
  }

  #stopHeartbeat(): void {
    this.#cancelPing();
    this.#cancelPong();
  }

  /** The link's timers hold the process open, as the global timers they replace did; stop() cancels them all. */
  #timer(ms: number, fn: () => void): Cancel {
    return this.#o.clock.setTimer(ms, fn, { ref: true });
  }

  #setState(state: LinkState, lastError: string | null, fix?: string): void {
    const changed = state !== this.#status.state || lastError !== this.#status.lastError || fix !== this.#status.fix;
    if (!changed) return;
    if (state !== this.#status.state) this.#status.since = this.#o.clock.wallNow();
    this.#status.state = state;
    this.#status.lastError = lastError;
    if (fix === undefined) delete this.#status.fix;
    else this.#status.fix = fix;
    this.#o.log.info(
      { state, reconnects: this.#status.reconnects, ...(lastError && { reason: lastError }), ...(fix && { fix }) },
      `link ${state}`,
    );
    this.emit('state', this.status);
  }
}
