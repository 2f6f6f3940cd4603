import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Publisher, STATUS_PACE } from '../../../src/agent/daemon/publish.js';
import { readStatusFile, statusDoc, type StatusDoc } from '../../../src/agent/daemon/status.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const { tempDir } = useHarness();

/** A Publisher on a manual clock whose status is a counter of changes (in relay.framesUp), writing to a temp runtimeDir. */
function publisher() {
  const clock = new ManualClock();
  const runtimeDir = join(tempDir('publisher-'), 'run');
  let changes = 0;
  const status = (): StatusDoc =>
    statusDoc({
      identity: { kind: 'bot', id: 'bot-1' },
      mode: 'sign',
      now: clock.wallNow(),
      tokens: undefined,
      link: undefined,
      relay: { attached: false, framesUp: changes, framesDown: 0, dropped: 0, observers: 0 },
    });
  const p = new Publisher({ env: {}, runtimeDir, metricsFile: null, clock, log: pino({ level: 'silent' }), status, metrics: () => '' });
  const change = (): void => {
    changes++;
    p.changed();
  };
  return { clock, runtimeDir, p, change, written: () => readStatusFile(runtimeDir)?.relay.framesUp };
}

describe('Publisher: the one path of every status change (issue 26 item 4)', () => {
  it('a daemon that never published (refused at start) writes nothing at stop', () => {
    const { runtimeDir, p } = publisher();
    p.stop();
    expect(existsSync(runtimeDir)).toBe(false);
  });

  it('stop writes the last status at once, a write that was due included, and nothing is scheduled after it', async () => {
    const { clock, runtimeDir, p, change, written } = publisher();
    for (let i = 0; i < STATUS_PACE.burst + 5; i++) change();
    expect(written()).toBe(STATUS_PACE.burst);
    expect(clock.pending()).toEqual([STATUS_PACE.everyMs]);
    p.stop();
    expect(written()).toBe(STATUS_PACE.burst + 5);
    expect(clock.pending()).toEqual([]);
    expect(readdirSync(runtimeDir)).toEqual(['status.json']);
  });

  it('a change after stop (a renewal settling while the runtime closes) changes nothing any more', async () => {
    const { clock, p, change, written } = publisher();
    change();
    p.stop();
    change();
    await clock.advance(10 * STATUS_PACE.everyMs);
    expect(written()).toBe(1);
    expect(clock.pending()).toEqual([]);
  });
});
