import { describe, expect, it } from 'vitest';
import {
  DEFAULT_POLICY,
  accessUsableFor,
  decideNextAction,
  effectiveMargins,
  renewalThresholdMs,
  type Decision,
  type PolicyNow,
  type PolicySettings,
  type TokenFacts,
} from '../../../src/agent/token/policy.js';
import { brokeredPair, holdsRefresh, pairFacts, refreshExpiresAt } from '../../../src/agent/token/pairs.js';
import { prng } from '../../helpers/fuzz.js';
import { S, MIN, H, D } from '../../helpers/time.js';

/** The server's wall clock in every row: 2025-11-21T00:00:00Z. */
const T = 1_763_683_200_000;
const ACCESS_LIFE = 2 * H;
const REFRESH_LIFE = 7 * D;

/**
 * The three clock cases. The policy only sees `serverTime`, so trusted and sampled time must decide
 * alike; the sample case runs on a different monotonic origin to show only serverTime matters.
 */
type ClockCase = 'trusted' | 'untrusted-with-sample' | 'untrusted-without';
const MONO: Record<ClockCase, number> = {
  trusted: 9_000_000,
  'untrusted-with-sample': 42,
  'untrusted-without': 9_000_000,
};
function nowFor(clock: ClockCase): PolicyNow {
  return { mono: MONO[clock], serverTime: clock === 'untrusted-without' ? undefined : T };
}

/** A table row's facts; undefined, like absent, means "none" (no token, no retry scheduled). */
interface Pair {
  accessLeft?: number | undefined;
  refreshLeft?: number | undefined;
  accessLife?: number;
  refreshLife?: number;
  accessRejected?: boolean;
  refreshFailed?: boolean;
  jitter?: number;
  retryInMs?: number | undefined;
  /** A caller waits for a token with this much life left. */
  neededLeft?: number;
}

/** Facts with expiries given as life left at server time T; the retry time relative to `mono`. */
function factsOf(p: Pair, mono = 0): TokenFacts {
  return {
    ...(p.accessLeft !== undefined && {
      access: { expiresAt: T + p.accessLeft, lifetimeMs: p.accessLife ?? ACCESS_LIFE },
    }),
    ...(p.refreshLeft !== undefined && {
      refresh: { expiresAt: T + p.refreshLeft, lifetimeMs: p.refreshLife ?? REFRESH_LIFE },
    }),
    accessRejected: p.accessRejected ?? false,
    refreshFailed: p.refreshFailed ?? false,
    jitter: p.jitter ?? 0,
    ...(p.retryInMs !== undefined && { retryAtMono: mono + p.retryInMs }),
    ...(p.neededLeft !== undefined && { neededLeftMs: p.neededLeft }),
  };
}

const use = (wakeInMs: number): Decision => ({ action: 'use', wakeInMs });
const REFRESH: Decision = { action: 'refresh' };
const SIGN: Decision = { action: 'sign' };
const WAIT_CLOCK: Decision = { action: 'wait-clock', wakeInMs: DEFAULT_POLICY.clockRecheckMs };
const USE_UNTIL_CLOCK = use(DEFAULT_POLICY.clockRecheckMs);

