import type { ServerResponse } from 'node:http';
import type { Clock } from '../../clock.js';
import type { RequestGate } from './request-gate.js';

/**
 * One connection's answers, one request at a time (DESIGN §3.5, issue 27): its gate lets the next
 * request through only once the kernel took the whole of the last answer, so a connection never holds
 * more than the one answer being written. A client that leaves that answer unread (the kernel's buffer,
 * ~200 KiB, full of earlier ones) for `unreadTimeoutMs` is cut.
 */
export class AnswerTurns {
  readonly #gate: RequestGate;
  readonly #clock: Clock;
  readonly #unreadTimeoutMs: number;
  readonly #onCut: (unreadBytes: number) => void;

  constructor(gate: RequestGate, clock: Clock, unreadTimeoutMs: number, onCut: (unreadBytes: number) => void) {
    this.#gate = gate;
    this.#clock = clock;
    this.#unreadTimeoutMs = unreadTimeoutMs;
    this.#onCut = onCut;
  }

  /** Makes the answer to the request the gate let through (`answer` never rejects), then lets the next through once it is taken. */
  async take(res: ServerResponse, answer: () => Promise<void>): Promise<void> {
    const taken = new Promise<void>((resolve) => {
      res.once('finish', resolve).once('close', resolve);
    });
    await answer();
    // `Connection: close`: the connection ends with this answer, and no request after it is read.
    if (!res.shouldKeepAlive) return;
    // Bytes the kernel did not take at once: the client is a full buffer behind, and has a while to catch up.
    const cancel =
      res.writableLength > 0
        ? this.#clock.setTimer(this.#unreadTimeoutMs, () => {
            this.#onCut(res.writableLength);
            this.#gate.destroy();
          })
        : undefined;
    await taken;
    cancel?.();
    this.#gate.next();
  }
}
