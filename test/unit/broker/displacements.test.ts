import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  DISPLACE_RETRY_MS,
  DueDisplacements,
  type DueDisplacementsDeps,
  MAX_DISPLACE_ATTEMPTS,
} from '../../../src/broker/displacements.js';
import type { DueDisplacement } from '../../../src/broker/store/types.js';

// The housekeeping's part in revoke --displace (DESIGN §3.7), on a scripted queue and a scripted cloud:
// each due displacement is made once and audited; one the cloud would not take is queued again a minute
// later until MAX_DISPLACE_ATTEMPTS; a stopping broker puts back what it had taken; nothing ever throws.

type Result = Awaited<ReturnType<DueDisplacementsDeps['displace']>>;

/** A queue handing out `batches` in turn (then nothing), a displace answering `answer`, and the audit lines. */
function rig(batches: (DueDisplacement[] | Error)[], answer: (botId: string, signal: AbortSignal) => Promise<Result>) {
  const lines: Record<string, unknown>[] = [];
  const requeued: [string, number, number][] = [];
  const displaced: string[] = [];
  let claims = 0;
  const deps: DueDisplacementsDeps = {
    store: {
      async claimDisplacements() {
        const next = batches[claims++] ?? [];
        if (next instanceof Error) throw next;
        return next;
      },
      async requeueDisplacement(botId, afterMs, attempts) {
        requeued.push([botId, afterMs, attempts]);
      },
    },
    displace(botId, signal) {
      displaced.push(botId);
      return answer(botId, signal);
    },
    // The audit's events and the log's lines, in one list, in the order they came.
    audit: { record: (event, msg, extra) => void lines.push({ audit: event.action, ...event, ...extra, msg }) },
    log: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) }),
  };
  return { due: new DueDisplacements(deps), lines, requeued, displaced, claims: () => claims };
}

const due = (botId: string, attempts = 0): DueDisplacement => ({ botId, dueAt: 1, attempts });
const displaced = async (): Promise<Result> => ({ outcome: 'displaced' });
const cloudAway = async (): Promise<Result> => ({ outcome: 'failed', reason: 'no token for the botId: ECONNREFUSED' });

describe('DueDisplacements', () => {
  it('displaces each due botId once and audits it; queues nothing again', async () => {
    const r = rig([[due('b1'), due('b2')]], displaced);
    await r.due.run();
    expect(r.displaced).toEqual(['b1', 'b2']);
    expect(r.requeued).toEqual([]);
    expect(r.lines).toEqual([
      expect.objectContaining({ audit: 'displace', botId: 'b1', actor: 'broker', outcome: 'displaced', attempt: 1 }),
      expect.objectContaining({ audit: 'displace', botId: 'b2', actor: 'broker', outcome: 'displaced', attempt: 1 }),
    ]);
  });

  it('a failure is queued again a minute later with one attempt more; the last attempt gives up', async () => {
    const r = rig([[due('b1', 0), due('b2', MAX_DISPLACE_ATTEMPTS - 1)]], cloudAway);
    await r.due.run();
    expect(r.requeued).toEqual([['b1', DISPLACE_RETRY_MS, 1]]);
    expect(r.lines).toEqual([
      expect.objectContaining({ botId: 'b1', outcome: 'failed', attempt: 1, reason: 'no token for the botId: ECONNREFUSED' }),
      expect.objectContaining({ botId: 'b2', outcome: 'gave-up', attempt: MAX_DISPLACE_ATTEMPTS }),
    ]);
  });

  it('claims again while a batch comes back full, and stops at the first that is not', async () => {
    const full = Array.from({ length: 16 }, (_, i) => due(`f${i}`));
    const r = rig([full, [due('last')], [due('never')]], displaced);
    await r.due.run();
    expect(r.claims()).toBe(2);
    expect(r.displaced).toHaveLength(17);
  });

  it('a store that fails to answer is told as a warning, never thrown', async () => {
    const r = rig([new Error('store down')], displaced);
    await expect(r.due.run()).resolves.toBeUndefined();
    expect(r.lines).toEqual([expect.objectContaining({ level: 40, err: 'store down' })]);
  });

  it('a round under way is not started twice; stop() puts back what it took, due at once, its attempts unchanged', async () => {
    let started!: () => void;
    const displacing = new Promise<void>((resolve) => (started = resolve));
    const r = rig([[due('b1', 4)]], (_, signal) => {
      started();
      return new Promise((resolve) =>
        signal.addEventListener('abort', () => resolve({ outcome: 'failed', reason: 'the broker is stopping' })),
      );
    });
    const first = r.due.run();
    expect(r.due.run()).toBe(first);
    await displacing;
    await r.due.stop();
    await first;
    expect(r.claims()).toBe(1);
    expect(r.requeued).toEqual([['b1', 0, 4]]);
    expect(r.lines).toEqual([]);
    await r.due.run();
    expect(r.claims()).toBe(1);
  });
});
