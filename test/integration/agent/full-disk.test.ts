import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimInstance } from '../../../src/agent/store/instance.js';
import { TokenStore, type StoreIdentity, type TokenPair } from '../../../src/agent/store/token-store.js';
import type { ReferenceService } from '../../../src/service/server.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { Changes } from '../../helpers/changes.js';
import { runCli } from '../../helpers/daemon-proc.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { fillUp, mountTmpfs, remount } from '../../helpers/tmpfs.js';
import { waitFor } from '../../helpers/wait-for.js';

// Real filesystems that run out of space or turn read-only: a 300 KB tmpfs, filled or remounted ro.
const SECRET = 'full-disk-s3cret';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };
const FAST = { baseMs: 20, capMs: 200 };
const DISK_KB = 300;

const { cleanups, service, device, daemon, tempDir } = useHarness();

/** An empty folder with its own small filesystem, unmounted after the test. */
function smallDisk(dir = mkdtempSync(join(tempDir('botlink-disk-'), 'state-'))): string {
  mkdirSync(dir, { recursive: true });
  cleanups.push(mountTmpfs(dir, DISK_KB));
  return dir;
}

/** A token manager (its log on a healthy disk) whose store lives in `stateDir`. */
function kitOn(svc: ReferenceService, stateDir: string): { k: AgentKit; store: TokenStore; changes: Changes } {
  const store = TokenStore.open(stateDir);
  const changes = new Changes();
  const k = new AgentKit({
    url: svc.url,
    secret: SECRET,
    manager: { store, backoff: FAST, saveBackoff: FAST, onChange: changes.onChange },
  });
  cleanups.push(
    () => store.close(),
    () => k.close(),
  );
  return { k, store, changes };
}

const bot: StoreIdentity = { baseUrl: 'http://127.0.0.1:9', accessKeyId: 'AK', kind: 'bot', id: 'bot-1' };

describe('token manager on a full or read-only disk', () => {
  it('a full disk: the pair the server issued is used at once, and saved when space returns', async () => {
    const svc = await service(SEED);
    const stateDir = smallDisk();
    const { k, store, changes } = kitOn(svc, stateDir);
    k.tokens.start();
    const first = await k.tokens.current();
    const filler = fillUp(stateDir);

    k.tokens.invalidate(first);
    const second = await k.tokens.current();
    expect(second).not.toBe(first);
    expect(svc.stats.refreshToken.ok).toBe(1);
    expect(k.tokens.snapshot().store).toEqual({ persisted: false, lastError: expect.stringMatching(/database or disk is full/) });
    expect(k.logText()).toMatch(/state not persisted: cannot save the token \(database or disk is full\)/);
    expect(store.peekPair()?.pair.accessToken).toBe(first);

    rmSync(filler);
    await changes.until(() => k.tokens.snapshot().store.persisted, 'the save once space returned');
    expect(store.peekPair()?.pair.accessToken).toBe(second);
    expect(k.logText()).toMatch(/state persisted again/);
    expect(svc.stats.getToken.total).toBe(1);
  });

  it('a full disk at start: the cached pair is read and the instance lock taken, with no byte free', async () => {
    const stateDir = smallDisk();
    const pair: TokenPair = { accessToken: 'a', accessExpiresAt: 2e12, refreshToken: 'r', refreshExpiresAt: 2e12, issuedAt: 1e12 };
    const before = TokenStore.open(stateDir);
    before.savePair(bot, pair);
    before.close();
    fillUp(stateDir);
    const store = TokenStore.open(stateDir);
    cleanups.push(() => store.close());
    expect(store.loadPair(bot)).toEqual(pair);
    const claim = await claimInstance(store);
    expect(claim.ok && 'lock' in claim).toBe(true);
    if (claim.ok && 'lock' in claim) await claim.lock.release();
  });

  it('a read-only state dir: the store opens, a renewal is used, and it is saved once the disk is writable', async () => {
    const svc = await service(SEED);
    const stateDir = smallDisk();
    const seeded = kitOn(svc, stateDir);
    seeded.k.tokens.start();
    const first = await seeded.k.tokens.current();
    await seeded.k.close();
    seeded.store.close();
    remount(stateDir, 'ro');

    const { k, store, changes } = kitOn(svc, stateDir);
    k.tokens.start();
    await expect(k.tokens.current()).resolves.toBe(first);
    k.tokens.invalidate(first);
    const second = await k.tokens.current();
    expect(second).not.toBe(first);
    expect(k.tokens.snapshot().store).toEqual({ persisted: false, lastError: expect.stringMatching(/readonly/) });

    remount(stateDir, 'rw');
    await changes.until(() => k.tokens.snapshot().store.persisted, 'the save once the disk was writable');
    expect(store.peekPair()?.pair.accessToken).toBe(second);
  });
});

describe('the daemon on a full or read-only disk', () => {
  it('stays connected through renewals on a full disk, starts again on it, and saves once space returns', async () => {
    const svc = await service(DAEMON_SEED, { accessTtlS: 4 });
    const d = device(svc);
    smallDisk(d.stateDir);
    const p = daemon(d);
    await d.waitForLink('connected');
    const filler = fillUp(d.stateDir);

    await waitFor(() => d.status()?.store?.persisted === false, 15_000, 'status.json store.persisted = false');
    expect(d.status()!.store!.lastError).toMatch(/database or disk is full/);
    await waitFor(() => d.log().includes('state not persisted'), 15_000, 'the log line');
    const human = await runCli(['status', '--config', d.configFile]);
    expect(human.stdout).toMatch(/^state: +not persisted: database or disk is full/m);
    const refreshes = svc.stats.refreshToken.ok;
    await waitFor(() => svc.stats.refreshToken.ok >= refreshes + 2, 15_000, 'two more refreshes while full');
    expect(d.status()!.link).toMatchObject({ state: 'connected', reconnects: 0 });

    expect((await p.stop('SIGTERM')).code).toBe(0);
    const again = daemon(d);
    await waitFor(
      () => d.status()?.pid === again.child.pid && d.status()?.link.state === 'connected',
      15_000,
      'connected after a restart on the full disk',
    );

    rmSync(filler);
    await waitFor(
      () => d.status()?.store?.persisted === true && d.log().includes('state persisted again'),
      15_000,
      'the save once space returned',
    );
    const held = d.status()!.token.accessExpiresAt!;
    const reader = TokenStore.open(d.stateDir, { readOnly: true });
    cleanups.push(() => reader.close());
    expect(reader.peekPair()!.pair.accessExpiresAt).toBeGreaterThanOrEqual(held);
  });

  it('starts on a read-only state dir with the cached pair and says the state is not persisted', async () => {
    const svc = await service(DAEMON_SEED, { accessTtlS: 4 });
    const d = device(svc);
    smallDisk(d.stateDir);
    const first = daemon(d);
    await d.waitForLink('connected');
    expect((await first.stop('SIGTERM')).code).toBe(0);
    remount(d.stateDir, 'ro');

    const p = daemon(d);
    await waitFor(() => d.status()?.pid === p.child.pid && d.status()?.link.state === 'connected', 15_000, 'connected on a read-only disk');
    await waitFor(() => d.status()?.store?.persisted === false, 15_000, 'status.json store.persisted = false');
    expect(d.status()!.store!.lastError).toMatch(/readonly/);
    expect(p.child.exitCode).toBeNull();
  });
});
