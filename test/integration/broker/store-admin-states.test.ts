import { describe, expect, it } from 'vitest';
import type { DeviceItemRow, DevicePageFilter, PendingPageItem } from '../../../src/broker/store/admin-types.js';
import { pendingBook } from '../../../src/broker/admin/pending-wiring.js';
import { DEVICE_STATES } from '../../../src/broker/store/admin-types.js';
import { systemClock } from '../../../src/clock.js';
import type { BrokerStore, PendingAsk, PendingRow, PreauthRow } from '../../../src/broker/store/types.js';
import { byCode, codeRow, newKey } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { storeBackends } from '../../helpers/store-backends.js';

// The devices pages list keys in every state (DESIGN §3.8: active, revoked, pre-authorised, pending, rejected), and
// the pending page is a keyset page too: on both databases, every filter with cursors, no key lost or repeated
// across the states' boundaries, and the summary's counts those of the listed lines.

const { sqlite, postgres, open } = storeBackends(useHarness(), 'botlink-broker-admin-states-');

interface Line {
  vendorId: string;
  deviceId: string;
  keyId: string;
  botId: string | null;
  state: string;
}

/** Byte order, as the pages sort (UTF-8 bytes, not UTF-16 units). */
const bytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));
const byVendor = (a: Line, b: Line): number => bytes(a.vendorId, b.vendorId) || bytes(a.deviceId, b.deviceId) || bytes(a.keyId, b.keyId);
const byDevice = (a: Line, b: Line): number => bytes(a.deviceId, b.deviceId) || bytes(a.vendorId, b.vendorId) || bytes(a.keyId, b.keyId);

/** What a page with `filter` must list, in its order. */
function expected(lines: Line[], filter: DevicePageFilter): string[] {
  const { state, vendorId, q } = filter;
  return lines
    .filter((l) => state === undefined || l.state === state)
    .filter((l) => vendorId === undefined || l.vendorId === vendorId)
    .filter((l) => q === undefined || l.deviceId.startsWith(q) || (l.botId ?? '').startsWith(q))
    .sort(q === undefined ? byVendor : byDevice)
    .map((l) => `${l.vendorId}/${l.deviceId}/${l.state}/${l.keyId}`);
}

/** Every page of `filter`, `limit` at a time, each from the last line of the one before. */
async function walk<R extends { vendorId: string; deviceId: string; keyId: string }>(
  page: (after: { vendorId: string; deviceId: string; keyId: string } | null, limit: number) => Promise<R[]>,
  limit: number,
): Promise<R[]> {
  const seen: R[] = [];
  for (let after: R | null = null; ; ) {
    const rows = await page(after && { vendorId: after.vendorId, deviceId: after.deviceId, keyId: after.keyId }, limit);
    expect(rows.length).toBeLessThanOrEqual(limit);
    seen.push(...rows);
    const last = rows.at(-1);
    if (rows.length < limit || last === undefined) return seen;
    after = last;
  }
}

const preauthRow = (vendorId: string, deviceId: string): PreauthRow => ({ ...newKey(), deviceId, vendorId, createdAt: Date.now() });

/** A first ask of a new key for (vendorId, deviceId) from `source` at `now`. */
function ask(vendorId: string, deviceId: string, source = '192.0.2.1', now = 1_000): PendingAsk {
  const key = newKey();
  const row: PendingRow = {
    ...key,
    vendorId,
    deviceId,
    appId: '',
    type: 'PHYSICAL_ROBOT',
    name: `board ${deviceId}`,
    source,
    firstAsked: now,
    lastAsked: now,
  };
  const window = { bucket: `ask:${key.keyId}/60000`, start: Math.floor(now / 60_000) * 60_000 };
  return { row, sourceBucket: source, perSource: 10_000, perVendor: 10_000, window };
}

