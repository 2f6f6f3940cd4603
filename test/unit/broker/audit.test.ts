import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AuditQueue, foldOf } from '../../../src/broker/audit/queue.js';
import { PRUNE_BATCH, pruneAudit } from '../../../src/broker/audit/retention.js';
import { MinuteTally } from '../../../src/broker/audit/tally.js';
import { AuditTrail } from '../../../src/broker/audit/trail.js';
import { startHousekeeping } from '../../../src/broker/housekeeping.js';
import { statementSizes, writeOrder } from '../../../src/broker/store/rules/audit.js';
import type { AuditPrune, AuditRow } from '../../../src/broker/store/types.js';
import { auditRow } from '../../helpers/broker-store.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const DAY = 86_400_000;

const row = (over: Partial<AuditRow> = {}): AuditRow => auditRow({ at: 0, ...over });
const refusal = (fold: string, count = 1): AuditRow => row({ action: 'refusal', outcome: 'replayed', fold, count });

describe('foldOf: a signed refusal’s aggregation key', () => {
  it('is one per keyId, code and minute', () => {
    expect(foldOf('k1', 'replayed', 60_000)).toBe(foldOf('k1', 'replayed', 119_999));
    expect(foldOf('k1', 'replayed', 60_000)).not.toBe(foldOf('k1', 'replayed', 120_000));
    expect(foldOf('k1', 'replayed', 60_000)).not.toBe(foldOf('k2', 'replayed', 60_000));
    expect(foldOf('k1', 'replayed', 60_000)).not.toBe(foldOf('k1', 'rate-limited', 60_000));
  });
});

describe('AuditQueue: rows waiting for the store, bounded', () => {
  it('folds a refusal into the waiting row of its fold, whatever the bound', () => {
    const q = new AuditQueue(2);
    expect(q.push(refusal('f1'))).toBe(true);
    expect(q.push(row())).toBe(true);
    expect(q.push(row())).toBe(false);
    expect(q.push(refusal('f1', 3))).toBe(true);
    expect([q.size, q.dropped]).toEqual([2, 1]);
    expect(q.take(10)).toEqual([refusal('f1', 4), row()]);
    // Taken, the fold waits no more: the next refusal of it is a row of its own.
    expect(q.push(refusal('f1'))).toBe(true);
    expect(q.size).toBe(1);
  });

  it('takes the oldest first, and puts a failed batch back in front, merging a fold queued again meanwhile', () => {
    const q = new AuditQueue(10);
    for (const r of [row({ outcome: 'a' }), refusal('f1', 2), row({ outcome: 'b' })]) q.push(r);
    const batch = q.take(2);
    expect(batch.map((r) => r.outcome)).toEqual(['a', 'replayed']);
    q.push(refusal('f1', 5));
    q.putBack(batch);
    expect(q.size).toBe(3);
    const again = q.take(10);
    expect(again.map((r) => [r.outcome, r.count])).toEqual([
      ['a', 1],
      ['replayed', 7],
      ['b', 1],
    ]);
  });

  it('drops what passes the bound when a batch comes back, newest first, and counts it', () => {
    const q = new AuditQueue(3);
    for (const outcome of ['a', 'b', 'c']) q.push(row({ outcome }));
    const batch = q.take(2);
    q.push(row({ outcome: 'd' }));
    q.push(refusal('f9'));
    q.putBack(batch);
    expect(q.dropped).toBe(2);
    expect(q.take(10).map((r) => r.outcome)).toEqual(['a', 'b', 'c']);
    // The dropped fold waits no more.
    expect(q.push(refusal('f9'))).toBe(true);
    expect(q.size).toBe(1);
  });
});