/** name, facts, decision with server time (trusted or sampled), decision without any time. */
const ROWS: [string, Pair, Decision, Decision][] = [
  ['no token → sign', {}, SIGN, WAIT_CLOCK],
  ['both valid → use', { accessLeft: 2 * H, refreshLeft: 7 * D }, use(MIN), USE_UNTIL_CLOCK],
  ['access expired, refresh valid → refresh', { accessLeft: -MIN, refreshLeft: 6 * D }, REFRESH, USE_UNTIL_CLOCK],
  ['access within 30 min of expiry, refresh valid → refresh', { accessLeft: 29 * MIN, refreshLeft: 6 * D }, REFRESH, USE_UNTIL_CLOCK],
  ['access missing, refresh valid → refresh', { refreshLeft: 6 * D }, REFRESH, REFRESH],
  ['refresh near expiry (≤ 1 day), access valid → sign', { accessLeft: 2 * H, refreshLeft: 23 * H }, SIGN, USE_UNTIL_CLOCK],
  ['refresh near expiry (≤ 1 day), access near expiry → sign', { accessLeft: 10 * MIN, refreshLeft: 23 * H }, SIGN, USE_UNTIL_CLOCK],
  ['refresh expired → sign', { accessLeft: -H, refreshLeft: -S }, SIGN, USE_UNTIL_CLOCK],
  ['refresh expired, no access → sign (refresh tried first without time)', { refreshLeft: -S }, SIGN, REFRESH],
  ['refresh failed → sign', { accessLeft: -MIN, refreshLeft: 6 * D, refreshFailed: true }, SIGN, USE_UNTIL_CLOCK],
  [
    'refresh failed, access rejected → sign',
    { accessLeft: H, refreshLeft: 6 * D, refreshFailed: true, accessRejected: true },
    SIGN,
    WAIT_CLOCK,
  ],
  [
    'refresh failed, access still valid → use until the refresh point',
    { accessLeft: 2 * H, refreshLeft: 6 * D, refreshFailed: true },
    use(MIN),
    USE_UNTIL_CLOCK,
  ],
  [
    'access rejected (Unauthorized) with valid refresh → refresh',
    { accessLeft: 2 * H, refreshLeft: 6 * D, accessRejected: true },
    REFRESH,
    REFRESH,
  ],
  ['access rejected, refresh near expiry → sign', { accessLeft: 2 * H, refreshLeft: 12 * H, accessRejected: true }, SIGN, REFRESH],
  ['access rejected, no refresh token → sign', { accessLeft: 2 * H, accessRejected: true }, SIGN, WAIT_CLOCK],
  ['access valid, no refresh token → use', { accessLeft: 2 * H }, use(MIN), USE_UNTIL_CLOCK],
  ['access expired, no refresh token → sign', { accessLeft: -S }, SIGN, USE_UNTIL_CLOCK],
  ['access exactly at the 30 min margin → refresh', { accessLeft: 30 * MIN, refreshLeft: 6 * D }, REFRESH, USE_UNTIL_CLOCK],
  [
    'access 1 ms before the margin → use, wake no sooner than 1 s',
    { accessLeft: 30 * MIN + 1, refreshLeft: 6 * D },
    use(S),
    USE_UNTIL_CLOCK,
  ],
  ['refresh point in 10 s → use, wake in 10 s', { accessLeft: 30 * MIN + 10 * S, refreshLeft: 6 * D }, use(10 * S), USE_UNTIL_CLOCK],
  ['re-sign point in 20 s → use, wake in 20 s', { accessLeft: 2 * H, refreshLeft: D + 20 * S }, use(20 * S), USE_UNTIL_CLOCK],
  ['refresh exactly 1 day left → sign', { accessLeft: 2 * H, refreshLeft: D }, SIGN, USE_UNTIL_CLOCK],
  [
    'retry scheduled in 30 s → backoff 30 s',
    { retryInMs: 30 * S },
    { action: 'backoff', wakeInMs: 30 * S },
    { action: 'backoff', wakeInMs: 30 * S },
  ],
  [
    'retry scheduled, even with a usable token → backoff',
    { accessLeft: 2 * H, refreshLeft: 6 * D, retryInMs: 1 },
    { action: 'backoff', wakeInMs: 1 },
    { action: 'backoff', wakeInMs: 1 },
  ],
  ['retry time reached → decide as usual', { refreshLeft: 6 * D, retryInMs: 0 }, REFRESH, REFRESH],
  ['retry time passed → decide as usual', { retryInMs: -5 * S }, SIGN, WAIT_CLOCK],
  // A caller waiting for a token with some life left (current({ minLeftMs })); the need is capped at half the lifetime.
  ['a caller needs less than left → use', { accessLeft: 2 * H, refreshLeft: 6 * D, neededLeft: 59 * MIN }, use(MIN), USE_UNTIL_CLOCK],
  [
    'a caller needs 1 ms less than left → use',
    { accessLeft: 50 * MIN, refreshLeft: 6 * D, neededLeft: 50 * MIN - 1 },
    use(MIN),
    USE_UNTIL_CLOCK,
  ],
  [
    'a caller needs exactly the life left → refresh ahead of schedule',
    { accessLeft: 50 * MIN, refreshLeft: 6 * D, neededLeft: 50 * MIN },
    REFRESH,
    USE_UNTIL_CLOCK,
  ],
  [
    'a caller needs more than left → refresh ahead of schedule',
    { accessLeft: 50 * MIN, refreshLeft: 6 * D, neededLeft: 55 * MIN },
    REFRESH,
    USE_UNTIL_CLOCK,
  ],
  [
    'a need over half the lifetime is capped: more than 1 h left → use',
    { accessLeft: 61 * MIN, refreshLeft: 6 * D, neededLeft: 90 * MIN },
    use(MIN),
    USE_UNTIL_CLOCK,
  ],
  [
    'a need over half the lifetime is capped: exactly 1 h left → refresh',
    { accessLeft: H, refreshLeft: 6 * D, neededLeft: 90 * MIN },
    REFRESH,
    USE_UNTIL_CLOCK,
  ],
  [
    'an infinite need is capped at half the lifetime → use',
    { accessLeft: 2 * H, refreshLeft: 6 * D, neededLeft: Infinity },
    use(MIN),
    USE_UNTIL_CLOCK,
  ],
  [
    'a need on a short token is capped at half its 5 s',
    { accessLeft: 2_600, accessLife: 5 * S, refreshLeft: 6 * D, neededLeft: MIN },
    use(1_350),
    USE_UNTIL_CLOCK,
  ],
  ['a need of zero or less is no need → use', { accessLeft: 31 * MIN, refreshLeft: 6 * D, neededLeft: -MIN }, use(MIN), USE_UNTIL_CLOCK],
  [
    'a caller needs more, refresh failed → sign',
    { accessLeft: 50 * MIN, refreshLeft: 6 * D, refreshFailed: true, neededLeft: 55 * MIN },
    SIGN,
    USE_UNTIL_CLOCK,
  ],
  [
    'a caller needs more, refresh near expiry → sign',
    { accessLeft: 50 * MIN, refreshLeft: 12 * H, neededLeft: 55 * MIN },
    SIGN,
    USE_UNTIL_CLOCK,
  ],
  ['a caller needs more, no refresh token → sign', { accessLeft: 50 * MIN, neededLeft: 55 * MIN }, SIGN, USE_UNTIL_CLOCK],
  [
    'a caller needs more, access rejected → refresh',
    { accessLeft: 2 * H, refreshLeft: 6 * D, accessRejected: true, neededLeft: 55 * MIN },
    REFRESH,
    REFRESH,
  ],
  ['a caller needs some, no access token → refresh', { refreshLeft: 6 * D, neededLeft: MIN }, REFRESH, REFRESH],
  [
    'a caller needs more, retry scheduled → backoff',
    { accessLeft: 50 * MIN, refreshLeft: 6 * D, neededLeft: 55 * MIN, retryInMs: 30 * S },
    { action: 'backoff', wakeInMs: 30 * S },
    { action: 'backoff', wakeInMs: 30 * S },
  ],
];

