import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import WebSocket, { type RawData } from 'ws';
import { isConversationEvent } from '../../protocol/conversation.js';
import { fixOf, messageOf } from '../../protocol/errors.js';
import { systemRandom, type Cancel, type Random } from '../time/clock.js';
import type { BackoffState } from '../token/backoff.js';
import {
  decideLink,
  frameFailure,
  initialLinkMemory,
  MAX_FAILURE_BODY,
  withdrawAppReconnect,
  type LinkDecision,
  type LinkEnding,
  type LinkMemory,
  type ReconnectCause,
} from './decide.js';
import { Heartbeat } from './heartbeat.js';
import { MAX_CLOUD_BACKLOG_BYTES, resolveLinkSettings, type LinkOptions, type LinkSettings } from './options.js';
import { ConnChoice, type ConnParams } from './params.js';
import { closeWithin, openCloudSocket } from './socket.js';
import type { LinkState, LinkStateChange, LinkStatus, ParamsOutcome } from './status.js';

export { DROPPED_FIRST_ATTEMPT, type ReconnectCause } from './decide.js';
export { MAX_CLOUD_MESSAGE_BYTES, type LinkOptions, type TokenSource } from './options.js';
export { NO_PARAMS, type ConnParams } from './params.js';
export type { LinkState, LinkStateChange, LinkStatus, ParamsOutcome } from './status.js';

/** The greeting is a small event: a larger frame is never searched for it. */
const MAX_GREETING_BYTES = 16 * 1024;

const idle: Cancel = () => undefined;

/** What the link tells its listeners (the relay, the daemon), by event name. */
export interface LinkEvents {
  /** A change of state, lastError or fix; `retryInMs` while it waits. */
  state: [LinkStateChange];
  /** A socket opened: the relay sends the app's voice config first on it. */
  connected: [];
  /** A frame from the cloud, as it came (binaryType 'nodebuffer'). */
  message: [data: Buffer, isBinary: boolean];
  backoff: [{ delayMs: number; reason: string }];
  /** Displaced by another connection for the botId; `count` within the displaced window. */
  displaced: [{ readonly count: number }];
  stopped: [];
}

/**
 * Keeps exactly one authenticated WebSocket open: connects with a fresh token, watches it with
 * ping/pong, and reconnects as decideLink says; tells what happens through LinkEvents.
 */