describe('MinuteTally: refusals per key and minute, for the log lines', () => {
  it('gives a minute once it has ended, with each key’s count, bounded', () => {
    const t = new MinuteTally<{ key: string }>(2);
    expect(t.add('a', { key: 'a' }, 60_000)).toBeUndefined();
    t.add('a', { key: 'a' }, 60_001);
    t.add('b', { key: 'b' }, 60_002);
    t.add('c', { key: 'c' }, 60_003);
    expect(t.take(119_999)).toBeUndefined();
    expect(t.take(120_000)).toEqual({
      minute: 60_000,
      entries: [
        { fields: { key: 'a' }, count: 2 },
        { fields: { key: 'b' }, count: 1 },
      ],
      overflow: 1,
    });
    expect(t.pending).toBe(false);
    expect(t.take(500_000)).toBeUndefined();
  });

  it('a refusal in a new minute hands over the one before; force takes the minute under way', () => {
    const t = new MinuteTally<string>(10);
    t.add('a', 'a', 0);
    expect(t.add('a', 'a', 60_000)).toEqual({ minute: 0, entries: [{ fields: 'a', count: 1 }], overflow: 0 });
    expect(t.take(60_001, true)).toEqual({ minute: 60_000, entries: [{ fields: 'a', count: 1 }], overflow: 0 });
  });
});

describe('the audit rule: batches as statements', () => {
  it('cuts a batch into full statements, then powers of two', () => {
    expect(statementSizes(0)).toEqual([]);
    expect(statementSizes(1)).toEqual([1]);
    expect(statementSizes(200)).toEqual([128, 64, 8]);
    expect(statementSizes(256)).toEqual([256]);
    expect(statementSizes(600)).toEqual([256, 256, 64, 16, 8]);
    for (let n = 0; n < 1000; n++) expect(statementSizes(n).reduce((a, b) => a + b, 0)).toBe(n);
  });

  it('writes events first, then folds in one order, so two replicas never lock them crosswise', () => {
    const ordered = writeOrder([refusal('k2/x/0'), row({ outcome: 'a' }), refusal('k1/x/0'), row({ outcome: 'b' })]);
    expect(ordered.map((r) => r.fold ?? r.outcome)).toEqual(['a', 'b', 'k1/x/0', 'k2/x/0']);
  });
});

/** A store whose writes the test sees, and fails while `failing`. */
function fakeStore() {
  const writes: AuditRow[][] = [];
  const store = {
    failing: false,
    writes,
    async writeAudit(rows: readonly AuditRow[]) {
      if (store.failing) throw new Error('store down');
      writes.push(rows.map((r) => ({ ...r })));
    },
  };
  return store;
}

/** A trail flushing each second (the tests step its clock by that) unless told 'default', `o` over it. */
function trail(o: ConstructorParameters<typeof AuditTrail>[1] = {}, flushMs: number | 'default' = 1_000) {
  const clock = new ManualClock({ wall: 600_000 });
  const store = fakeStore();
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const options = flushMs === 'default' ? o : { flushMs, ...o };
  return { clock, store, lines, audit: new AuditTrail({ store, log, clock }, options) };
}

const event = { action: 'token', actor: 'device', botId: 'bot-1', keyId: 'k1', source: '192.0.2.1', outcome: 'sign' } as const;