const CLOCKS: ClockCase[] = ['trusted', 'untrusted-with-sample', 'untrusted-without'];
const CASES = ROWS.flatMap(([name, pair, timed, untimed]) =>
  CLOCKS.map((clock) => [name, clock, pair, clock === 'untrusted-without' ? untimed : timed] as const),
);

describe('decideNextAction: spec state table × clock cases', () => {
  it.each(CASES)('%s [%s]', (_name, clock, pair, expected) => {
    const now = nowFor(clock);
    expect(decideNextAction(factsOf(pair, now.mono), now)).toEqual(expected);
  });

  it('uses DEFAULT_POLICY when no settings are given', () => {
    const now = nowFor('trusted');
    const facts = factsOf({ accessLeft: 2 * H, refreshLeft: 6 * D });
    expect(decideNextAction(facts, now)).toEqual(decideNextAction(facts, now, DEFAULT_POLICY));
  });

  it('a NaN or infinite server time counts as unknown time', () => {
    for (const serverTime of [NaN, Infinity]) {
      const now = { mono: 0, serverTime };
      expect(decideNextAction(factsOf({}), now)).toEqual(WAIT_CLOCK);
      expect(decideNextAction(factsOf({ accessLeft: H }), now)).toEqual(USE_UNTIL_CLOCK);
    }
  });

  it('a non-finite retry time is ignored rather than waited on forever', () => {
    for (const retryAtMono of [NaN, Infinity]) {
      const facts = { ...factsOf({ refreshLeft: 6 * D }), retryAtMono };
      expect(decideNextAction(facts, nowFor('trusted'))).toEqual(REFRESH);
    }
  });

  it('NaN expiries count as run out, never as good', () => {
    const now = nowFor('trusted');
    const nan = { expiresAt: NaN, lifetimeMs: ACCESS_LIFE };
    expect(decideNextAction({ ...factsOf({ refreshLeft: 6 * D }), access: nan }, now)).toEqual(REFRESH);
    expect(decideNextAction({ ...factsOf({ accessLeft: 2 * H }), refresh: nan }, now)).toEqual(SIGN);
  });
});

