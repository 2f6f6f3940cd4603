import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import WebSocket, { type RawData } from 'ws';
import { isConversationEvent } from '../../protocol/conversation.js';
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
import { Heartbeat } from './heartbeat.js';
import { MAX_CLOUD_BACKLOG_BYTES, resolveLinkSettings, type LinkOptions, type LinkSettings } from './options.js';
import { ConnChoice, type ConnParams } from './params.js';
import { closeWithin, openCloudSocket } from './socket.js';
import type { LinkState, LinkStateChange, LinkStatus, ParamsOutcome } from './status.js';

export { DROPPED_FIRST_ATTEMPT } from './decide.js';
export { MAX_CLOUD_MESSAGE_BYTES, type LinkOptions, type TokenSource } from './options.js';
export { NO_PARAMS, type ConnParams } from './params.js';
export type { LinkState, LinkStateChange, LinkStatus, ParamsOutcome } from './status.js';

/** The greeting is a small event: a larger frame is never searched for it. */
const MAX_GREETING_BYTES = 16 * 1024;

const idle: Cancel = () => undefined;

/**
 * Keeps exactly one authenticated WebSocket open: connects with a fresh token, watches it with
 * ping/pong, and reconnects as decideLink says. Emits 'state' (LinkStateChange), 'connected', 'message'
 * (data: Buffer, isBinary), 'backoff' ({delayMs, reason}), 'displaced' ({count}) and 'stopped'.
 */
export class LinkSupervisor extends EventEmitter {
  readonly #o: LinkOptions;
  readonly #s: LinkSettings;
  readonly #random: Random;
  readonly #choice: ConnChoice;
  #status: LinkStatus;
  #memory: LinkMemory = initialLinkMemory();
  #ws: WebSocket | undefined;
  #token: string | undefined;
  /** The last CFG_BOT_EVENT of the current socket, replayed to an app that attaches to it. */
  #greeting: Buffer | undefined;
  /** A socket being closed to reopen with new parameters. */
  #replacing: Promise<void> | undefined;
  /** What ended the current socket, when something said so before its close. */
  #ending: LinkEnding | undefined;
  /** The cloud answered the current socket (a pong or a message). */
  #accepted = false;
  #upSinceMono: number | undefined;
  #cancelRetry: Cancel = idle;
  readonly #heartbeat: Heartbeat;
  #abort: AbortController | undefined;
  #stopped = true;

  constructor(opts: LinkOptions) {
    super();
    this.#o = opts;
    this.#s = resolveLinkSettings(opts);
    this.#random = opts.random ?? systemRandom;
    this.#choice = new ConnChoice(opts.newSessionId ?? randomUUID);
    this.#heartbeat = new Heartbeat((ms, fn) => this.#timer(ms, fn), this.#s.heartbeatIntervalMs, this.#s.heartbeatTimeoutMs);
    this.#status = { state: 'stopped', since: opts.clock.wallNow(), reconnects: 0, lastError: null };
  }

  get status(): LinkStatus {
    return { ...this.#status };
  }

  /** The sessionId of the connection: the app's when it decided one, else the current (or last) socket's. */
  get sessionId(): string | null {
    return this.#choice.sessionId;
  }

  /** The open connection's CFG_BOT_EVENT greeting, as the cloud sent it. */
  get greeting(): Buffer | undefined {
    return this.#status.state === 'connected' ? this.#greeting : undefined;
  }

  /** Takes an app's parameters for the cloud connection; a socket opened with others is replaced at once. */
  useParams(params: ConnParams): ParamsOutcome {
    this.#choice.want(params);
    const ws = this.#ws;
    if (this.#stopped || !ws) return 'later';
    if (this.#choice.matchesOpened) return 'kept';
    this.#ws = undefined;
    this.#greeting = undefined;
    this.#upSinceMono = undefined;
    this.#heartbeat.stop();
    this.#setState('connecting', this.#status.lastError, this.#status.fix);
    this.#o.log.info('the app asked for other connection parameters: reconnecting with them');
    this.#replacing = closeWithin(ws, 'parameters changed', (ms, fn) => this.#timer(ms, fn)).then(() => {
      this.#replacing = undefined;
      void this.#connect();
    });
    return 'reconnecting';
  }

  /** No app decides any more: later connections get fresh sessions; the open one is kept, for no app when `spent`. */
  forgetParams(spent = false): void {
    this.#choice.forget(spent);
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
    this.#heartbeat.stop();
    this.#abort?.abort();
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws) await closeWithin(ws, 'shutdown', (ms, fn) => this.#timer(ms, fn));
    await this.#replacing;
    this.#setState('stopped', this.#status.lastError, this.#status.fix);
    this.emit('stopped');
  }

  /** Sends on the open socket, as a text or a binary frame; false when not connected or the cloud is not reading. */
  send(data: string | Buffer, binary = typeof data !== 'string'): boolean {
    if (this.#status.state !== 'connected' || this.#ws?.readyState !== WebSocket.OPEN) return false;
    if (this.#ws.bufferedAmount >= MAX_CLOUD_BACKLOG_BYTES) return false;
    this.#ws.send(data, { binary });
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
    let ws: WebSocket;
    try {
      ws = openCloudSocket(this.#choice.open(this.#o.wsUrl, this.#o.botId), token, this.#o.lookup);
    } catch (err) {
      this.#decide({ kind: 'unopenable', message: messageOf(err) }, token);
      return;
    }
    this.#ws = ws;
    this.#token = token;
    this.#greeting = undefined;
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
      this.#heartbeat.pong();
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
    this.#heartbeat.start(
      ws,
      () => ws === this.#ws,
      () => {
        this.#ending = { kind: 'pong-timeout' };
        ws.terminate();
      },
    );
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
    // binaryType 'nodebuffer': ws hands every message over as one Buffer.
    const frame = data as Buffer;
    if (!isBinary && size <= MAX_GREETING_BYTES && isConversationEvent(frame, 'CFG_BOT_EVENT')) this.#greeting = frame;
    this.emit('message', frame, isBinary);
  }

  #onClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.#ws) return;
    this.#ws = undefined;
    this.#greeting = undefined;
    this.#heartbeat.stop();
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
    this.#setState(next.state, reason, fix, next.delayMs);
    this.emit('backoff', { delayMs: next.delayMs, reason });
    this.#cancelRetry();
    this.#cancelRetry = this.#timer(next.delayMs, () => void this.#connect());
  }

  /** The link's timers hold the process open, as the global timers they replace did; stop() cancels them all. */
  #timer(ms: number, fn: () => void): Cancel {
    return this.#o.clock.setTimer(ms, fn, { ref: true });
  }

  #setState(state: LinkState, lastError: string | null, fix?: string, retryInMs?: number): void {
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
    const change: LinkStateChange = { ...this.status, ...(retryInMs !== undefined && { retryInMs }) };
    this.emit('state', change);
  }
}