describe('AuditTrail: every event a log line at once and a row in a batch', () => {
  it('writes the line at once, and the row within flushMs, with the clock’s time', async () => {
    const { clock, store, lines, audit } = trail();
    audit.record(event, 'token issued', { extra: 1 });
    expect(lines).toEqual([
      expect.objectContaining({
        audit: 'token',
        at: 600_000,
        actor: 'device',
        vendorId: null,
        botId: 'bot-1',
        keyId: 'k1',
        codeId: null,
        outcome: 'sign',
        extra: 1,
        msg: 'token issued',
      }),
    ]);
    expect(store.writes).toEqual([]);
    await clock.advance(999);
    expect(store.writes).toEqual([]);
    await clock.advance(1);
    expect(store.writes).toEqual([[{ ...row(), at: 600_000, deviceId: null, vendorId: null, outcome: 'sign', codeId: null }]]);
    // Nothing waits: no timer is left armed.
    expect(clock.pending()).toEqual([]);
  });

  it('by default a row waits 5 s for its write, folding meanwhile', async () => {
    const { clock, store, audit } = trail({}, 'default');
    audit.recordFolded(event, 'token issued');
    await clock.advance(4_999);
    audit.recordFolded(event, 'token issued');
    expect(store.writes).toEqual([]);
    await clock.advance(1);
    expect(store.writes.map((w) => w.map((r) => r.count))).toEqual([[2]]);
  });

  it('writes a full batch at once, without waiting for the timer', async () => {
    const { clock, store, audit } = trail({ batchRows: 4 });
    for (let i = 0; i < 9; i++) audit.record(event, 'token issued');
    await clock.advance(0);
    expect(store.writes.map((w) => w.length)).toEqual([4, 4]);
    await clock.advance(1000);
    expect(store.writes.map((w) => w.length)).toEqual([4, 4, 1]);
  });

  it('keeps a batch the store refused for the next flush; past the bound drops rows, counted, their lines still written', async () => {
    const { clock, store, lines, audit } = trail({ maxQueued: 3 });
    store.failing = true;
    for (let i = 0; i < 5; i++) audit.record(event, 'token issued');
    expect(lines).toHaveLength(5);
    expect(audit.stats()).toEqual({ queued: 3, dropped: 2 });
    await clock.advance(1000);
    expect(audit.stats()).toEqual({ queued: 3, dropped: 2 });
    expect(lines.filter((l) => l['level'] === 40)).toHaveLength(1);
    await clock.advance(1000);
    // Said once per failing spell, not at every flush.
    expect(lines.filter((l) => l['level'] === 40)).toHaveLength(1);
    store.failing = false;
    await clock.advance(1000);
    expect(store.writes.map((w) => w.length)).toEqual([3]);
    expect(audit.stats()).toEqual({ queued: 0, dropped: 2 });
  });

  it('folds a flood of one key’s signed refusals into one row, and tells it in one line at the minute’s end', async () => {
    const { clock, store, lines, audit } = trail();
    for (let i = 0; i < 50; i++) audit.refusedSigned({ keyId: 'k1', code: 'replayed', source: '192.0.2.1', botId: 'bot-1' });
    audit.refusedSigned({ keyId: 'k2', code: 'replayed', source: '192.0.2.1' });
    await clock.advance(1000);
    expect(store.writes).toEqual([
      [
        expect.objectContaining({
          action: 'refusal',
          keyId: 'k1',
          botId: 'bot-1',
          outcome: 'replayed',
          count: 50,
          fold: foldOf('k1', 'replayed', 600_000),
        }),
        expect.objectContaining({ keyId: 'k2', count: 1 }),
      ],
    ]);
    expect(lines).toEqual([]);
    await clock.advance(59_000);
    expect(lines).toEqual([
      expect.objectContaining({ audit: 'refusal', at: 600_000, keyId: 'k1', outcome: 'replayed', count: 50, signed: true }),
      expect.objectContaining({ audit: 'refusal', at: 600_000, keyId: 'k2', outcome: 'replayed', count: 1, signed: true }),
    ]);
    expect(clock.pending()).toEqual([]);
  });

  it('writes nothing to the store for unsigned refusals: one line per source (/64) and code per minute', async () => {
    const { clock, store, lines, audit } = trail();
    for (let i = 0; i < 30; i++) audit.refusedUnsigned(`2001:db8:1:2::${i}`, 'unknown-key');
    audit.refusedUnsigned('192.0.2.9', 'bad-signature');
    await clock.advance(60_000);
    expect(store.writes).toEqual([]);
    expect(lines).toEqual([
      expect.objectContaining({
        audit: 'refusal',
        keyId: null,
        source: '2001:db8:1:2::/64',
        outcome: 'unknown-key',
        count: 30,
        signed: false,
      }),
      expect.objectContaining({ audit: 'refusal', source: '192.0.2.9', outcome: 'bad-signature', count: 1, signed: false }),
    ]);
  });

  it('on close tells the minute under way and writes what waits', async () => {
    const { store, lines, audit } = trail();
    audit.record(event, 'token issued');
    audit.refusedUnsigned('192.0.2.9', 'not-found');
    await audit.close();
    expect(store.writes.map((w) => w.length)).toEqual([1]);
    expect(lines.map((l) => l['audit'])).toEqual(['token', 'refusal']);
  });

  it('room() waits while a batch or more waits, so a caller recording many drops none', async () => {
    const { store, audit } = trail({ batchRows: 10, maxQueued: 10 });
    for (let i = 0; i < 95; i++) {
      audit.record(event, 'device pre-authorised');
      await audit.room();
    }
    await audit.flush();
    expect(audit.stats()).toEqual({ queued: 0, dropped: 0 });
    expect(store.writes.flat()).toHaveLength(95);
  });
});