describe('decideNextAction: jitter moves the refresh point by ±10 % of the margin', () => {
  const longRecheck: PolicySettings = { ...DEFAULT_POLICY, recheckMs: D };
  it.each([
    [-1, 27 * MIN],
    [0, 30 * MIN],
    [1, 33 * MIN],
    [-0.5, 28.5 * MIN],
    [-7, 27 * MIN],
    [7, 33 * MIN],
    [NaN, 30 * MIN],
  ])('jitter %s → refresh at %i ms left', (jitter, refreshAtLeft) => {
    const now = nowFor('trusted');
    const at = (accessLeft: number) => decideNextAction(factsOf({ accessLeft, refreshLeft: 6 * D, jitter }), now, longRecheck);
    expect(at(refreshAtLeft)).toEqual(REFRESH);
    expect(at(refreshAtLeft + 5 * S)).toEqual(use(5 * S));
    expect(at(40 * MIN)).toEqual(use(40 * MIN - refreshAtLeft));
  });
});

describe('decideNextAction: short lifetimes (5 s access, 30 s refresh)', () => {
  const short = { accessLife: 5 * S, refreshLife: 30 * S };
  const resignAtLeft = (30 * S) / 7;
  it.each([
    [-1, 1_125],
    [0, 1_250],
    [1, 1_375],
  ])('jitter %i → refresh at %i ms before expiry', (jitter, refreshAtLeft) => {
    const now = nowFor('trusted');
    const at = (accessLeft: number) => decideNextAction(factsOf({ ...short, accessLeft, refreshLeft: 20 * S, jitter }), now);
    expect(at(refreshAtLeft)).toEqual(REFRESH);
    expect(at(refreshAtLeft + 1)).toEqual(use(S));
    expect(at(5 * S)).toEqual(use(5 * S - refreshAtLeft));
  });

  it('re-signs about 4.3 s before the refresh token expires', () => {
    const now = nowFor('trusted');
    const at = (refreshLeft: number) => decideNextAction(factsOf({ ...short, accessLeft: 5 * S, refreshLeft }), now);
    expect(resignAtLeft).toBeCloseTo(4_286, 0);
    expect(at(4_285)).toEqual(SIGN);
    expect(at(4_287)).toEqual(use(S));
    expect(at(6_286)).toEqual(use(2_001));
  });

  it.each([-1, 0, 1])('following the wakes with jitter %i refreshes before expiry', (jitter) => {
    const decisionAfter = (elapsed: number) =>
      decideNextAction(factsOf({ ...short, accessLeft: 5 * S - elapsed, refreshLeft: 30 * S - elapsed, jitter }), nowFor('trusted'));
    let elapsed = 0;
    let decision = decisionAfter(elapsed);
    while (decision.action === 'use') {
      elapsed += decision.wakeInMs;
      decision = decisionAfter(elapsed);
    }
    expect(decision).toEqual(REFRESH);
    expect(elapsed).toBeLessThan(5 * S);
  });
});

