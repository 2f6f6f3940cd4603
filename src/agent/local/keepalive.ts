import { randomUUID } from 'node:crypto';
import { ContentType } from '../../protocol/conversation.js';
import type { Cancel, Clock } from '../../clock.js';

/** The guide asks for a JSON PING about every 30 s (DESIGN §1.7); a protocol-level ping may not count. */
export const KEEPALIVE_INTERVAL_MS = 30_000;
/** A PING of ours unanswered this long is forgotten, so a cloud that never answers cannot swallow an app's PONGs. */
export const KEEPALIVE_PONG_WAIT_MS = 30_000;
/** A PONG is a small frame: a larger one is never parsed to check. */
const MAX_PONG_BYTES = 4 * 1024;

/** When the next PING of ours is due: an interval after the last frame that went up on this connection. */
export function keepaliveDelay(lastUpMono: number, nowMono: number, intervalMs: number): number {
  return Math.max(0, lastUpMono + intervalMs - nowMono);
}

/** Whether a text frame from the cloud is a PONG: a substring search first, so other frames are never parsed. */
export function isPong(frame: Buffer): boolean {
  if (frame.length > MAX_PONG_BYTES || !frame.includes(ContentType.PONG)) return false;
  try {
    const parsed: unknown = JSON.parse(frame.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && (parsed as Record<string, unknown>)['contentType'] === ContentType.PONG;
  } catch {
    return false;
  }
}

export interface KeepaliveOptions {
  clock: Clock;
  /** Sends a text frame on the open cloud socket; false when it could not go. */
  send(text: string): boolean;
  intervalMs?: number;
}

/**
 * The guide's JSON keepalive while no app keeps the line: a PING (fresh mid) once the connection has
 * been quiet for an interval. An attached app pings for itself, as the guide asks of every client.
 * The service's PONG carries a mid of its own, so ours are told apart by count: PONGs come back in
 * order, and as many as we have PINGs outstanding are ours, even once an app has attached.
 */
export class CloudKeepalive {
  readonly #clock: Clock;
  readonly #send: (text: string) => boolean;
  readonly #intervalMs: number;
  #open = false;
  #appAttached = false;
  #lastUpMono = 0;
  /** Monotonic send times of our PINGs not answered yet, oldest first. */
  #outstanding: number[] = [];
  #cancel: Cancel = () => undefined;

  constructor(opts: KeepaliveOptions) {
    this.#clock = opts.clock;
    this.#send = opts.send;
    this.#intervalMs = opts.intervalMs ?? KEEPALIVE_INTERVAL_MS;
  }

  /** A new cloud connection is open: its greeting is its first activity, and no PING of ours is on it. */
  connected(): void {
    this.#open = true;
    this.#outstanding = [];
    this.#activity();
  }

  /** The cloud connection is gone: nothing to keep, and its PONGs will never come. */
  disconnected(): void {
    this.#open = false;
    this.#outstanding = [];
    this.#cancel();
  }

  appAttached(): void {
    this.#appAttached = true;
    this.#cancel();
  }

  /** The app left: the line is ours to keep again, an interval after its last frame. */
  appDetached(): void {
    this.#appAttached = false;
    this.#arm();
  }

  /** A frame went up on the cloud connection (the app's): the line was used. */
  upFrame(): void {
    this.#lastUpMono = this.#clock.monoNow();
  }

  /** Whether a cloud frame is the PONG to a PING of ours; such a frame is no app's business. */
  ownsPong(frame: Buffer, isBinary: boolean): boolean {
    if (isBinary || this.#outstanding.length === 0 || !isPong(frame)) return false;
    const oldest = this.#clock.monoNow() - KEEPALIVE_PONG_WAIT_MS;
    this.#outstanding = this.#outstanding.filter((sentAt) => sentAt >= oldest);
    return this.#outstanding.shift() !== undefined;
  }

  stop(): void {
    this.disconnected();
  }

  #activity(): void {
    this.#lastUpMono = this.#clock.monoNow();
    this.#arm();
  }

  #arm(): void {
    this.#cancel();
    if (!this.#open || this.#appAttached) return;
    const delay = keepaliveDelay(this.#lastUpMono, this.#clock.monoNow(), this.#intervalMs);
    this.#cancel = this.#clock.setTimer(delay, () => this.#ping());
  }

  #ping(): void {
    if (!this.#open || this.#appAttached) return;
    const now = this.#clock.monoNow();
    if (this.#send(JSON.stringify({ mid: randomUUID(), contentType: ContentType.PING }))) this.#outstanding.push(now);
    this.#lastUpMono = now;
    this.#arm();
  }
}
