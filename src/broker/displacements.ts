/**
 * The second displacement of revoke --displace (DESIGN §3.7): a revoked device may still hold the last token
 * handed out, and open a socket with it until it expires; so the revoke queues a displacement for just after
 * then, and each replica's housekeeping takes due ones off the queue (exactly one replica takes each),
 * displaces, and audits it. One the cloud would not take is tried again a minute later, a bounded number of times.
 */
import type { Logger } from 'pino';
import { messageOf } from '../protocol/errors.js';
import type { AuditTrail } from './audit/trail.js';
import type { Displacement } from './displace.js';
import type { DisplacementQueue } from './store/types.js';

/** How long after the dropped token's expiry the displacement is due: the cloud's clock and the broker's may differ a little. */
export const DISPLACE_AFTER_EXPIRY_MS = 60_000;
/** A displacement that failed is due again this much later. */
export const DISPLACE_RETRY_MS = 60_000;
/** Attempts at one displacement before the broker gives up on it. */
export const MAX_DISPLACE_ATTEMPTS = 10;
/** Displacements taken off the queue at once, and so in flight at once, per replica. */
const CLAIM_BATCH = 16;

/** The actor of the displacement a replica makes once the token expired (the operator's is `cli:<OS user>`). */
export const BROKER_ACTOR = 'broker';

/** The audit event of one displacement (DESIGN §3.7): botId and outcome, never the token it used. */
export function auditDisplacement(
  audit: Pick<AuditTrail, 'record'>,
  actor: string,
  botId: string,
  result: Displacement,
  attempt = 1,
): void {
  const failed = result.outcome === 'failed';
  const outcome = failed ? (actor === BROKER_ACTOR && attempt >= MAX_DISPLACE_ATTEMPTS ? 'gave-up' : 'failed') : 'displaced';
  audit.record({ action: 'displace', actor, botId, outcome }, failed ? 'displacement failed' : 'displacement', {
    attempt,
    ...(failed && { reason: result.reason }),
  });
}

export interface DueDisplacementsDeps {
  store: DisplacementQueue;
  /** One displacement (displace.ts with the broker's cloud client and gate); never rejects. */
  displace(botId: string, signal: AbortSignal): Promise<Displacement>;
  audit: Pick<AuditTrail, 'record'>;
  log: Logger;
}

/** The housekeeping's part in displacement: run() each round; stop() at close. */
export class DueDisplacements {
  readonly #d: DueDisplacementsDeps;
  readonly #stopping = new AbortController();
  #round: Promise<void> | undefined;

  constructor(deps: DueDisplacementsDeps) {
    this.#d = deps;
  }

  /** Displaces what is due; a round still running is not started again. Never rejects. */
  run(): Promise<void> {
    if (this.#stopping.signal.aborted) return Promise.resolve();
    this.#round ??= this.#drain().finally(() => {
      this.#round = undefined;
    });
    return this.#round;
  }

  /** Ends the round under way: what it had claimed and not displaced goes back on the queue, due at once. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#round;
  }

  async #drain(): Promise<void> {
    const { store, log } = this.#d;
    for (;;) {
      const due = await store.claimDisplacements(CLAIM_BATCH).catch((err: unknown) => {
        log.warn({ err: messageOf(err) }, 'taking due displacements failed; trying again next round');
        return [];
      });
      await Promise.all(due.map(({ botId, attempts }) => this.#one(botId, attempts)));
      if (due.length < CLAIM_BATCH || this.#stopping.signal.aborted) return;
    }
  }

  async #one(botId: string, attempts: number): Promise<void> {
    const result = await this.#d.displace(botId, this.#stopping.signal);
    if (result.outcome === 'failed' && this.#stopping.signal.aborted) {
      // Not the cloud's failure: another replica, or this one started again, takes it at once.
      await this.#requeue(botId, 0, attempts);
      return;
    }
    const attempt = attempts + 1;
    auditDisplacement(this.#d.audit, BROKER_ACTOR, botId, result, attempt);
    if (result.outcome === 'failed' && attempt < MAX_DISPLACE_ATTEMPTS) await this.#requeue(botId, DISPLACE_RETRY_MS, attempt);
  }

  async #requeue(botId: string, afterMs: number, attempts: number): Promise<void> {
    try {
      await this.#d.store.requeueDisplacement(botId, afterMs, attempts);
    } catch (err) {
      this.#d.log.warn({ botId, err: messageOf(err) }, 'a displacement could not be queued again: it is lost');
    }
  }
}