describe('effectiveMargins', () => {
  it.each([
    ['spec 2 h / 7 d tokens', 2 * H, 7 * D, 30 * MIN, D],
    ['8 h access token', 8 * H, 7 * D, 30 * MIN, D],
    ['1 h access, 2 d refresh', H, 2 * D, 15 * MIN, (2 * D) / 7],
    ['demo 5 s / 30 s', 5 * S, 30 * S, 1_250, (30 * S) / 7],
    ['zero lifetimes', 0, 0, 0, 0],
    ['NaN lifetimes fall back to the configured margins', NaN, NaN, 30 * MIN, D],
    ['negative lifetimes fall back to the configured margins', -1, -1, 30 * MIN, D],
  ])('%s', (_name, accessLife, refreshLife, refreshMarginMs, resignMarginMs) => {
    const facts = factsOf({ accessLeft: 0, refreshLeft: 0, accessLife, refreshLife });
    expect(effectiveMargins(facts, DEFAULT_POLICY)).toEqual({ refreshMarginMs, resignMarginMs });
  });

  it('without tokens the configured margins stand', () => {
    const settings = { ...DEFAULT_POLICY, refreshMarginMs: 5 * MIN, resignMarginMs: 2 * H };
    expect(effectiveMargins(factsOf({}), settings)).toEqual({ refreshMarginMs: 5 * MIN, resignMarginMs: 2 * H });
  });
});

describe('accessUsableFor', () => {
  it.each<[string, Pair, ClockCase, number, boolean]>([
    ['plenty left', { accessLeft: H }, 'trusted', 5 * MIN, true],
    ['plenty left by a sample', { accessLeft: H }, 'untrusted-with-sample', 5 * MIN, true],
    ['exactly the needed life is not enough', { accessLeft: 5 * MIN }, 'trusted', 5 * MIN, false],
    ['less than needed', { accessLeft: 4 * MIN }, 'trusted', 5 * MIN, false],
    ['expired', { accessLeft: -S }, 'trusted', 0, false],
    ['unknown time: the server judges', { accessLeft: -H }, 'untrusted-without', 5 * MIN, true],
    ['rejected', { accessLeft: H, accessRejected: true }, 'trusted', 0, false],
    ['rejected, unknown time', { accessLeft: H, accessRejected: true }, 'untrusted-without', 0, false],
    ['missing', { refreshLeft: 6 * D }, 'trusted', 0, false],
    ['missing, unknown time', {}, 'untrusted-without', 0, false],
    ['a need over half the lifetime is capped at half: 61 min left of 2 h', { accessLeft: 61 * MIN }, 'trusted', 3 * H, true],
    ['capped at half: exactly 1 h left of 2 h is not enough', { accessLeft: H }, 'trusted', 3 * H, false],
    ['capped at half of a 5 s token', { accessLeft: 2_600, accessLife: 5 * S }, 'trusted', 5 * MIN, true],
    ['an infinite need is capped too', { accessLeft: 61 * MIN }, 'trusted', Infinity, true],
    ['a NaN lifetime caps nothing', { accessLeft: H, accessLife: NaN }, 'trusted', 2 * H, false],
    ['a negative lifetime caps nothing', { accessLeft: H, accessLife: -1 }, 'trusted', 2 * H, false],
    ["unknown time: the need is the server's to judge", { accessLeft: H }, 'untrusted-without', 3 * H, true],
  ])('%s [%s] → %s', (_name, pair, clock, minLeftMs, expected) => {
    expect(accessUsableFor(factsOf(pair), nowFor(clock), minLeftMs)).toBe(expected);
  });
});

