import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { type LinkStateData, linkStateFrame } from '../../protocol/conversation.js';
import type { Clock } from '../../clock.js';
import { closeWithin, cutAfter } from '../../ws-close.js';
import { APP_CLOSE_GRACE_MS, stateChanged } from './relay-decide.js';

/** What kind of local client a peer is, and how much it may leave unread before it is closed with 1008. */
export interface PeerKind {
  /** For log lines and the close reason: "app", "observer". */
  name: string;
  maxBacklogBytes: number;
}

export interface PeerOptions {
  kind: PeerKind;
  clock: Clock;
  log: Logger;
  /** A frame from the peer while it is attached; left out, what it sends is ignored. */
  onMessage?: (data: Buffer, isBinary: boolean) => void;
  /** The peer left (it closed, failed, fell behind, or was let go): called once. */
  onLeft: (peer: LocalPeer, why: 'closed' | 'slow') => void;
}

/**
 * One WebSocket client of the local API (the conversing app or an observer): its socket, the
 * LINK_STATE it was last told, its backlog limit and its close-with-grace. Sends never wait: a peer
 * that stops reading is closed, so no local client can slow the cloud socket or another client.
 */
export class LocalPeer {
  readonly #ws: WebSocket;
  readonly #clock: Clock;
  readonly #kind: PeerKind;
  readonly #log: Logger;
  readonly #onLeft: PeerOptions['onLeft'];
  #left = false;
  #lastState: LinkStateData | undefined;

  constructor(ws: WebSocket, opts: PeerOptions) {
    this.#ws = ws;
    this.#clock = opts.clock;
    this.#kind = opts.kind;
    this.#log = opts.log;
    this.#onLeft = opts.onLeft;
    const { onMessage } = opts;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (!this.#left && onMessage) onMessage(data as Buffer, isBinary);
    });
    ws.on('error', (err) => {
      opts.log.debug({ err: err.message }, `${opts.kind.name} socket failed`);
      // ws has sent its close (1009 for an oversized frame) but stopped reading: a peer still writing
      // would never see the handshake through, and ws would hold the socket for 30 s.
      this.leave();
      void cutAfter(ws, opts.clock, APP_CLOSE_GRACE_MS);
    });
    ws.on('close', (code) => {
      opts.log.debug({ code }, `${opts.kind.name} left`);
      this.leave();
    });
  }

  /** Attached and open: frames sent now reach it. */
  get open(): boolean {
    return !this.#left && this.#ws.readyState === WebSocket.OPEN;
  }

  /** Sends one frame; false, and the peer closed with 1008, once it leaves its backlog limit unread. */
  send(data: Buffer | string, isBinary: boolean): boolean {
    if (!this.open) return false;
    this.#ws.send(data, { binary: isBinary });
    const { maxBacklogBytes, name } = this.#kind;
    if (this.#ws.bufferedAmount < maxBacklogBytes) return true;
    this.#log.warn({ waiting: this.#ws.bufferedAmount }, `the ${name} stopped reading: closed with 1008`);
    this.leave('slow');
    void this.close(1008, `${name} too slow: ${maxBacklogBytes / (1024 * 1024)} MiB unread`);
    return false;
  }

  /** Tells the peer the link's state: always (on attach), else only when it changed since the last it got. */
  sendState(data: LinkStateData, always: boolean): void {
    if (!always && !stateChanged(this.#lastState, data)) return;
    this.#lastState = data;
    this.send(linkStateFrame(data), false);
  }

  /** The peer is no longer attached (its close may still be under way); the first call tells onLeft. */
  leave(why: 'closed' | 'slow' = 'closed'): void {
    if (this.#left) return;
    this.#left = true;
    this.#onLeft(this, why);
  }

  /** Closes the peer, and cuts it when it does not finish the closing handshake (ws would wait 30 s); resolves once closed or cut. */
  close(code: number, reason: string, graceMs = APP_CLOSE_GRACE_MS): Promise<void> {
    this.leave();
    return closeWithin(this.#ws, code, reason, this.#clock, graceMs);
  }

  /** At the daemon's stop: LINK_STATE `stopped`, then a close 1001; resolves once the socket is closed or cut. */
  async stop(stopped: LinkStateData, graceMs: number): Promise<void> {
    const wasOpen = this.open;
    this.leave();
    if (!wasOpen) {
      // Its close is under way but it never finished it (a half-open peer): ws would hold it for 30 s.
      this.#ws.terminate();
      return;
    }
    this.#ws.send(linkStateFrame(stopped));
    await this.close(1001, 'botlink is stopping', graceMs);
  }
}
