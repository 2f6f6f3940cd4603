import type { IncomingMessage } from 'node:http';
import WebSocket, { type RawData } from 'ws';
import type { Cancel, TimeReader } from '../../clock.js';
import { frameFailure, MAX_FAILURE_BODY, type LinkEnding } from './decide.js';
import { Heartbeat } from './heartbeat.js';
import { MAX_CLOUD_BACKLOG_BYTES, type LinkSettings } from './options.js';
import { CLOSE_GRACE_MS } from './socket.js';
import { closeWithin } from '../../ws-close.js';

/** What an attempt tells the link, only while it is the link's (until it ends or is retired). */
export interface AttemptHooks {
  opened(): void;
  message(frame: Buffer, isBinary: boolean): void;
  /** The socket closed; `upMs` is undefined when it never opened, `accepted` when the cloud answered on it. */
  ended(ending: LinkEnding, upMs: number | undefined, accepted: boolean): void;
}

export interface AttemptDeps {
  clock: TimeReader;
  timer: (ms: number, fn: () => void) => Cancel;
  settings: Pick<LinkSettings, 'connectTimeoutMs' | 'heartbeatIntervalMs' | 'heartbeatTimeoutMs'>;
  hooks: AttemptHooks;
}

/**
 * One cloud WebSocket from its handshake to its close, with everything the link knows of it: the token
 * it presented, what ended it, whether the cloud answered, its heartbeat. Its handlers close over it;
 * once it ends or is retired it tells the link nothing more.
 */
export class Attempt {
  readonly token: string;
  readonly #ws: WebSocket;
  readonly #deps: AttemptDeps;
  readonly #heartbeat: Heartbeat;
  readonly #cancelHandshake: Cancel;
  #live = true;
  /** What ended the socket, when something said so before its close. */
  #ending: LinkEnding | undefined;
  /** The cloud answered (a pong or a message). */
  #accepted = false;
  #upSinceMono: number | undefined;

  constructor(ws: WebSocket, token: string, deps: AttemptDeps) {
    this.#ws = ws;
    this.token = token;
    this.#deps = deps;
    const { settings, timer } = deps;
    this.#heartbeat = new Heartbeat(timer, settings.heartbeatIntervalMs, settings.heartbeatTimeoutMs);
    // ws's handshakeTimeout restarts on every byte: bound connect, upgrade and any refusal body in total.
    this.#cancelHandshake = timer(settings.connectTimeoutMs, () => {
      if (!this.#live || ws.readyState !== WebSocket.CONNECTING) return;
      this.#ending = { kind: 'handshake-timeout' };
      ws.terminate();
    });
    ws.on('unexpected-response', (_req, res) => this.#onRejected(res));
    ws.on('open', () => this.#onOpen());
    ws.on('message', (data, isBinary) => this.#onMessage(data, isBinary));
    ws.on('pong', () => {
      this.#heartbeat.pong();
      this.#accepted = true;
    });
    ws.on('error', (err) => {
      if (this.#live && !this.#ending)
        this.#ending = { kind: 'socket-error', code: (err as NodeJS.ErrnoException).code, message: err.message };
    });
    ws.on('close', (code, reason) => this.#onClose(code, reason.toString('utf8')));
  }

  get isOpen(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  /** Sends a frame; false when the socket is not open or the cloud leaves MAX_CLOUD_BACKLOG_BYTES unread. */
  send(data: string | Buffer, binary: boolean): boolean {
    if (this.#ws.readyState !== WebSocket.OPEN || this.#ws.bufferedAmount >= MAX_CLOUD_BACKLOG_BYTES) return false;
    this.#ws.send(data, { binary });
    return true;
  }

  /** How long the socket has been open (undefined if it never opened), at the moment of asking. */
  upMs(): number | undefined {
    return this.#upSinceMono === undefined ? undefined : this.#deps.clock.monoNow() - this.#upSinceMono;
  }

  /** The link is done with this socket (a replacement, a stop): closes it with 1000, and it reports nothing more. */
  retire(reason: string): Promise<void> {
    this.#stop();
    return closeWithin(this.#ws, 1000, reason, { setTimer: this.#deps.timer }, CLOSE_GRACE_MS);
  }

  #stop(): void {
    this.#live = false;
    this.#cancelHandshake();
    this.#heartbeat.stop();
  }

  #onOpen(): void {
    this.#cancelHandshake();
    if (!this.#live) return;
    this.#upSinceMono = this.#deps.clock.monoNow();
    this.#heartbeat.start(
      this.#ws,
      () => this.#live,
      () => {
        this.#ending = { kind: 'pong-timeout' };
        this.#ws.terminate();
      },
    );
    this.#deps.hooks.opened();
  }

  /** A handshake refused with an HTTP answer: decideLink reads the failure from its body or status. */
  #onRejected(res: IncomingMessage): void {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_FAILURE_BODY) body += chunk;
    });
    res.on('end', () => {
      if (!this.#live) return;
      this.#ending = { kind: 'refused', status: res.statusCode ?? 0, body };
      this.#ws.terminate();
    });
    res.on('error', () => this.#ws.terminate());
  }

  #onMessage(data: RawData, isBinary: boolean): void {
    if (!this.#live) return;
    const size = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
    const failure = frameFailure(isBinary, size, () => data.toString());
    if (failure) {
      this.#ending = { kind: 'frame', failure };
      this.#ws.close(1000);
      return;
    }
    this.#accepted = true;
    // binaryType 'nodebuffer': ws hands every message over as one Buffer.
    this.#deps.hooks.message(data as Buffer, isBinary);
  }

  #onClose(code: number, reason: string): void {
    const live = this.#live;
    const upMs = this.upMs();
    this.#stop();
    if (live) this.#deps.hooks.ended(this.#ending ?? { kind: 'closed', code, reason }, upMs, this.#accepted);
  }
}
