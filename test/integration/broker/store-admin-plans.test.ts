import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { devicePageQuery, pendingPageQuery } from '../../../src/broker/store/admin-statements.js';
import { DEVICE_STATES } from '../../../src/broker/store/admin-types.js';
import type { Query } from '../../../src/broker/store/keyset.js';
import { openStore } from '../../../src/broker/store/open.js';
import { openDatabase } from '../../../src/native.js';
import { useHarness } from '../../helpers/harness.js';

// The devices and pending pages' plans on SQLite (DESIGN §3.8: cursor pages over an index, fast for a million
// devices): every side of every filter and start reads its table through an index, and without q the only sorts
// are the merge's, of at most a limit of lines per side (a prefix's sides may sort their matches). PostgreSQL's
// plans were checked the same way at 100,000 devices (scripts/bench/README.md, issue 34): its planner prefers a
// sort to an index on tables as small as a test's.

const { tempDir } = useHarness();
const N = 5_000;

/** Devices 1..N in every state over 10 vendors, by the store's own tables, then ANALYZE. */
const FILL = [
  `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) ` +
    "INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, reason, created_at) SELECT lower(hex(randomblob(16))), 'pk', " +
    "'bot-' || i, 'SN-' || (1000000 + i), 'V' || (i % 10), CASE WHEN i % 50 = 0 THEN 'revoked' ELSE 'active' END, " +
    "CASE WHEN i % 50 = 0 THEN 'revoked' END, 0 FROM s WHERE i % 50 NOT IN (1, 2, 3)",
  `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) ` +
    "INSERT INTO preauth (key_id, public_key, device_id, vendor_id, created_at) SELECT lower(hex(randomblob(16))), 'pk', 'SN-' || (1000000 + i), " +
    "'V' || (i % 10), 0 FROM s WHERE i % 50 = 1",
  `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) ` +
    'INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) ' +
    "SELECT lower(hex(randomblob(16))), 'pk', 'V' || (i % 10), 'SN-' || (1000000 + i), '', 'PHYSICAL_ROBOT', 'n', '192.0.2.1', '192.0.2.1', 0, 0 " +
    'FROM s WHERE i % 50 = 2',
  `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) ` +
    "INSERT INTO tombstones (key_id, public_key, state, at, vendor_id, device_id) SELECT lower(hex(randomblob(16))), 'pk', 'rejected', 0, " +
    "'V' || (i % 10), 'SN-' || (1000000 + i) FROM s WHERE i % 50 = 3",
  "INSERT INTO audit (at, action, actor, key_id, outcome) SELECT 0, 'refusal', 'broker', key_id, 'replayed' FROM keys WHERE rowid % 100 = 7",
  'ANALYZE',
];

/** Every page the admin API can ask for: each filter, first and from a start. */
function pages(): [string, Query, boolean][] {
  const after = { vendorId: 'V3', deviceId: 'SN-1002003', keyId: '8' };
  const out: [string, Query, boolean][] = [];
  for (const vendorId of [undefined, 'V3'])
    for (const q of [undefined, 'SN-100200'])
      for (const start of [null, after]) {
        const label = JSON.stringify({ vendorId, q, after: start !== null });
        for (const state of [undefined, ...DEVICE_STATES])
          out.push([
            `devices ${state} ${label}`,
            devicePageQuery({ state, vendorId, q, after: start, limit: 100 }, 'BINARY'),
            q !== undefined,
          ]);
        out.push([`pending ${label}`, pendingPageQuery({ vendorId, q, after: start, limit: 100 }, 'BINARY'), q !== undefined]);
      }
  return out;
}

describe('the admin pages’ plans on SQLite', () => {
  it('read every table through an index, and sort only what a side has cut at the limit', async () => {
    const path = join(tempDir('botlink-admin-plans-'), 'broker.db');
    await (await openStore(`sqlite:${path}`, { clock: { wallNow: () => Date.now() } })).close();
    const db = openDatabase(path);
    try {
      for (const sql of FILL) db.exec(sql);
      expect((db.prepare('SELECT COUNT(*) AS n FROM keys').get() as { n: number }).n).toBe(N - 300);
      for (const [name, query, prefixed] of pages()) {
        // As the driver binds them: `$n` in the order they appear.
        const values: unknown[] = [];
        const sql = query.sql.replace(/\$(\d+)/g, (_, n: string) => {
          values.push(query.params[Number(n) - 1]);
          return '?';
        });
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...values) as { detail: string }[]).map((p) => p.detail);
        expect(
          plan.filter((d) => /^SCAN (k|d|a)\b/.test(d) && !d.includes(' USING ')),
          name,
        ).toEqual([]);
        if (prefixed) continue;
        // A temporary B-tree sorts the merge (SCAN part/page) or one key's refusals (audit_key), never a table's side.
        const sorted = plan.flatMap((d, i) => (d.startsWith('USE TEMP B-TREE') ? [plan[i - 1] ?? ''] : []));
        expect(
          sorted.filter((before) => !/^SCAN (part\d+|page)$|USING (COVERING )?INDEX audit_key/.test(before)),
          name,
        ).toEqual([]);
      }
    } finally {
      db.close();
    }
  });
});
