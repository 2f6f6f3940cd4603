import { once } from 'node:events';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withWallClock } from '../../../src/clock.js';
import { lockAddress } from '../../../src/agent/store/lock.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import type { ReferenceService } from '../../../src/service/server.js';
import { AgentKit, UNKNOWN, type AgentKitOptions } from '../../helpers/agent-kit.js';
import { Changes } from '../../helpers/changes.js';
import { useHarness } from '../../helpers/harness.js';
import { fillUp, mountTmpfs } from '../../helpers/tmpfs.js';

const SECRET = 'tok3n-test-s3cret-value';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1', 'bot-2'] }] }] };
const FAST_BACKOFF = { baseMs: 20, capMs: 200 };

const { cleanups, service, tempDir } = useHarness();

function kit(svc: ReferenceService, opts: Partial<AgentKitOptions> = {}): AgentKit {
  const k = new AgentKit({ url: svc.url, secret: SECRET, ...opts, manager: { backoff: FAST_BACKOFF, ...opts.manager } });
  cleanups.push(() => k.close());
  return k;
}

describe('TokenManager against the reference service', () => {
  it('signs on first boot; a second boot on the same stateDir makes zero getToken calls', async () => {
    const svc = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    const first = kit(svc, { stateDir });
    first.tokens.start();
    const token = await first.tokens.current();
    expect(svc.stats.getToken.ok).toBe(1);
    await first.close();

    const second = kit(svc, { stateDir });
    second.tokens.start();
    await expect(second.tokens.current()).resolves.toBe(token);
    expect(svc.stats.getToken.total).toBe(1);
    expect(svc.stats.refreshToken.total).toBe(0);
  });

  // The schedule to the millisecond is test/integration/agent/token-manager.test.ts's, on a manual clock; this is the same on real time.
  it('refreshes (not signs) when the access token nears expiry, and signs again when the refresh token runs out', async () => {
    const svc = await service(SEED, { accessTtlS: 2, refreshTtlS: 7 });
    const changes = new Changes();
    const k = kit(svc, { manager: { onChange: changes.onChange } });
    const renewals = () => k.tokens.snapshot().renewals;
    k.tokens.start();
    const first = await k.tokens.current();
    await changes.until(() => renewals().refreshed >= 1, 'a refresh');
    expect(svc.stats.getToken.ok).toBe(1);
    expect(await k.tokens.current()).not.toBe(first);
    await changes.until(() => renewals().signed >= 2, 'a re-sign before the refresh token expires');
    expect(renewals().signed).toBe(2);
    expect(svc.stats.refreshToken.ok).toBe(renewals().refreshed);
  });

  it('runs the signed flow when the service refuses the refresh token', async () => {
    const svc1 = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    const k1 = kit(svc1, { stateDir });
    k1.tokens.start();
    const cached = await k1.tokens.current();
    await k1.close();
    await svc1.close();
    // A service on the same address that never issued our tokens: refresh is refused (1007), getToken must follow.
    const svc = await service(SEED, { port: svc1.port });
    const k2 = kit(svc, { stateDir });
    k2.tokens.start();
    k2.tokens.invalidate(cached);
    await expect(k2.tokens.current()).resolves.not.toBe(cached);
    expect(svc.stats.refreshToken).toMatchObject({ total: 1, ok: 0 });
    expect(svc.stats.getToken.ok).toBe(1);
  });

  it('gets a token after three 1006 answers, backing off in between', async () => {
    const svc = await service(SEED);
    svc.faults.failNextGetToken(3);
    const k = kit(svc);
    k.tokens.start();
    await k.tokens.current();
    expect(svc.stats.getToken.byCode[1006]).toBe(3);
    expect(svc.stats.getToken.ok).toBe(1);
    expect(k.logText()).toContain('ERR_CLOUD_1006');
  });

  it('a wrong "synced" clock: 1003, then one retry on server time succeeds', async () => {
    const svc = await service(SEED);
    svc.faults.shiftClockMs(10 * 60_000);
    const k = kit(svc);
    k.tokens.start();
    await k.tokens.current();
    expect(svc.stats.getToken.byCode[1003]).toBe(1);
    expect(svc.stats.getToken.ok).toBe(1);
    expect(Math.abs(k.serverTime.offsetMs()! - 10 * 60_000)).toBeLessThan(1500);
  });

  it('no time source at all: takes a server sample first and signs with server time, no 1003', async () => {
    const svc = await service(SEED);
    svc.faults.shiftClockMs(10 * 60_000);
    const k = kit(svc, { verdict: UNKNOWN });
    k.tokens.start();
    await k.tokens.current();
    expect(svc.stats.getToken.byCode[1003]).toBeUndefined();
    expect(svc.stats.getToken.total).toBe(1);
    expect(k.tokens.snapshot().clock).toMatchObject({ trusted: true, source: 'server' });
  });

  it('a wall clock in 1970 never reaches the wire; the stored token is offered as it is', async () => {
    const svc = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    const good = kit(svc, { stateDir });
    good.tokens.start();
    const token = await good.tokens.current();
    await good.close();
    const clock1970 = withWallClock(() => 86_400_000);
    const unsynced = { verdict: 'unsynced' as const, source: 'floor' as const, detail: 'before build time' };
    const changes = new Changes();
    const k = kit(svc, { stateDir, clock: clock1970, verdict: unsynced, manager: { onChange: changes.onChange } });
    k.tokens.start();
    await expect(k.tokens.current()).resolves.toBe(token);
    // Beside handing out the cached token, it fetched server time so the expiry can be judged.
    await changes.until(() => k.tokens.snapshot().clock.trusted, 'a server time sample');
    expect(k.tokens.snapshot().clock.source).toBe('server');
    expect(svc.stats.getToken.total).toBe(1);
    for (const ts of svc.stats.getToken.timestamps) expect(Math.abs(Number(ts) - Date.now())).toBeLessThan(60_000);
  });

  it('a refresh without trusted time never makes the untrusted clock the floor', async () => {
    const svc = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    const good = kit(svc, { stateDir });
    good.tokens.start();
    await good.tokens.current();
    const floor = good.store.getMeta('lastServerTimeMs');
    await good.close();
    // A clock two days ahead, no time source, and every server time sample too slow to count.
    const ahead = withWallClock(() => Date.now() + 2 * 86_400_000);
    svc.faults.setLatencyMs(60);
    const k = kit(svc, { stateDir, clock: ahead, verdict: UNKNOWN, maxRttMs: 20 });
    k.tokens.start();
    const cached = await k.tokens.current();
    k.tokens.invalidate(cached);
    await expect(k.tokens.current()).resolves.not.toBe(cached);
    expect(k.tokens.snapshot().renewals.refreshed).toBe(1);
    expect(k.serverTime.now()).toBeUndefined();
    expect(k.store.getMeta('lastServerTimeMs')).toBe(floor);
  });

  it('single-flight: concurrent callers share one signed request', async () => {
    const svc = await service(SEED);
    svc.faults.setLatencyMs(100);
    const k = kit(svc);
    k.tokens.start();
    const tokens = await Promise.all(Array.from({ length: 20 }, () => k.tokens.current()));
    expect(new Set(tokens).size).toBe(1);
    expect(svc.stats.getToken.total).toBe(1);
  });

  it('invalidate() renews through refresh first', async () => {
    const svc = await service(SEED);
    const k = kit(svc);
    k.tokens.start();
    const first = await k.tokens.current();
    k.tokens.invalidate(first);
    const second = await k.tokens.current();
    expect(second).not.toBe(first);
    expect(svc.stats.refreshToken.ok).toBe(1);
    expect(svc.stats.getToken.total).toBe(1);
  });

  it('a config for another botId discards the cached pair', async () => {
    const svc = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    const k1 = kit(svc, { stateDir });
    k1.tokens.start();
    await k1.tokens.current();
    await k1.close();
    const k2 = kit(svc, { stateDir, identity: { kind: 'bot', id: 'bot-2' } });
    expect(k2.store.peekPair()).toBeUndefined();
    k2.tokens.start();
    await k2.tokens.current();
    expect(svc.stats.getToken.ok).toBe(2);
  });

  it('a corrupt database is moved aside and the agent signs again', async () => {
    const svc = await service(SEED);
    const stateDir = tempDir('botlink-tokens-');
    writeFileSync(join(stateDir, 'botlink.db'), 'this is not a database'.repeat(100));
    const k = kit(svc, { stateDir });
    k.tokens.start();
    await k.tokens.current();
    expect(readdirSync(stateDir).some((f) => f.startsWith('botlink.db.corrupt-'))).toBe(true);
  });

  it('wrong secret: fails fast for a caller who asks, with its fix and no secret anywhere', async () => {
    const svc = await service(SEED);
    const k = kit(svc, { secret: 'not-the-secret' });
    k.tokens.start();
    const err = (await k.tokens.current({ failFast: true }).catch((e: unknown) => e)) as Error & {
      code: string;
      retry: string;
      fix: string;
    };
    expect(err.code).toBe('ERR_CLOUD_1005');
    expect(err.retry).toBe('needs-config');
    expect(err.fix).toContain('secret-key');
    expect(k.tokens.snapshot().lastError).toMatchObject({ code: 'ERR_CLOUD_1005', fix: expect.stringContaining('secret-key') });
  });

  it('the secret never reaches the database file, the log or an error', async () => {
    const svc = await service(SEED);
    svc.faults.failNextGetToken(1);
    const k = kit(svc);
    k.tokens.start();
    const first = await k.tokens.current();
    k.tokens.invalidate(first);
    await k.tokens.current();
    expect(k.tokens.snapshot().renewals.refreshed).toBe(1);
    // The database file and its WAL, read as raw bytes.
    for (const f of readdirSync(k.stateDir)) {
      expect(readFileSync(join(k.stateDir, f)).includes(Buffer.from(SECRET))).toBe(false);
    }
    const log = k.logText();
    expect(log.length).toBeGreaterThan(0);
    expect(log).not.toContain(SECRET);
    expect(JSON.stringify(k.tokens.snapshot())).not.toContain(SECRET);
  });

  it('a renew lock name bound by a stranger (who cannot prove the key) does not stop renewals', async () => {
    const svc = await service(SEED);
    const k = kit(svc);
    const squatter = createServer((socket) => socket.destroy());
    squatter.listen(lockAddress(k.store.requireLockKey(), 'renew'));
    await once(squatter, 'listening');
    cleanups.push(() => squatter.close());
    k.tokens.start();
    await k.tokens.current();
    expect(svc.stats.getToken.ok).toBe(1);
    expect(k.logText()).toMatch(/ERR_LOCK_UNUSABLE.*renew lock unavailable .*could not prove it knows the key.*renewing without it/);
  });

  it('a pair held unsaved gives way to a newer one another process saved once the disk took it', async () => {
    const svc = await service(SEED);
    const stateDir = join(tempDir('botlink-tokens-'), 'state');
    mkdirSync(stateDir);
    cleanups.push(mountTmpfs(stateDir, 300));
    const storeA = TokenStore.open(stateDir);
    cleanups.push(() => storeA.close());
    // A's retries wait a minute: only a renewal of its own makes it look at the store again.
    const a = kit(svc, { manager: { store: storeA, saveBackoff: { baseMs: 60_000, capMs: 60_000 }, random: () => 0.99 } });
    a.tokens.start();
    const first = await a.tokens.current();
    const filler = fillUp(stateDir);
    a.tokens.invalidate(first);
    const unsaved = await a.tokens.current();
    expect(a.tokens.snapshot().store.persisted).toBe(false);

    rmSync(filler);
    const storeB = TokenStore.open(stateDir);
    cleanups.push(() => storeB.close());
    const b = kit(svc, { manager: { store: storeB } });
    b.tokens.start();
    expect(await b.tokens.current()).toBe(first);
    b.tokens.invalidate(first);
    const newer = await b.tokens.current();
    expect(storeB.peekPair()?.pair.accessToken).toBe(newer);

    a.tokens.invalidate(unsaved);
    expect(await a.tokens.current()).toBe(newer);
    expect(a.tokens.snapshot().store).toEqual({ persisted: true, lastError: null });
    expect(storeA.peekPair()?.pair.accessToken).toBe(newer);
    expect(svc.stats.refreshToken.ok).toBe(2);
  });
});
