/** A request's bookkeeping (RequestBook), written once: one gated chain (chain.ts) for both spends. */
import { checkChain, type GatedChain } from '../chain.js';
import { type Body, chain, type ChainResult, get, run, storeNow } from '../sql.js';
import { knownKey } from './rows.js';
import { FIND_KEY, KEY_WITH_TOKEN, REQUEST_STEPS, SWEEP_AUDIT_MINUTES, SWEEP_NONCES, SWEEP_WINDOWS } from '../statements.js';
import type {
  KeyRow,
  KeyWithToken,
  KnownKey,
  RequestSpend,
  SpendOutcome,
  TokenRow,
  VerifiedRequestSpend,
  VerifiedSpend,
} from '../types.js';

const OUTPUTS = ['n.ok', 'h.count'];

/** An enrollment's new key: nothing to hold, its nonce and its count. */
export const SPEND = checkChain({ name: 'broker-spend', read: undefined, steps: REQUEST_STEPS, outputs: OUTPUTS });

/** An enrolled key's request: the key and its token read as they were, its spend gated on the key. */
export const SPEND_VERIFIED: GatedChain = checkChain({
  name: 'broker-spend-verified',
  read: KEY_WITH_TOKEN,
  steps: REQUEST_STEPS,
  outputs: OUTPUTS,
});

/** BrokerStore.findKey: the key's row, else its tombstone (its device's fields dropped), else its pending row: one statement. */
export function* findKeyTx(keyId: string): Body<KnownKey | undefined> {
  return knownKey(keyId, yield* get<Record<string, unknown>>(FIND_KEY, keyId));
}

/** BrokerStore.spend. */
export function* spendTx(r: RequestSpend): Body<SpendOutcome> {
  return outcome(yield* chain(SPEND, ...values(r, null, null)), r.countOnly === true);
}

/** BrokerStore.spendVerified. */
export function* spendVerifiedTx(r: VerifiedRequestSpend): Body<VerifiedSpend> {
  const result = yield* chain(SPEND_VERIFIED, ...values(r, r.publicKey, r.now));
  const found = splitKeyWithToken(result.read);
  if (found === undefined) return { key: undefined };
  // The chain wrote only for a key that may spend: active, with the very public key the signature was verified with.
  if (found.key.state !== 'active' || found.key.publicKey !== r.publicKey) return { ...found, spent: undefined };
  return { ...found, spent: outcome(result, r.countOnly === true) };
}

/** The chain's values, in REQUEST_STEPS' order. */
function values(r: RequestSpend, publicKey: string | null, now: number | null): unknown[] {
  const w = r.window;
  const version = r.agentVersion ?? null;
  return [
    r.keyId,
    r.countOnly ? null : r.nonce,
    r.keepUntil,
    publicKey,
    w?.bucket ?? null,
    w?.start ?? null,
    w?.limit ?? null,
    now,
    version,
  ];
}

function outcome({ out }: ChainResult, countOnly: boolean): SpendOutcome {
  const count = out['h.count'];
  return { count: count == null ? undefined : Number(count), replayed: !countOnly && out['n.ok'] == null };
}

/** A KEY_WITH_TOKEN row as the key and, when there is one, its token. */
export function splitKeyWithToken(row: Record<string, unknown> | undefined): KeyWithToken | undefined {
  if (row === undefined || row['keyId'] == null) return undefined;
  const { accessSealed, accessExpiresAt, accessLifetimeS, refreshSealed, refreshExpiresAt, tokenUpdatedAt, ...key } = row;
  const token =
    accessSealed == null
      ? undefined
      : ({
          botId: key['botId'],
          accessSealed,
          accessExpiresAt,
          accessLifetimeS,
          refreshSealed,
          refreshExpiresAt,
          updatedAt: tokenUpdatedAt,
        } as TokenRow);
  return { key: key as unknown as KeyRow, token };
}

/** BrokerStore.sweep: nonces past their keepUntil by the store's clock, rate windows older than `windowsBefore`. */
export function* sweepTx(windowsBefore: number): Body<void> {
  yield* run(SWEEP_NONCES, yield* storeNow());
  yield* run(SWEEP_WINDOWS, windowsBefore);
  yield* run(SWEEP_AUDIT_MINUTES, windowsBefore);
}