/** A fleet with keys in every state over two vendors, deviceIds chosen so the states interleave in both orders. */
async function fleet(store: BrokerStore): Promise<{ lines: Line[]; waiting: PendingRow[] }> {
  const lines: Line[] = [];
  for (const vendorId of ['V1', 'V2']) {
    const code = codeRow({ vendorId, usesLeft: 10 });
    await store.addCode(code);
    for (const deviceId of ['a-1', 'a_2', 'b-1', 'c']) {
      const c = byCode(code, { deviceId, botId: `bot-${vendorId}-${deviceId}` });
      expect((await store.enroll(c)).outcome).toBe('ok');
      lines.push({ vendorId, deviceId, keyId: c.key.keyId, botId: c.botId, state: 'active' });
    }
    await store.revoke(`bot-${vendorId}-b-1`, Date.now());
    const revoked = lines.find((l) => l.botId === `bot-${vendorId}-b-1`);
    if (revoked) revoked.state = 'revoked';
    const pre = [preauthRow(vendorId, 'a-0'), preauthRow(vendorId, 'b')];
    await store.addPreauth(pre);
    lines.push(...pre.map((p) => ({ vendorId, deviceId: p.deviceId, keyId: p.keyId, botId: null, state: 'preauthorized' })));
  }
  const waiting: PendingRow[] = [];
  // Two keys wait for V1's a-3 (duplicates), one for V1's a, one for V2's b-2; two are rejected (V1 a-1x, V2 a-9).
  for (const [vendorId, deviceId, source] of [
    ['V1', 'a-3', '192.0.2.1'],
    ['V1', 'a-3', '198.51.100.7'],
    ['V1', 'a', '192.0.2.1'],
    ['V2', 'b-2', '198.51.100.7'],
    ['V1', 'a-1x', '192.0.2.1'],
    ['V2', 'a-9', '192.0.2.1'],
  ] as const) {
    const a = ask(vendorId, deviceId, source);
    expect(await store.askPending(a)).toBe('created');
    waiting.push(a.row);
  }
  for (const gone of waiting.splice(4)) {
    expect(await store.rejectPending({ keyId: gone.keyId }, Date.now())).toHaveLength(1);
    lines.push({ vendorId: gone.vendorId, deviceId: gone.deviceId, keyId: gone.keyId, botId: null, state: 'rejected' });
  }
  lines.push(...waiting.map((w) => ({ vendorId: w.vendorId, deviceId: w.deviceId, keyId: w.keyId, botId: null, state: 'pending' })));
  return { lines, waiting };
}

const key = (r: DeviceItemRow): string => `${r.vendorId}/${r.deviceId}/${r.state}/${r.keyId}`;

