/**
 * The broker's connections (DESIGN §3.7): each measured on its own deadline, never on a sweep — closed
 * after 5 s idle (between requests, or before its first byte), 408 when its request head or body has not
 * arrived in 10 s — and capped: `connectionsPerSource` from one source (trusted proxies exempt), and at
 * `connectionsMax` the longest-idle connection (else the one whose head has waited longest) makes room.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Cancel, Clock } from '../clock.js';
import { addressBucket } from './auth/limits.js';
import { plainAddress } from './source.js';

export interface ConnectionLimits {
  max: number;
  perSource: number;
  idleMs: number;
  headMs: number;
  bodyMs: number;
}

/** waiting: no byte yet; head: a head arriving; body: a body arriving; busy: the route at work; idle: between requests. */
type Phase = 'waiting' | 'head' | 'body' | 'busy' | 'idle';

interface Tracked {
  socket: Socket;
  /** The answer of the request whose body is arriving: a late body is answered 408 through it. */
  res: ServerResponse | undefined;
  source: string | undefined;
  phase: Phase;
  /** When the phase began (the clock's monotonic ms). */
  since: number;
  /** socket.bytesRead when the phase began: a byte read since means a request started. */
  bytesAt: number;
  cancel: Cancel;
}

export interface ConnectionStats {
  open: number;
  /** Closed at once: their source held its share, or every connection was at work. */
  refused: number;
  /** Closed for room at connectionsMax. */
  evicted: number;
  /** Closed idle. */
  idleClosed: number;
  /** Answered 408 and closed. */
  timedOut: number;
}

export class ConnectionGuard {
  readonly #limits: ConnectionLimits;
  readonly #clock: Pick<Clock, 'monoNow' | 'setTimer'>;
  readonly #trusted: ReadonlySet<string>;
  readonly #timedOut: (socket: Socket, res: ServerResponse | undefined) => void;
  readonly #open = new Map<Socket, Tracked>();
  readonly #perSource = new Map<string, number>();
  readonly #stats = { refused: 0, evicted: 0, idleClosed: 0, timedOut: 0 };

  /** `timedOut` answers 408 — through the request's answer when its body is late, else on the bare socket — and closes it. */
  constructor(
    limits: ConnectionLimits,
    clock: Pick<Clock, 'monoNow' | 'setTimer'>,
    trusted: ReadonlySet<string>,
    timedOut: (socket: Socket, res: ServerResponse | undefined) => void,
  ) {
    this.#limits = limits;
    this.#clock = clock;
    this.#trusted = trusted;
    this.#timedOut = timedOut;
  }

  /** The server's 'connection': take it, make room for it, or close it at once. */
  accept(socket: Socket): void {
    const peer = plainAddress(socket.remoteAddress ?? '');
    const source = this.#trusted.has(peer) ? undefined : addressBucket(peer);
    if (source !== undefined && (this.#perSource.get(source) ?? 0) >= this.#limits.perSource) return this.#refuse(socket);
    if (this.#open.size >= this.#limits.max && !this.#evictOne()) return this.#refuse(socket);
    const t: Tracked = { socket, res: undefined, source, phase: 'waiting', since: 0, bytesAt: 0, cancel: () => undefined };
    this.#open.set(socket, t);
    if (source !== undefined) this.#perSource.set(source, (this.#perSource.get(source) ?? 0) + 1);
    socket.once('close', () => this.#forget(t));
    this.#enter(t, 'waiting');
  }

  /** The server's 'request': the head arrived; the body must follow in time, then the answer sets it idle. */
  request(req: IncomingMessage, res: ServerResponse): void {
    const t = this.#open.get(req.socket);
    if (t === undefined) return;
    t.res = res;
    this.#enter(t, req.complete ? 'busy' : 'body');
    req.once('end', () => {
      if (t.phase === 'body') this.#enter(t, 'busy');
    });
    res.once('finish', () => {
      t.res = undefined;
      if (this.#open.has(t.socket) && !t.socket.destroyed) this.#enter(t, 'idle');
    });
  }

  stats(): ConnectionStats {
    return { open: this.#open.size, ...this.#stats };
  }

  #enter(t: Tracked, phase: Phase): void {
    t.cancel();
    t.phase = phase;
    t.since = this.#clock.monoNow();
    t.bytesAt = t.socket.bytesRead;
    const { idleMs, headMs, bodyMs } = this.#limits;
    if (phase === 'busy') t.cancel = () => undefined;
    else if (phase === 'waiting' || phase === 'idle') t.cancel = this.#clock.setTimer(idleMs, () => this.#idleEnds(t));
    else t.cancel = this.#clock.setTimer(phase === 'head' ? headMs - idleMs : bodyMs, () => this.#late(t));
  }

  /** The idle time is up: closed, unless a request began meanwhile, whose head then has the rest of its time. */
  #idleEnds(t: Tracked): void {
    if (t.socket.bytesRead === t.bytesAt) {
      this.#stats.idleClosed++;
      t.socket.destroy();
      return;
    }
    const since = t.since;
    this.#enter(t, 'head');
    t.since = since;
  }

  #late(t: Tracked): void {
    this.#stats.timedOut++;
    this.#timedOut(t.socket, t.phase === 'body' ? t.res : undefined);
  }

  /** At connectionsMax: the longest-idle connection goes, else the one whose head has waited longest; none at work is taken. */
  #evictOne(): boolean {
    let victim: Tracked | undefined;
    for (const phases of [['waiting', 'idle'], ['head']] as const) {
      for (const t of this.#open.values()) {
        if ((phases as readonly Phase[]).includes(t.phase) && (victim === undefined || t.since < victim.since)) victim = t;
      }
      if (victim) break;
    }
    if (victim === undefined) return false;
    this.#stats.evicted++;
    victim.socket.destroy();
    this.#forget(victim);
    return true;
  }

  #refuse(socket: Socket): void {
    this.#stats.refused++;
    socket.destroy();
  }

  #forget(t: Tracked): void {
    if (!this.#open.delete(t.socket)) return;
    t.cancel();
    if (t.source === undefined) return;
    const left = (this.#perSource.get(t.source) ?? 1) - 1;
    if (left === 0) this.#perSource.delete(t.source);
    else this.#perSource.set(t.source, left);
  }
}
