import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Seed } from '../../src/service/seed.js';
import type { ReferenceService } from '../../src/service/server.js';
import { createTestService, type TestService, type TestServiceOptions } from '../../src/service/testing.js';
import { DAEMON_SECRET, DeviceDir, startDaemon, type DaemonProc } from './daemon-proc.js';

/** The accounts a DeviceDir signs against by default: AK with DAEMON_SECRET, vendor V1 owning bot-1. */
export const DAEMON_SEED: Seed = {
  accounts: [{ accessKeyId: 'AK', secretKey: DAEMON_SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }],
};

export type Cleanup = () => unknown;

/** What a test file sets up, each piece undone after every test, newest first. */
export interface Harness {
  readonly cleanups: { push(...fns: Cleanup[]): void };
  /** A reference service (seed undefined: the service's default seed), closed after the test. */
  service(seed?: Seed, opts?: TestServiceOptions): Promise<TestService>;
  /** A device dir whose baseUrl is the service's (or the given URL), removed after the test. */
  device(target: ReferenceService | string, config?: Record<string, unknown>, secret?: string): DeviceDir;
  /** `botlink run` for the device (from `bundle` if given), SIGKILLed after the test. */
  daemon(device: DeviceDir, env?: NodeJS.ProcessEnv, bundle?: string): DaemonProc;
  /** A fresh temp dir, removed after the test. */
  tempDir(prefix: string): string;
}

/** Registers the file's afterEach: runs the cleanups, then `afterCleanup` (checks that must see teardown too). */
export function useHarness(afterCleanup?: () => void): Harness {
  const stack: Cleanup[] = [];
  afterEach(async () => {
    while (stack.length) await stack.pop()!();
    afterCleanup?.();
  });
  const cleanups = { push: (...fns: Cleanup[]): void => void stack.push(...fns) };
  return {
    cleanups,
    async service(seed, opts = {}) {
      const svc = await createTestService({ ...(seed !== undefined && { seed }), ...opts });
      cleanups.push(() => svc.close());
      return svc;
    },
    device(target, config = { botId: 'bot-1' }, secret) {
      const d = new DeviceDir({ baseUrl: typeof target === 'string' ? target : target.url, ...config }, secret);
      cleanups.push(() => d.remove());
      return d;
    },
    daemon(device, env, bundle) {
      const p = startDaemon(device, env, bundle);
      cleanups.push(() => p.stop('SIGKILL'));
      return p;
    },
    tempDir(prefix) {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      return dir;
    },
  };
}

/** Unhandled rejections and uncaught exceptions while the file's tests run: a crash in a callback must fail a test. */
export function collectUnexpected(): unknown[] {
  const unexpected: unknown[] = [];
  const onUnexpected = (err: unknown): void => {
    unexpected.push(err);
  };
  beforeAll(() => {
    process.on('unhandledRejection', onUnexpected);
    process.on('uncaughtException', onUnexpected);
  });
  afterAll(() => {
    process.off('unhandledRejection', onUnexpected);
    process.off('uncaughtException', onUnexpected);
  });
  return unexpected;
}