describe.each([sqlite, postgres])('the devices and pending pages on $kind', (backend) => {
  it('lists keys in every state, each filter and cursor at limits 1 to 3, none lost or repeated, as the summary counts them', async () => {
    const store = await open(await backend.fresh());
    const { lines, waiting } = await fleet(store);
    for (const state of [undefined, ...DEVICE_STATES])
      for (const vendorId of [undefined, 'V1', 'V2'])
        for (const q of [undefined, 'a', 'a-', 'bot-V2', 'zz'])
          for (const limit of [1, 2, 3]) {
            const filter = { state, vendorId, q };
            const rows = await walk((after, n) => store.admin.pageDevices(filter, after, n), limit);
            expect(rows.map(key), JSON.stringify({ ...filter, limit })).toEqual(expected(lines, filter));
          }
    const all = await store.admin.pageDevices({}, null, 500);
    expect(all.map(key)).toEqual(expected(lines, {}));
    // The summary's counts are the listed lines' (one retired key per revoked device here).
    const counted = Object.fromEntries((await store.admin.keptCounts()).filter((c) => c.kind === 'state').map((c) => [c.name, c.n]));
    const listed: Record<string, number> = {};
    for (const r of all) listed[r.state] = (listed[r.state] ?? 0) + 1;
    expect(counted).toEqual(listed);
    expect(Object.keys(listed).sort()).toEqual([...DEVICE_STATES].sort());

    // A pending key's line: no botId, the name it asked with, its last ask as last seen; a rejected key's its tombstone's.
    const [first] = waiting as [PendingRow];
    const pendingLine = all.find((r) => r.keyId === first.keyId);
    expect(pendingLine).toEqual({
      botId: null,
      vendorId: 'V1',
      deviceId: 'a-3',
      keyId: first.keyId,
      state: 'pending',
      lastSeenAt: first.lastAsked,
      agentVersion: null,
      refusalCode: null,
      refusalAt: null,
      name: 'board a-3',
    });
    expect(await store.admin.deviceItemOfKey(first.keyId)).toEqual(pendingLine);
    const rejected = all.find((r) => r.state === 'rejected');
    expect(rejected).toMatchObject({ botId: null, lastSeenAt: null, name: null });
    expect(await store.admin.deviceItemOfKey(rejected?.keyId ?? '')).toEqual(rejected);
    // An enrolled key's line: the name it enrolled with, here none, so its deviceId (DESIGN §3.7).
    const active = all.find((r) => r.state === 'active');
    expect(active).toMatchObject({ botId: expect.stringMatching(/^bot-/), name: active?.deviceId });
  });

  it('pages the waiting keys by keyset, by vendor and deviceId prefix, each with the others that wait for its device', async () => {
    const store = await open(await backend.fresh());
    const { waiting } = await fleet(store);
    const lines = waiting.map((w) => ({ vendorId: w.vendorId, deviceId: w.deviceId, keyId: w.keyId, botId: null, state: 'pending' }));
    for (const vendorId of [undefined, 'V1', 'V2'])
      for (const q of [undefined, 'a', 'a-3', 'b'])
        for (const limit of [1, 2, 3]) {
          const filter = { vendorId, q };
          const rows = await walk((after, n) => store.admin.pagePending(filter, after, n), limit);
          expect(
            rows.map((r) => `${r.vendorId}/${r.deviceId}/pending/${r.keyId}`),
            JSON.stringify({ ...filter, limit }),
          ).toEqual(expected(lines, filter));
        }
    const page = await store.admin.pagePending({ vendorId: 'V1', q: 'a-3' }, null, 10);
    const item = (w: PendingRow): PendingPageItem => ({
      keyId: w.keyId,
      deviceId: w.deviceId,
      vendorId: w.vendorId,
      name: w.name,
      source: w.source,
      firstAsked: w.firstAsked,
      lastAsked: w.lastAsked,
      duplicates: 1,
    });
    expect(page).toEqual(
      waiting
        .slice(0, 2)
        .map(item)
        .sort((a, b) => bytes(a.keyId, b.keyId)),
    );
    expect((await store.admin.pagePending({ q: 'b-2' }, null, 10)).map((r) => r.duplicates)).toEqual([0]);
  });

  it('a pending page of a source block reads on past the pages it reads at once, its cursor losing no key of the block', async () => {
    const store = await open(await backend.fresh());
    // 1,200 keys waiting, one in 150 from 198.51.100.7: the block's keys lie apart, across the store's reads of 500.
    const block: string[] = [];
    for (let i = 0; i < 1_200; i++) {
      const a = ask('V1', `SN-${String(i).padStart(4, '0')}`, i % 150 === 149 ? '198.51.100.7' : '192.0.2.1');
      expect(await store.askPending(a)).toBe('created');
      if (a.row.source === '198.51.100.7') block.push(a.row.keyId);
    }
    const book = pendingBook(store, async () => 'never', systemClock);
    for (const limit of [1, 3, 8]) {
      const rows = await walk((after, n) => book.listPending({ source: '198.51.100.0/24' }, after, n), limit);
      expect(rows.map((r) => r.keyId)).toEqual(block);
    }
    expect(await book.listPending({ source: '203.0.113.0/24' }, null, 5)).toEqual([]);
  });

  it('migration 9 indexes the pending keys and rejected tombstones a store already holds, and pages list them', async () => {
    const spec = await backend.fresh();
    await backend.atVersion(
      spec,
      8,
      "INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) VALUES ('k-wait', 'pk', 'V1', 'SN-2', '', 'PHYSICAL_ROBOT', 'hall', '192.0.2.1', '192.0.2.1', 5, 6); " +
        "INSERT INTO tombstones (key_id, public_key, state, at, vendor_id, device_id) VALUES ('k-gone', 'pk', 'rejected', 7, 'V1', 'SN-1')",
    );
    const store = await open(spec);
    expect((await store.admin.pageDevices({}, null, 10)).map(key)).toEqual(['V1/SN-1/rejected/k-gone', 'V1/SN-2/pending/k-wait']);
    expect((await store.admin.pageDevices({ state: 'pending' }, null, 10)).map((r) => [r.name, r.lastSeenAt])).toEqual([['hall', 6]]);
    expect((await store.admin.pagePending({}, null, 10)).map((r) => r.keyId)).toEqual(['k-wait']);
  });
});
