/** Every way the broker turns a request down (DESIGN §3.7): a code of the wire contract, its status, a message. */
import { REFUSAL_STATUS, type RefusalCode } from '../protocol/broker.js';

export type { RefusalCode } from '../protocol/broker.js';

/** A refusal the client is told about; `extra` joins `{code, msg}` in the body (serverTime, cloudCode). */
export class Refusal extends Error {
  readonly code: RefusalCode;
  readonly status: number;
  readonly extra: Record<string, number>;
  /** Seconds, for 429 and 503. */
  readonly retryAfterS: number | undefined;

  constructor(code: RefusalCode, message: string, opts: { extra?: Record<string, number>; retryAfterS?: number } = {}) {
    super(message);
    this.name = 'Refusal';
    this.code = code;
    this.status = REFUSAL_STATUS[code];
    this.extra = opts.extra ?? {};
    this.retryAfterS = opts.retryAfterS;
  }
}
