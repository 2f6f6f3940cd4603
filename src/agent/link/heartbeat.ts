import WebSocket from 'ws';
import type { Cancel } from '../../clock.js';

const idle: Cancel = () => undefined;

/**
 * A ping every interval on the link's socket; a pong must answer within the timeout or `onSilent` runs.
 * A timeout as long as the interval (the default) is judged at the next ping, with no timer of its own:
 * a deadline timer wakes the process even when the pong cancelled it (Node keeps its wake-up armed),
 * three times a minute on an idle device. A shorter timeout gets that timer.
 */
export class Heartbeat {
  readonly #timer: (ms: number, fn: () => void) => Cancel;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  #cancelPing: Cancel = idle;
  #cancelDeadline: Cancel = idle;
  #answered = true;

  /** timeoutMs ≤ intervalMs (the config refuses a longer one). */
  constructor(timer: (ms: number, fn: () => void) => Cancel, intervalMs: number, timeoutMs: number) {
    this.#timer = timer;
    this.#intervalMs = intervalMs;
    this.#timeoutMs = Math.min(timeoutMs, intervalMs);
  }

  /** `current` says whether `ws` is still the link's socket: a replaced one is left alone. */
  start(ws: WebSocket, current: () => boolean, onSilent: () => void): void {
    this.#answered = true;
    const beat = (): void => {
      this.#cancelPing = this.#timer(this.#intervalMs, () => {
        if (!current() || ws.readyState !== WebSocket.OPEN) return;
        // The last ping went unanswered for a whole interval, which is at least the timeout.
        if (!this.#answered) return onSilent();
        beat();
        this.#answered = false;
        if (this.#timeoutMs < this.#intervalMs) {
          this.#cancelDeadline = this.#timer(this.#timeoutMs, () => {
            if (current()) onSilent();
          });
        }
        ws.ping();
      });
    };
    beat();
  }

  pong(): void {
    this.#answered = true;
    this.#cancelDeadline();
    this.#cancelDeadline = idle;
  }

  stop(): void {
    this.#cancelPing();
    this.#cancelDeadline();
    this.#cancelDeadline = idle;
  }
}
