// A vendor's broker as its operator runs it (DESIGN §3.7): a config and its key files in a folder of its
// own, `botlink broker` processes started from a bundle on it, and the operator's commands against it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Seed } from '../../src/service/seed.js';
import { cleanEnv } from '../../scripts/lib/env.js';
import { type CliRun, exec } from '../../scripts/lib/exec.js';
import { unitStart } from '../../scripts/lib/unit-start.js';
import { writeBrokerConfig } from './broker-files.js';
import { listening, type ServeRun, startListener } from './serve-proc.js';

/** The cloud a broker signs for: account AK holding `secret`, vendor V1 with no bot yet (the broker registers them). */
export function vendorSeed(secret: string): Seed {
  return { accounts: [{ accessKeyId: 'AK', secretKey: secret, vendors: [{ vendorId: 'V1', bots: [] }] }] };
}

export interface BrokerRigOptions {
  /** The bundle `botlink broker` runs from. */
  bundle: string;
  /** A cloud seeded with vendorSeed(secret). */
  cloudUrl: string;
  secret: string;
  /** Default SQLite in the rig's folder. */
  store?: string;
  /** More settings (limits …) over brokerSettings' defaults. */
  extra?: Record<string, unknown>;
  /** Run node with the unit's flags (systemd/botlink-broker.service), for figures of memory. */
  asUnit?: boolean;
}

/** The node flags systemd/botlink-broker.service starts the broker with. */
const UNIT_NODE_FLAGS = unitStart(join(import.meta.dirname, '..', '..'), 'botlink-broker.service').nodeFlags;

/** A `botlink broker` process that has said where it listens. */
export interface BrokerProc extends ServeRun {
  url: string;
  /** The admin listener's origin from its `admin on URL` line (a config with adminListen). */
  adminUrl(): Promise<string>;
  /** SIGTERM unless it already ended; how it ended. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface BrokerRig {
  /** The rig's folder: config, secret-key, token-key, state/broker.db (on SQLite), broker.log. */
  dir: string;
  configFile: string;
  /** The broker's log, where its audit lines go. */
  logFile: string;
  /** Another config beside configFile, with `extra` over its settings: its path. */
  writeConfig(name: string, extra: Record<string, unknown>): string;
  /** `botlink broker …args` run to its end, in our environment cleaned of BOTLINK_* and systemd's variables, plus `env`. */
  cli(args: string[], env?: Record<string, string>): Promise<CliRun>;
  /** A new enrollment code from `botlink broker code --vendor-id V1 --json …extra` (`--any-device` unless extra binds it). */
  code(extra?: string[]): Promise<string>;
  /** Starts `botlink broker` on configFile; resolves once it listens. Several started together share the store. */
  start(): Promise<BrokerProc>;
  /** Stops every broker still running, then removes the folder. */
  close(): Promise<void>;
}

/** The URL of the broker's `admin on URL` line, once written; rejects when it ends without one. */
function adminOn(run: ServeRun): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const match = /^admin on (https?:\/\/\S+)$/m.exec(run.stdout());
      if (!match) return;
      run.child.stdout?.off('data', check);
      resolve(match[1] as string);
    };
    run.child.stdout?.on('data', check);
    check();
    void run.exit.then(() => {
      check();
      reject(new Error(`no admin line; stdout=${run.stdout()} stderr=${run.stderr()}`));
    });
  });
}

/** Writes the broker's files into a new temp folder; no process runs until start(). */
export function brokerRig(o: BrokerRigOptions): BrokerRig {
  const dir = mkdtempSync(join(tmpdir(), 'botlink-broker-rig-'));
  const files = { cloudUrl: o.cloudUrl, secret: o.secret, ...(o.store !== undefined && { store: o.store }) };
  const writeConfig = (name: string, extra: Record<string, unknown>): string =>
    writeBrokerConfig(dir, { ...files, extra: { ...o.extra, ...extra } }, name);
  const configFile = writeConfig('config.json', {});
  const running: BrokerProc['stop'][] = [];
  const cli = (args: string[], env: Record<string, string> = {}): Promise<CliRun> =>
    exec(process.execPath, [o.bundle, 'broker', ...args], { env: cleanEnv(env) });
  return {
    dir,
    configFile,
    logFile: join(dir, 'broker.log'),
    writeConfig,
    cli,
    async code(extra = []) {
      const bound = extra.includes('--device-id') || extra.includes('--any-device');
      const r = await cli(['code', '--config', configFile, '--vendor-id', 'V1', '--json', ...(bound ? [] : ['--any-device']), ...extra]);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { code: string }).code;
    },
    async start() {
      // As for cli(): no CREDENTIALS_DIRECTORY of a unit the tests themselves may run under.
      const run = startListener(o.bundle, ['broker', '--config', configFile], {
        CREDENTIALS_DIRECTORY: '',
        ...(o.asUnit && { NODE_OPTIONS: UNIT_NODE_FLAGS.join(' ') }),
      });
      const stop = async (): ReturnType<BrokerProc['stop']> => {
        if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
        return run.exit;
      };
      running.push(stop);
      return { ...run, url: await listening(run), adminUrl: () => adminOn(run), stop };
    },
    async close() {
      await Promise.all(running.map((stop) => stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
