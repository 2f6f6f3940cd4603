import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import type { TimeSyncResult } from '../../../src/agent/time/timesync.js';
import { SLOW_RETRY_MS } from '../../../src/agent/token/backoff.js';
import type { TestService, TestServiceOptions } from '../../../src/service/testing.js';
import { BACKGROUND_SAMPLE_DELAY_MS } from '../../../src/agent/token/manager.js';
import { AgentKit, type AgentKitOptions, UNKNOWN } from '../../helpers/agent-kit.js';
import { Changes } from '../../helpers/changes.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { fillUp, mountTmpfs } from '../../helpers/tmpfs.js';
import { S, MIN, H } from '../../helpers/time.js';

/**
 * The token manager's timed behaviour on a ManualClock, against the real reference service on
 * 127.0.0.1 whose wall clock is the same manual clock: moving the clock past a refresh point makes
 * the manager send a real refresh, and the service judges the tokens by the same time. Between
 * moves the test waits on the manager's change callback, never on real time.
 */

const SECRET = 'manual-clock-s3cret';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };

const { cleanups, service, tempDir } = useHarness();

interface Rig {
  clock: ManualClock;
  svc: TestService;
  k: AgentKit;
  changes: Changes;
}

/** A service and a token manager sharing one manual clock; `random` pins every jitter draw. */
async function rig(
  o: { clock?: ManualClock; random?: number; service?: TestServiceOptions; kit?: Partial<AgentKitOptions> } = {},
): Promise<Rig> {
  const clock = o.clock ?? new ManualClock();
  const svc = await service(SEED, { now: () => clock.wallNow(), ...o.service });
  const changes = new Changes();
  const random = o.random ?? 0.5;
  const k = new AgentKit({
    url: svc.url,
    secret: SECRET,
    clock,
    ...o.kit,
    manager: { random: () => random, onChange: changes.onChange, ...o.kit?.manager },
  });
  cleanups.push(() => k.close());
  return { clock, svc, k, changes };
}

/** Moves the clock `ms` on, first proving that the next timer (the only one) falls exactly there. */
async function exactlyAfter(clock: ManualClock, ms: number): Promise<void> {
  await clock.advance(ms - 1);
  expect(clock.pending()).toEqual([1]);
  await clock.advance(1);
}

const renewals = (r: Rig) => r.k.tokens.snapshot().renewals;