export class LinkSupervisor extends EventEmitter<LinkEvents> {
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
  /**
   * An app-caused reconnect waiting its turn: the open socket stays (the app may leave, or the next
   * one want it) but carries nothing, and the link says `backoff` until the replacement is due.
   */
  #parked: { cancel: Cancel; dueAt: number; backoffBefore: BackoffState } | undefined;
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
    this.#status = { state: 'stopped', since: opts.clock.wallNow(), reconnects: 0, reconnectsByCause: {}, lastError: null };
  }

  get status(): LinkStatus {
    return { ...this.#status, reconnectsByCause: { ...this.#status.reconnectsByCause } };
  }

  /** The sessionId of the connection: the app's when it decided one, else the current (or last) socket's. */
  get sessionId(): string | null {
    return this.#choice.sessionId;
  }

  /** The open connection's CFG_BOT_EVENT greeting, as the cloud sent it. */
  get greeting(): Buffer | undefined {
    return this.#status.state === 'connected' ? this.#greeting : undefined;
  }

  /**
   * Takes an app's parameters for the cloud connection. A socket opened with others is replaced as
   * decideLink says: at once, or after a wait (paced, DESIGN §3.5), counted either way.
   */
  useParams(params: ConnParams): ParamsOutcome {
    this.#choice.want(params);
    const ws = this.#ws;
    if (this.#stopped || !ws) return 'later';
    const match = this.#choice.match;
    if (match === 'kept' || match === 'reused') {
      this.#unpark();
      return match;
    }
    // A replacement is already due: it opens with whatever parameters are wanted by then.
    if (this.#parked) return 'reconnecting';
    const backoffBefore = this.#memory.backoff;
    // A socket up for stableAfterMs has earned a fresh schedule, as after a drop.
    const upMs = this.#upSinceMono === undefined ? undefined : this.#o.clock.monoNow() - this.#upSinceMono;
    const d = this.#decisionFor({ kind: 'app', cause: match === 'reattach' ? 'app-reattach' : 'app-params' }, upMs);
    if (d.next.state === 'connecting') {
      this.#replace(ws, d.cause);
      return 'reconnecting';
    }
    const delayMs = d.next.delayMs;
    // As decideLink recorded it, so that calling it off finds it.
    const dueAt = d.memory.appReconnects.at(-1) ?? 0;
    this.#parked = {
      dueAt,
      backoffBefore,
      cancel: this.#timer(delayMs, () => {
        this.#parked = undefined;
        const m = this.#choice.match;
        if (m === 'kept' || m === 'reused') this.#resume();
        else if (this.#ws) this.#replace(this.#ws, d.cause);
      }),
    };
    this.#setState('backoff', d.reason, undefined, delayMs, true);
    return 'reconnecting';
  }

  /** No app decides any more: later connections get fresh sessions; the open one is kept, for no app when `spent`. */
  forgetParams(spent = false): void {
    this.#choice.forget(spent);
    // Nobody waits for the replacement any more: the next app decides again.
    this.#unpark();
  }

  /** Cancels a paced replacement that is no longer wanted: it never happened, and the open socket serves again. */
  #unpark(): void {
    const parked = this.#parked;
    if (!parked) return;
    this.#parked = undefined;
    parked.cancel();
    this.#memory = withdrawAppReconnect(this.#memory, parked.dueAt, parked.backoffBefore);
    this.#resume();
  }

  /** The open socket serves again after a wait for a replacement that is not needed any more. */
  #resume(): void {
    this.#setState(this.#ws?.readyState === WebSocket.OPEN ? 'connected' : 'connecting', null, undefined, undefined, true);
  }

  /** Closes the open socket and opens one with the wanted parameters: a reconnect an app caused. */
  #replace(ws: WebSocket, cause: ReconnectCause): void {
    this.#count(cause);
    this.#ws = undefined;
    this.#greeting = undefined;
    this.#upSinceMono = undefined;
    this.#heartbeat.stop();
    this.#setState('connecting', this.#status.lastError, this.#status.fix);
    this.#o.log.info({ cause }, 'reconnecting with the parameters an app asked for');
    this.#replacing = closeWithin(ws, 'parameters changed', (ms, fn) => this.#timer(ms, fn)).then(() => {
      this.#replacing = undefined;
      void this.#connect();
    });
  }

  #count(cause: ReconnectCause): void {
    this.#status.reconnects++;
    this.#status.reconnectsByCause[cause] = (this.#status.reconnectsByCause[cause] ?? 0) + 1;
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
    this.#parked?.cancel();
    this.#parked = undefined;
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
    // Opened while a paced replacement waits: it carries nothing unless an app takes it (#unpark).
    if (this.#parked) return;
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
    // The socket a paced replacement waited to close is gone anyway: the retry below takes the app's parameters.
    if (this.#parked) {
      this.#parked.cancel();
      this.#memory = withdrawAppReconnect(this.#memory, this.#parked.dueAt, this.#parked.backoffBefore);
      this.#parked = undefined;
    }
    const upMs = this.#upSinceMono === undefined ? undefined : this.#o.clock.monoNow() - this.#upSinceMono;
    this.#upSinceMono = undefined;
    this.#decide(this.#ending ?? { kind: 'closed', code, reason }, this.#token, upMs, this.#accepted, true);
  }

  /** decideLink's answer for `ending`, its memory kept; the open socket's up-time counts toward a reset. */
  #decisionFor(ending: LinkEnding, upMs?: number, accepted = false): LinkDecision {
    const facts = { ...this.#memory, now: this.#o.clock.monoNow(), accepted, ...(upMs !== undefined && { upMs }) };
    const d = decideLink(ending, facts, this.#s, this.#random());
    this.#memory = d.memory;
    return d;
  }

  /** Asks decideLink what this ending means and carries it out; `counted`: a socket closed, so this is a reconnect. */
  #decide(ending: LinkEnding, token: string | undefined, upMs?: number, accepted = false, counted = false): void {
    const d = this.#decisionFor(ending, upMs, accepted);
    if (counted) this.#count(d.cause);
    if (d.invalidateToken) this.#o.tokens.invalidate(token);
    if (d.sharedBotId) this.#o.log.error({ botId: this.#o.botId, displacements: d.displaced?.count, fix: d.fix }, d.reason);
    if (d.displaced) this.emit('displaced', d.displaced);
    this.#carryOut(d);
  }

  #carryOut({ next, reason, fix }: LinkDecision): void {
    // Of a socket's endings only Unauthorized reconnects at once (decideLink), with the token invalidated.
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

  /** `quiet`: a wait for a paced replacement, begun or called off, which an app in a loop can cause at will: debug only. */
  #setState(state: LinkState, lastError: string | null, fix?: string, retryInMs?: number, quiet = false): void {
    const changed = state !== this.#status.state || lastError !== this.#status.lastError || fix !== this.#status.fix;
    if (!changed) return;
    if (state !== this.#status.state) this.#status.since = this.#o.clock.wallNow();
    this.#status.state = state;
    this.#status.lastError = lastError;
    if (fix === undefined) delete this.#status.fix;
    else this.#status.fix = fix;
    this.#o.log[quiet ? 'debug' : 'info'](
      { state, reconnects: this.#status.reconnects, ...(lastError && { reason: lastError }), ...(fix && { fix }) },
      `link ${state}`,
    );
    const change: LinkStateChange = { ...this.status, ...(retryInMs !== undefined && { retryInMs }) };
    this.emit('state', change);
  }
}