describe("property: a caller's need renews exactly as the manager used to force it", () => {
  /** The manager before the need was a fact: decide, then, if a caller needed more life, decide again as if rejected. */
  function forcedByCaller(facts: TokenFacts, now: PolicyNow, neededLeftMs: number): Decision {
    const { neededLeftMs: _n, ...plain } = facts;
    const decision = decideNextAction(plain, now);
    const capped = facts.access ? Math.min(neededLeftMs, facts.access.lifetimeMs / 2) : neededLeftMs;
    const short =
      facts.access && !plain.accessRejected && now.serverTime !== undefined && !(facts.access.expiresAt - now.serverTime > capped);
    return decision.action === 'use' && short ? decideNextAction({ ...plain, accessRejected: true }, now) : decision;
  }

  it('over every table row and 20 000 seeded fact sets with needs from none to twice the lifetime', () => {
    const random = prng(0x7014);
    const pick = <V>(values: V[]): V => values[Math.floor(random() * values.length)] as V;
    const sets: Pair[] = ROWS.map(([, pair]) => pair);
    for (let i = 0; i < 20_000; i++) {
      const accessLife = pick([ACCESS_LIFE, 5 * S, 8 * H]);
      sets.push({
        accessLeft: pick([undefined, (random() - 0.2) * 1.2 * accessLife]),
        refreshLeft: pick([undefined, (random() - 0.1) * 8 * D]),
        accessLife,
        accessRejected: random() < 0.1,
        refreshFailed: random() < 0.1,
        jitter: random() * 2 - 1,
        retryInMs: pick([undefined, (random() - 0.5) * 10 * MIN]),
        neededLeft: pick([0, random() * 2 * accessLife, accessLife / 2, Infinity]),
      });
    }
    const differ: string[] = [];
    for (const pair of sets) {
      for (const clock of CLOCKS) {
        const now = nowFor(clock);
        const facts = factsOf(pair, now.mono);
        const expected = forcedByCaller(facts, now, pair.neededLeft ?? 0);
        const got = decideNextAction(facts, now);
        if (JSON.stringify(got) !== JSON.stringify(expected))
          differ.push(`${JSON.stringify(pair)} [${clock}] → ${JSON.stringify(got)}, was ${JSON.stringify(expected)}`);
      }
    }
    expect(differ).toEqual([]);
  });

  it('a freshly issued token satisfies any need: a renewal for a caller never loops', () => {
    const random = prng(0x7015);
    const bad: string[] = [];
    for (let i = 0; i < 5_000; i++) {
      const accessLife = [ACCESS_LIFE, 5 * S, 8 * H, 1][i % 4]!;
      const pair: Pair = {
        accessLeft: accessLife,
        accessLife,
        refreshLeft: 7 * D,
        jitter: random() * 2 - 1,
        neededLeft: i % 7 === 0 ? Infinity : random() * 3 * accessLife,
      };
      const d = decideNextAction(factsOf(pair), nowFor('trusted'));
      if (d.action !== 'use') bad.push(`${JSON.stringify(pair)} → ${JSON.stringify(d)}`);
    }
    expect(bad).toEqual([]);
  });
});

