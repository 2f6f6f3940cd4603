import { describe, expect, it } from 'vitest';
import { ServerTime } from '../../../src/agent/time/servertime.js';
import {
  chooseSigningTime,
  ClockNotTrustedError,
  FRESH_SAMPLE_MS,
  MAX_WALL_DISAGREEMENT_MS,
  needsSample,
  NO_TRUSTED_TIME,
  type SigningTime,
} from '../../../src/agent/time/signingtime.js';
import type { TimeSyncResult, Verdict } from '../../../src/agent/time/timesync.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { MIN } from '../../helpers/time.js';

const WALL = Date.parse('2026-12-01T12:00:00.250Z');

const verdicts: Record<Verdict, TimeSyncResult> = {
  synced: { verdict: 'synced', source: 'chrony', detail: 'chronyc: Normal, offset 0.0003 s' },
  unsynced: { verdict: 'unsynced', source: 'floor', detail: 'wall clock before the floor' },
  unknown: { verdict: 'unknown', source: 'none', detail: 'no time source answered' },
};

type SampleCase = 'none' | 'fresh agreeing' | 'fresh disagreeing' | 'stale' | 'aged out';

/** Server ahead of the wall clock by `serverAheadMs` when sampled, then `ageMs` passes on both clocks. */
function setup(serverAheadMs: number | undefined, ageMs: number) {
  const clock = {
    wall: WALL,
    mono: 50_000,
    wallNow() {
      return this.wall;
    },
    monoNow() {
      return this.mono;
    },
  };
  const server = new ServerTime(clock);
  if (serverAheadMs !== undefined) {
    server.addSample(new Date(WALL + serverAheadMs).toUTCString(), clock.mono - 20, clock.mono);
  }
  clock.wall += ageMs;
  clock.mono += ageMs;
  return { clock, server };
}

const samples: Record<SampleCase, [number | undefined, number]> = {
  none: [undefined, 0],
  'fresh agreeing': [2000, 30_000],
  'fresh disagreeing': [10 * MIN, 30_000],
  stale: [10 * MIN, 6 * MIN],
  'aged out': [10 * MIN, 16 * MIN],
};

function msOf(result: SigningTime): number {
  if (!result.ok) throw new Error(`expected a signing time, got: ${result.reason}`);
  return result.ms;
}

type Expected = 'wall' | 'server' | 'none';
const table: Array<[Verdict, SampleCase, Expected, boolean]> = [
  // verdict, sample, signs with, needsSample
  ['synced', 'none', 'wall', false],
  ['synced', 'fresh agreeing', 'wall', false],
  ['synced', 'fresh disagreeing', 'server', false],
  ['synced', 'stale', 'wall', false],
  ['synced', 'aged out', 'wall', false],
  ['unsynced', 'none', 'none', true],
  ['unsynced', 'fresh agreeing', 'server', false],
  ['unsynced', 'fresh disagreeing', 'server', false],
  ['unsynced', 'stale', 'server', true],
  ['unsynced', 'aged out', 'none', true],
  ['unknown', 'none', 'none', true],
  ['unknown', 'fresh agreeing', 'server', false],
  ['unknown', 'fresh disagreeing', 'server', false],
  ['unknown', 'stale', 'server', true],
  ['unknown', 'aged out', 'none', true],
];

describe('chooseSigningTime', () => {
  it.each(table)('%s, %s sample → %s', (verdict, sample, expected) => {
    const { clock, server } = setup(...samples[sample]);
    const result = chooseSigningTime(verdicts[verdict], server, clock);
    if (expected === 'none') {
      expect(result).toEqual({ ok: false, reason: NO_TRUSTED_TIME });
    } else if (expected === 'wall') {
      expect(result).toEqual({ ok: true, ms: clock.wall, source: 'wall' });
    } else {
      expect(result).toEqual({ ok: true, ms: server.now(), source: 'server' });
      const [ahead] = samples[sample];
      expect(Math.abs(msOf(result) - (clock.wall + ahead!))).toBeLessThanOrEqual(1000);
    }
  });

  // the Date header's 1 s resolution puts server.now() within 1 s of the offset asked for
  it.each([
    [MAX_WALL_DISAGREEMENT_MS - 1500, 'wall'],
    [MAX_WALL_DISAGREEMENT_MS + 1500, 'server'],
    [-MAX_WALL_DISAGREEMENT_MS + 1500, 'wall'],
    [-MAX_WALL_DISAGREEMENT_MS - 1500, 'server'],
  ])('synced: a fresh sample %d ms off → %s', (ahead, source) => {
    const { clock, server } = setup(ahead, 0);
    expect(chooseSigningTime(verdicts.synced, server, clock)).toMatchObject({ ok: true, source });
  });

  it('a sample exactly FRESH_SAMPLE_MS old still overrules a synced wall clock', () => {
    const { clock, server } = setup(10 * MIN, FRESH_SAMPLE_MS);
    expect(chooseSigningTime(verdicts.synced, server, clock)).toMatchObject({ source: 'server' });
    clock.mono += 1;
    expect(chooseSigningTime(verdicts.synced, server, clock)).toMatchObject({ source: 'wall' });
  });

  it('an unsynced wall clock in 1970 is never used, server time is', () => {
    const { clock, server } = setup(0, 0);
    clock.wall = 0;
    const result = chooseSigningTime(verdicts.unsynced, server, clock);
    expect(result).toMatchObject({ ok: true, source: 'server' });
    expect(Math.abs(msOf(result) - WALL)).toBeLessThanOrEqual(1000);
  });
});

describe('needsSample', () => {
  it.each(table)('%s, %s sample → needsSample %4$s', (verdict, sample, _signs, expected) => {
    const { clock, server } = setup(...samples[sample]);
    expect(needsSample(verdicts[verdict], server, clock, FRESH_SAMPLE_MS)).toBe(expected);
  });

  it('honours the caller’s maxAgeMs', () => {
    const { clock, server } = setup(0, 2 * MIN);
    expect(needsSample(verdicts.unknown, server, clock, 3 * MIN)).toBe(false);
    expect(needsSample(verdicts.unknown, server, clock, MIN)).toBe(true);
  });
});

describe('ClockNotTrustedError', () => {
  it('is a needs-clock BotlinkError that says what to check', () => {
    const err = new ClockNotTrustedError();
    expect(err).toBeInstanceOf(BotlinkError);
    expect(err.name).toBe('ClockNotTrustedError');
    expect(err.code).toBe('ERR_CLOCK_UNTRUSTED');
    expect(err.retry).toBe('needs-clock');
    expect(err.message).toBe(NO_TRUSTED_TIME);
    expect(err.fix).toMatch(/NTP/);
    expect(err.fix).toMatch(/network/);
  });

  it('carries a specific reason', () => {
    const err = new ClockNotTrustedError('server rejected the timestamp twice');
    expect(err.message).toBe('server rejected the timestamp twice');
    expect(err.fix).toMatch(/NTP/);
  });
});