describe('pruneAudit: retention', () => {
  it('deletes every row past auditRetentionDays, then token events past 30 days, batch after batch from where the last ended, until one finds none', async () => {
    const asked: AuditPrune[] = [];
    const left = { all: PRUNE_BATCH + 5, token: 3 };
    const store = {
      async pruneAudit(p: AuditPrune) {
        asked.push(p);
        const pass = p.action === null ? 'all' : 'token';
        const deleted = Math.min(left[pass], p.limit);
        left[pass] -= deleted;
        return { deleted, reached: p.from + 7 };
      },
    };
    const now = 1000 * DAY;
    expect(await pruneAudit(store, 400, now)).toBe(PRUNE_BATCH + 8);
    // Until a batch deletes nothing: a batch short of the limit may be another replica's doing.
    expect(asked).toEqual([
      { action: null, from: 0, before: now - 400 * DAY, limit: PRUNE_BATCH },
      { action: null, from: 7, before: now - 400 * DAY, limit: PRUNE_BATCH },
      { action: null, from: 14, before: now - 400 * DAY, limit: PRUNE_BATCH },
      { action: 'token', from: 0, before: now - 30 * DAY, limit: PRUNE_BATCH },
      { action: 'token', from: 7, before: now - 30 * DAY, limit: PRUNE_BATCH },
    ]);
    // A retention shorter than a token's keeps tokens no longer than the rest.
    asked.length = 0;
    await pruneAudit(store, 7, now);
    expect(asked.map((p) => p.before)).toEqual([now - 7 * DAY, now - 7 * DAY]);
  });

  it('housekeeping sweeps each minute and prunes a minute after start, then daily', async () => {
    const clock = new ManualClock({ wall: 1000 * DAY });
    const calls: string[] = [];
    const store = {
      async sweep() {
        calls.push('sweep');
      },
      async pruneAudit(p: AuditPrune) {
        calls.push(`prune ${p.action ?? 'all'}`);
        return { deleted: 0, reached: p.from };
      },
    };
    const displacements = {
      async run() {
        calls.push('displacements');
      },
    };
    const pending = {
      async drop() {
        calls.push('pending');
      },
    };
    const stop = startHousekeeping({ store, clock, log: pino({ level: 'silent' }), auditRetentionDays: 400, displacements, pending });
    await clock.advance(60_000);
    expect(calls.sort()).toEqual(['displacements', 'pending', 'prune all', 'prune token', 'sweep']);
    calls.length = 0;
    await clock.advance(DAY - 60_000);
    expect(calls.filter((c) => c.startsWith('prune'))).toEqual([]);
    await clock.advance(60_000);
    expect(calls.filter((c) => c.startsWith('prune'))).toEqual(['prune all', 'prune token']);
    stop();
    calls.length = 0;
    await clock.advance(DAY);
    expect(calls).toEqual([]);
  });
});