describe('property: wakes are finite and positive', () => {
  it('over 20 000 seeded fact sets', () => {
    const random = prng(0x7013);
    const pick = <V>(values: V[]): V => values[Math.floor(random() * values.length)] as V;
    const bad: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const pair: Pair = {
        accessLeft: pick([undefined, (random() - 0.2) * 3 * H, (random() - 0.5) * 10 * S]),
        refreshLeft: pick([undefined, (random() - 0.1) * 8 * D, (random() - 0.5) * 60 * S]),
        accessLife: pick([ACCESS_LIFE, 5 * S, 8 * H]),
        refreshLife: pick([REFRESH_LIFE, 30 * S]),
        accessRejected: random() < 0.2,
        refreshFailed: random() < 0.2,
        jitter: random() * 2 - 1,
        retryInMs: pick([undefined, (random() - 0.5) * 10 * MIN]),
      };
      const now = nowFor(pick(CLOCKS));
      const d = decideNextAction(factsOf(pair, now.mono), now);
      if (!('wakeInMs' in d)) continue;
      const floor = d.action === 'use' ? S : 0;
      if (!Number.isFinite(d.wakeInMs) || d.wakeInMs < floor || d.wakeInMs === 0 || d.wakeInMs > D) {
        bad.push(`${JSON.stringify(pair)} → ${JSON.stringify(d)}`);
      }
    }
    expect(bad).toEqual([]);
  });
});

describe('a broker pair (DESIGN §3.7): the access token alone', () => {
  const issued = { accessToken: 'at', expireIn: 7200, expiresAt: T + 2 * H };
  const facts = (jitter = 0): TokenFacts => ({ ...pairFacts(brokeredPair(issued)), accessRejected: false, refreshFailed: false, jitter });

  it('has no refresh facts, a lifetime from the broker alone, and asks the broker where signing mode would refresh', () => {
    expect(holdsRefresh(brokeredPair(issued))).toBe(false);
    expect(refreshExpiresAt(brokeredPair(issued))).toBeUndefined();
    expect(refreshExpiresAt(undefined)).toBeUndefined();
    expect(facts()).toMatchObject({ access: { expiresAt: T + 2 * H, lifetimeMs: 2 * H } });
    expect(facts()).not.toHaveProperty('refresh');
    const now = (left: number): PolicyNow => ({ mono: 0, serverTime: T + 2 * H - left });
    expect(decideNextAction(facts(), now(31 * MIN))).toEqual({ action: 'use', wakeInMs: MIN });
    expect(decideNextAction(facts(), now(30 * MIN))).toEqual({ action: 'sign' });
    expect(decideNextAction(facts(), { mono: 0, serverTime: undefined })).toEqual({
      action: 'use',
      wakeInMs: DEFAULT_POLICY.clockRecheckMs,
    });
    expect(decideNextAction({ ...facts(), accessRejected: true }, { mono: 0, serverTime: undefined })).toEqual({
      action: 'wait-clock',
      wakeInMs: DEFAULT_POLICY.clockRecheckMs,
    });
  });

  it.each([
    ['the refresh point, jitter 0', facts(0), 30 * MIN],
    ['the refresh point, jitter +1: 10 % more', facts(1), 33 * MIN],
    ['the refresh point, jitter −1: 10 % less', facts(-1), 27 * MIN],
    [
      'a short token: a quarter of its life',
      { ...pairFacts(brokeredPair({ ...issued, expireIn: 60 })), accessRejected: false, refreshFailed: false, jitter: 0 },
      15 * S,
    ],
    ['no pair yet: the configured margin', { accessRejected: false, refreshFailed: false, jitter: 0 }, 30 * MIN],
    ['a caller needing more', { ...facts(0), neededLeftMs: 50 * MIN }, 50 * MIN],
    ['a token the cloud refused: its whole lifetime', { ...facts(0), accessRejected: true }, 2 * H],
  ])('renewalThresholdMs (what the broker is asked as minValidityS): %s', (_, f, want) => {
    expect(renewalThresholdMs(f)).toBeCloseTo(want, 6);
  });
});