describe('TokenManager on a manual clock: the refresh schedule', () => {
  it.each([
    [0.5, 30],
    [0, 27],
    [0.75, 31.5],
  ])('random %s: a 2 h token is refreshed with %s min left, the manager sleeping until exactly then', async (random, leftMin) => {
    const r = await rig({ random });
    r.k.tokens.start();
    const first = await r.k.tokens.current();
    expect(r.k.tokens.snapshot().accessExpiresAt).toBe(r.clock.wallNow() + 2 * H);

    await r.clock.advance(2 * H - leftMin * MIN - 1);
    expect(r.clock.pending()).toEqual([1]);
    expect(r.svc.stats.refreshToken.total).toBe(0);
    await r.clock.advance(1);
    await r.changes.until(() => renewals(r).refreshed === 1, 'the refresh');
    expect(r.svc.stats.refreshToken.ok).toBe(1);
    expect(r.svc.stats.getToken.total).toBe(1);
    expect(await r.k.tokens.current()).not.toBe(first);
    expect(r.k.tokens.snapshot().accessExpiresAt).toBe(r.clock.wallNow() + 2 * H);
  });

  it('refreshes at 90 and 180 min, then signs again at 240 min, when a 280 min refresh token has its seventh left', async () => {
    const r = await rig({ service: { refreshTtlS: 280 * 60 } });
    r.k.tokens.start();
    await r.k.tokens.current();
    for (const n of [1, 2]) {
      await exactlyAfter(r.clock, 90 * MIN);
      await r.changes.until(() => renewals(r).refreshed === n, `refresh ${n}`);
      expect(renewals(r).signed).toBe(1);
    }
    await exactlyAfter(r.clock, 60 * MIN);
    await r.changes.until(() => renewals(r).signed === 2, 'the re-sign');
    expect(r.svc.stats.getToken.ok).toBe(2);
    expect(r.svc.stats.refreshToken).toMatchObject({ total: 2, ok: 2 });
    expect(r.k.tokens.snapshot().refreshExpiresAt).toBe(r.clock.wallNow() + 280 * MIN);
  });

  it('a caller needing more life than the token has left gets a refresh ahead of the schedule, its need capped at half the lifetime', async () => {
    const r = await rig();
    r.k.tokens.start();
    const first = await r.k.tokens.current();
    await r.clock.advance(59 * MIN);
    // 61 min left: more than 90 min asks for, once capped at half of 2 h.
    await expect(r.k.tokens.current({ minLeftMs: 90 * MIN })).resolves.toBe(first);
    await r.clock.advance(MIN);
    await expect(r.k.tokens.current({ minLeftMs: 30 * MIN })).resolves.toBe(first);
    expect(r.svc.stats.refreshToken.total).toBe(0);
    const renewed = await r.k.tokens.current({ minLeftMs: 90 * MIN });
    expect(renewed).not.toBe(first);
    expect(r.svc.stats.refreshToken.ok).toBe(1);
    expect(r.svc.stats.getToken.total).toBe(1);
  });

  it('signs when the service refuses the refresh token at the refresh point (a service that never issued it)', async () => {
    const clock = new ManualClock();
    const stateDir = tempDir('botlink-manual-');
    const before = await rig({ clock, kit: { stateDir } });
    before.k.tokens.start();
    const cached = await before.k.tokens.current();
    await before.k.close();
    await before.svc.close();

    const r = await rig({ clock, service: { port: before.svc.port }, kit: { stateDir } });
    r.k.tokens.start();
    await expect(r.k.tokens.current()).resolves.toBe(cached);
    await exactlyAfter(clock, 90 * MIN);
    await r.changes.until(() => renewals(r).signed === 1, 'the signed flow');
    expect(r.svc.stats.refreshToken).toMatchObject({ total: 1, ok: 0 });
    expect(r.svc.stats.getToken.ok).toBe(1);
    expect(r.k.logText()).toContain('refresh token refused; signing again');
  });
});

describe('TokenManager on a manual clock: retries', () => {
  it('backs off 0.5 s, 1 s and 2 s (full jitter drawn at 0.5) after three 1006 answers, and not a millisecond sooner', async () => {
    const r = await rig();
    r.svc.faults.failNextGetToken(3);
    r.k.tokens.start();
    const token = r.k.tokens.current();
    for (const [i, delayMs] of [500, 1000, 2000].entries()) {
      await r.changes.until(() => r.changes.calls === i + 1, `failure ${i + 1}`);
      expect(r.k.tokens.snapshot().lastError?.code).toBe('ERR_CLOUD_1006');
      expect(r.clock.pending()).toEqual([delayMs]);
      await r.clock.advance(delayMs - 1);
      expect(r.svc.stats.getToken.total).toBe(i + 1);
      await r.clock.advance(1);
    }
    await expect(token).resolves.toEqual(expect.any(String));
    expect(r.svc.stats.getToken.byCode[1006]).toBe(3);
    expect(r.svc.stats.getToken.ok).toBe(1);
    expect(r.k.tokens.snapshot().lastError).toBeUndefined();
  });

  it('a failure retrying will not fix soon (wrong secret) fails a fail-fast caller and waits 5 min before the next attempt', async () => {
    const r = await rig({ kit: { secret: 'not-the-secret' } });
    r.k.tokens.start();
    const err = (await r.k.tokens.current({ failFast: true }).catch((e: unknown) => e)) as { code: string };
    expect(err.code).toBe('ERR_CLOUD_1005');
    expect(r.clock.pending()).toEqual([SLOW_RETRY_MS]);
    await r.clock.advance(SLOW_RETRY_MS - 1);
    expect(r.svc.stats.getToken.total).toBe(1);
    await r.clock.advance(1);
    await r.changes.until(() => r.changes.calls === 2, 'the second attempt');
    expect(r.svc.stats.getToken.byCode[1005]).toBe(2);
    expect(r.clock.pending()).toEqual([SLOW_RETRY_MS]);
  });

  it('a pair the full disk refused is saved again at its retry time (2 s backoff drawn at 0.5), not before', async () => {
    const stateDir = join(tempDir('botlink-manual-'), 'state');
    mkdirSync(stateDir);
    cleanups.push(mountTmpfs(stateDir, 300));
    const store = TokenStore.open(stateDir);
    cleanups.push(() => store.close());
    const r = await rig({ kit: { manager: { store } } });
    r.k.tokens.start();
    const first = await r.k.tokens.current();
    const filler = fillUp(stateDir);
    r.k.tokens.invalidate(first);
    const second = await r.k.tokens.current();
    expect(r.k.tokens.snapshot().store).toEqual({ persisted: false, lastError: expect.stringMatching(/database or disk is full/) });
    // The saver's retry, then the manager's next look at the token.
    expect(r.clock.pending()).toEqual([1000, MIN]);

    rmSync(filler);
    await r.clock.advance(999);
    expect(r.k.tokens.snapshot().store.persisted).toBe(false);
    expect(store.peekPair()?.pair.accessToken).toBe(first);
    await r.clock.advance(1);
    await r.changes.until(() => r.k.tokens.snapshot().store.persisted, 'the save at its retry time');
    expect(store.peekPair()?.pair.accessToken).toBe(second);
    expect(r.svc.stats.refreshToken.ok).toBe(1);
  });
});

