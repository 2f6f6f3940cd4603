import WebSocket from 'ws';
import type { Cancel } from '../time/clock.js';

const idle: Cancel = () => undefined;

/** A ping every interval on the link's socket; a pong must answer within the timeout or `onSilent` runs. */
export class Heartbeat {
  readonly #timer: (ms: number, fn: () => void) => Cancel;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  #cancelPing: Cancel = idle;
  #cancelPong: Cancel = idle;

  constructor(timer: (ms: number, fn: () => void) => Cancel, intervalMs: number, timeoutMs: number) {
    this.#timer = timer;
    this.#intervalMs = intervalMs;
    this.#timeoutMs = timeoutMs;
  }

  /** `current` says whether `ws` is still the link's socket: a replaced one is left alone. */
  start(ws: WebSocket, current: () => boolean, onSilent: () => void): void {
    const beat = (): void => {
      this.#cancelPing = this.#timer(this.#intervalMs, () => {
        if (!current() || ws.readyState !== WebSocket.OPEN) return;
        beat();
        this.#cancelPong();
        this.#cancelPong = this.#timer(this.#timeoutMs, () => {
          if (current()) onSilent();
        });
        ws.ping();
      });
    };
    beat();
  }

  pong(): void {
    this.#cancelPong();
  }

  stop(): void {
    this.#cancelPing();
    this.#cancelPong();
  }
}
