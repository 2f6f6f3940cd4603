/** The displacement queue (DisplacementQueue), by the store's clock so that replicas agree on what is due. */
import { all, type Body, run, storeNow } from '../sql.js';
import { CLAIM_DISPLACEMENTS, QUEUE_DISPLACEMENT } from '../statements.js';
import type { DueDisplacement } from '../types.js';

/** BrokerStore.claimDisplacements. */
export function* claimDisplacementsTx(max: number): Body<DueDisplacement[]> {
  const rows = yield* all<DueDisplacement>(CLAIM_DISPLACEMENTS, yield* storeNow(), max);
  return rows.map((r) => ({ botId: r.botId, dueAt: Number(r.dueAt), attempts: Number(r.attempts) }));
}

/** BrokerStore.requeueDisplacement. */
export function* requeueDisplacementTx(botId: string, afterMs: number, attempts: number): Body<void> {
  yield* run(QUEUE_DISPLACEMENT, botId, (yield* storeNow()) + afterMs, attempts);
}