describe('TokenManager on a manual clock: the background sample', () => {
  it('a cached pair on an unknown clock is handed out at once and judged by a server time sample 1 s later, not during the boot', async () => {
    const first = await rig();
    first.k.tokens.start();
    const cached = await first.k.tokens.current();
    first.k.tokens.stop();

    const changes = new Changes();
    let release: (v: TimeSyncResult) => void = () => undefined;
    const verdict = new Promise<TimeSyncResult>((resolve) => (release = resolve));
    const k = new AgentKit({
      url: first.svc.url,
      secret: SECRET,
      clock: first.clock,
      stateDir: first.k.stateDir,
      // The verdict comes when the test says: tools such as timedatectl take milliseconds at boot.
      manager: { random: () => 0.5, onChange: changes.onChange, checkTimeSync: () => verdict },
    });
    cleanups.push(() => k.close());
    const heads = first.svc.stats.head.total;
    k.tokens.start();
    // Handed out before the time-sync verdict is in: usable by the local clock, usable whatever it says.
    expect(await k.tokens.current()).toBe(cached);
    expect(k.tokens.snapshot().clock.verdict).toBe('pending');
    release(UNKNOWN);
    await first.clock.advance(0);
    expect(k.tokens.snapshot().clock.verdict).toBe('unknown');
    expect(first.svc.stats.head.total).toBe(heads);
    expect(first.clock.pending()).toContain(BACKGROUND_SAMPLE_DELAY_MS);

    await first.clock.advance(BACKGROUND_SAMPLE_DELAY_MS - 1);
    expect(first.svc.stats.head.total).toBe(heads);
    await first.clock.advance(1);
    await changes.until(() => k.tokens.snapshot().clock.trusted, 'the sample');
    expect(first.svc.stats.head.total).toBe(heads + 1);
  });
});

describe('TokenManager.peek: a token now or none, never a wait', () => {
  it('before any token: undefined at once; once signed, the token and its expiry', async () => {
    const r = await rig();
    r.k.tokens.start();
    expect(r.k.tokens.peek(30 * S)).toBeUndefined();
    await r.changes.until(() => renewals(r).signed === 1, 'the first signature');
    const held = r.k.tokens.peek(30 * S);
    expect(held).toEqual({ token: await r.k.tokens.current(), expiresAt: r.clock.wallNow() + 2 * H });
  });

  it('a token the cloud refused is not handed out; the renewal that follows brings the next', async () => {
    const r = await rig();
    r.k.tokens.start();
    const first = await r.k.tokens.current();
    r.k.tokens.invalidate(first);
    expect(r.k.tokens.peek(0)).toBeUndefined();
    await r.changes.until(() => renewals(r).refreshed === 1, 'the refresh');
    expect(r.k.tokens.peek(0)?.token).not.toBe(first);
  });
});
