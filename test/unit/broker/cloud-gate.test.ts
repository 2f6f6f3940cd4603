import { describe, expect, it } from 'vitest';
import { CloudGate } from '../../../src/broker/cloud-gate.js';
import { Refusal } from '../../../src/broker/refusal.js';

/** A call that resolves when the test says. */
function held(): { call: () => Promise<string>; release(value: string): void } {
  let release!: (value: string) => void;
  const promise = new Promise<string>((r) => (release = r));
  return { call: () => promise, release };
}

describe('CloudGate: at most N cloud calls in flight per replica, the rest in order', () => {
  it('runs up to the limit at once, queues the rest in order, and counts the peak', async () => {
    const gate = new CloudGate(2, 10);
    const calls = [held(), held(), held(), held()];
    const started: number[] = [];
    const results = calls.map((c, i) =>
      gate.run(() => {
        started.push(i);
        return c.call();
      }),
    );
    await Promise.resolve();
    expect([started, gate.stats()]).toEqual([[0, 1], { inFlight: 2, queued: 2, peakInFlight: 2 }]);
    calls[1]?.release('b');
    expect(await results[1]).toBe('b');
    await Promise.resolve();
    expect([started, gate.stats()]).toEqual([[0, 1, 2], { inFlight: 2, queued: 1, peakInFlight: 2 }]);
    calls[0]?.release('a');
    calls[2]?.release('c');
    calls[3]?.release('d');
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd']);
    expect(gate.stats()).toEqual({ inFlight: 0, queued: 0, peakInFlight: 2 });
  });

  it('a failed call frees its slot for the next', async () => {
    const gate = new CloudGate(1, 10);
    const first = gate.run(() => Promise.reject(new Error('cloud down')));
    const second = gate.run(async () => 'next');
    await expect(first).rejects.toThrow('cloud down');
    expect(await second).toBe('next');
    expect(gate.stats().inFlight).toBe(0);
  });

  it('past its queue it refuses at once: 503 cloud-unreachable with Retry-After', async () => {
    const gate = new CloudGate(1, 1);
    const a = held();
    const b = held();
    const running = gate.run(a.call);
    const queued = gate.run(b.call);
    const refused = await gate.run(async () => 'never').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Refusal);
    expect([(refused as Refusal).code, (refused as Refusal).status, (refused as Refusal).retryAfterS]).toEqual([
      'cloud-unreachable',
      503,
      5,
    ]);
    a.release('a');
    b.release('b');
    expect(await Promise.all([running, queued])).toEqual(['a', 'b']);
  });
});
