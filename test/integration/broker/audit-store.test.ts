import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { foldOf } from '../../../src/broker/audit/queue.js';
import { PRUNE_BATCH, pruneAudit } from '../../../src/broker/audit/retention.js';
import { openStore } from '../../../src/broker/store/open.js';
import type { AuditRow, BrokerStore, StoreKind } from '../../../src/broker/store/types.js';
import { openDatabase } from '../../../src/native.js';
import { auditRow, AUDIT_ROWS_SQL } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { type PostgresServer, startPostgres } from '../../helpers/postgres.js';

// The audit's rules (DESIGN §3.7) on both stores: rows written in batches, refusals folded per key, code
// and minute across replicas, and pruned by age and action.

const clock = { wallNow: () => Date.now() };
const { tempDir, cleanups } = useHarness();
const DAY = 86_400_000;

let server: PostgresServer;
beforeAll(async () => {
  server = await startPostgres();
}, 120_000);
afterAll(() => server?.stop(), 60_000);

interface Backend {
  kind: StoreKind;
  /** Two instances on one new store (two replicas, on PostgreSQL), and how to read its audit table. */
  fresh(): Promise<{ a: BrokerStore; b: BrokerStore; rows(): Promise<AuditRow[]> }>;
}

async function opened(spec: string): Promise<BrokerStore> {
  const store = await openStore(spec, { clock });
  cleanups.push(() => store.close());
  return store;
}

/** The table's rows as AuditRow, in the order they were inserted (BIGINT read back as a number on both). */
const asRows = (rows: Record<string, unknown>[]): AuditRow[] =>
  rows.map((r) => ({ ...r, at: Number(r['at']), count: Number(r['count']) }) as AuditRow);

const sqlite: Backend = {
  kind: 'sqlite',
  async fresh() {
    const file = join(tempDir('botlink-broker-audit-'), 'broker.db');
    const [a, b] = [await opened(`sqlite:${file}`), await opened(`sqlite:${file}`)];
    return {
      a,
      b,
      async rows() {
        const db = openDatabase(file, { readonly: true });
        try {
          return asRows(db.prepare(AUDIT_ROWS_SQL).all() as Record<string, unknown>[]);
        } finally {
          db.close();
        }
      },
    };
  },
};

const postgres: Backend = {
  kind: 'postgres',
  async fresh() {
    const url = await server.freshDatabase();
    const [a, b] = [await opened(url), await opened(url)];
    return { a, b, rows: async () => asRows(await server.query(url, AUDIT_ROWS_SQL)) };
  },
};

describe.each([sqlite, postgres])('the audit in the $kind store', (backend) => {
  it('keeps every field of an event, and adds a fold’s later counts to its first row', async () => {
    const { a, rows } = await backend.fresh();
    const event = auditRow({ at: 1000, action: 'enroll', outcome: 'enrolled' });
    const fold = foldOf('k1', 'replayed', 60_000);
    await a.writeAudit([event, auditRow({ at: 60_001, action: 'refusal', outcome: 'replayed', count: 3, fold })]);
    await a.writeAudit([auditRow({ at: 60_500, action: 'refusal', outcome: 'replayed', count: 2, fold, source: '198.51.100.7' })]);
    expect(await rows()).toEqual([event, auditRow({ at: 60_001, action: 'refusal', outcome: 'replayed', count: 5, fold })]);
  });

  it('two replicas folding the same refusals at once leave one row per fold with the summed count', async () => {
    const { a, b, rows } = await backend.fresh();
    const [f1, f2] = [foldOf('k1', 'replayed', 0), foldOf('k2', 'rate-limited', 0)];
    const refusal = (fold: string) => auditRow({ action: 'refusal', fold, outcome: fold.split('/')[1] as string });
    // Each batch names both folds, in either order: the rule writes them in one order, so no two batches deadlock.
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).writeAudit(i % 4 < 2 ? [refusal(f1), refusal(f2)] : [refusal(f2), refusal(f1)])),
    );
    const written = await rows();
    expect(written.map((r) => [r.fold, r.count]).sort()).toEqual([
      [f1, 20],
      [f2, 20],
    ]);
  });

  it('writes a batch whole, in as many statements as it takes, or not at all', async () => {
    const { a, rows } = await backend.fresh();
    await a.writeAudit(Array.from({ length: 600 }, (_, i) => auditRow({ at: i })));
    expect((await rows()).map((r) => r.at)).toEqual(Array.from({ length: 600 }, (_, i) => i));
    // The third row breaks the NOT NULL of outcome: the two before it (another statement) are not kept either.
    const broken = [auditRow({ at: 1_000 }), auditRow({ at: 1_001 }), { ...auditRow({ at: 1_002 }), outcome: null as unknown as string }];
    await expect(a.writeAudit(broken)).rejects.toThrow();
    expect(await rows()).toHaveLength(600);
  });

  it('prunes one batch at a time, oldest first: by age, or by age of one action', async () => {
    const { a, rows } = await backend.fresh();
    await a.writeAudit([
      auditRow({ at: 10, action: 'token' }),
      auditRow({ at: 20, action: 'enroll' }),
      auditRow({ at: 30, action: 'token' }),
      auditRow({ at: 40, action: 'token' }),
      auditRow({ at: 50, action: 'token' }),
    ]);
    expect(await a.pruneAudit({ action: 'token', from: 0, before: 45, limit: 2 })).toEqual({ deleted: 2, reached: 30 });
    expect(await a.pruneAudit({ action: 'token', from: 30, before: 45, limit: 2 })).toEqual({ deleted: 1, reached: 40 });
    expect((await rows()).map((r) => [r.at, r.action])).toEqual([
      [20, 'enroll'],
      [50, 'token'],
    ]);
    expect(await a.pruneAudit({ action: null, from: 0, before: 25, limit: 10 })).toEqual({ deleted: 1, reached: 20 });
    expect(await a.pruneAudit({ action: null, from: 0, before: 25, limit: 10 })).toEqual({ deleted: 0, reached: 0 });
    expect((await rows()).map((r) => r.at)).toEqual([50]);
  });

  it('two replicas pruning at once keep what is young and delete the rest once', async () => {
    const { a, b, rows } = await backend.fresh();
    const now = 1000 * DAY;
    const old = Array.from({ length: 2 * PRUNE_BATCH + 100 }, (_, i) => auditRow({ at: now - 500 * DAY + i, action: 'enroll' }));
    const tokens = Array.from({ length: 300 }, (_, i) => auditRow({ at: now - 40 * DAY + i, action: 'token' }));
    const young = [auditRow({ at: now - 40 * DAY, action: 'rotate' }), auditRow({ at: now - DAY, action: 'token' })];
    await a.writeAudit([...old, ...tokens, ...young]);
    const deleted = await Promise.all([pruneAudit(a, 400, now), pruneAudit(b, 400, now)]);
    expect(deleted[0] + deleted[1]).toBe(old.length + tokens.length);
    expect((await rows()).map((r) => r.action)).toEqual(['rotate', 'token']);
  });
});
