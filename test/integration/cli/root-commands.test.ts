import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { botlinkAs } from '../../helpers/bundle.js';
import { DaemonProc, runCli, type DeviceDir } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { treeOf } from '../../helpers/tree.js';
import { waitFor } from '../../helpers/wait-for.js';

// The unit runs the daemon as a DynamicUser and technicians run `sudo botlink …`: real uids here, the
// commands as root (this test's own uid) in folders owned by UID, the daemon as UID through setpriv.
const UID = 4242;

const { cleanups, service, device, tempDir } = useHarness();

function requireRoot(): void {
  if (process.geteuid?.() !== 0) throw new Error('this test runs commands as root and the daemon as another uid: run it as root');
}

/**
 * A device dir whose folders and files belong to UID, as systemd's StateDirectory/LogsDirectory would,
 * except the secret: root's commands read /etc/botlink/secret-key (root's), the daemon its own copy
 * in the credentials folder systemd gives it (LoadCredential).
 */
function ownedDevice(baseUrl: string): DeviceDir {
  requireRoot();
  const d = device(baseUrl);
  for (const dir of [d.stateDir, d.runtimeDir, join(d.dir, 'log'), join(d.dir, 'credentials')]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(d.dir, 'credentials', 'secret-key'), readFileSync(join(d.dir, 'secret-key')), { mode: 0o600 });
  for (const path of treeOf(d.dir)) if (path !== join(d.dir, 'secret-key')) chownSync(path, UID, UID);
  return d;
}

/** Whatever under `dir` does not belong to UID: what the daemon's user could not open or replace. */
function notOwned(d: DeviceDir): string[] {
  return treeOf(d.dir).filter((path) => path !== join(d.dir, 'secret-key') && lstatSync(path).uid !== UID);
}

/** `botlink run` as UID, the way the unit runs it as its DynamicUser (from a copy UID can read: the checkout may be closed to it). */
function daemonAsUser(d: DeviceDir): DaemonProc {
  const child = spawn(...botlinkAs(UID, ['run', '--config', d.configFile]), {
    env: cleanEnv({ BOTLINK_SECRET_KEY_FILE: join(d.dir, 'credentials', 'secret-key') }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p = new DaemonProc(child);
  cleanups.push(() => p.stop('SIGKILL'));
  return p;
}

async function connectedAsUser(d: DeviceDir, p: DaemonProc): Promise<void> {
  const exited = p.exited.then(({ code }) => {
    throw new Error(`the daemon exited with ${code}: ${p.stderr}`);
  });
  await Promise.race([d.waitForLink('connected', 15_000), exited]);
  expect(d.status()?.pid).toBe(p.child.pid);
}

describe('commands run as root leave nothing the daemon cannot use', () => {
  it("sudo botlink token creates the log and the database as the folders' owner; the daemon then runs", async () => {
    const svc = await service(DAEMON_SEED);
    const d = ownedDevice(svc.url);
    const token = await runCli(['token', '--config', d.configFile]);
    expect(token.code, token.stderr).toBe(0);
    expect(lstatSync(d.logFile).uid).toBe(UID);
    expect(lstatSync(join(d.stateDir, 'botlink.db')).uid).toBe(UID);
    expect(notOwned(d)).toEqual([]);

    const p = daemonAsUser(d);
    await connectedAsUser(d, p);
    // The daemon used the token the root command saved.
    expect(svc.stats.getToken.total).toBe(1);
    await waitFor(() => d.log().includes('botlink starting'), 15_000, "the daemon's first line in the log file");
  });

  it('a root-owned log file (left by an older release) is no configuration error: the daemon logs to stderr and runs', async () => {
    const svc = await service(DAEMON_SEED);
    const d = ownedDevice(svc.url);
    writeFileSync(d.logFile, '');
    chownSync(d.logFile, 0, 0);
    chmodSync(d.logFile, 0o644);
    const p = daemonAsUser(d);
    await connectedAsUser(d, p);
    await waitFor(() => p.stderr.includes('"msg":"link connected"'), 15_000, 'the log on stderr');
    expect(p.stderr).toMatch(/cannot write the log file .*botlink\.log \(EACCES\).*Logging to stderr \(journald\) instead/);
  });

  it('sudo botlink status on a damaged database changes nothing; the daemon moves it aside itself', async () => {
    const svc = await service(DAEMON_SEED);
    const d = ownedDevice(svc.url);
    const db = join(d.stateDir, 'botlink.db');
    writeFileSync(db, 'this is not a database'.repeat(200));
    chownSync(db, UID, UID);
    const before = readFileSync(db);

    const status = await runCli(['status', '--config', d.configFile]);
    expect(status.code).toBe(65);
    expect(status.stderr).toMatch(/botlink\.db is damaged .*left as it is.*daemon moves it aside/);
    expect(readdirSync(d.stateDir)).toEqual(['botlink.db']);
    expect(readFileSync(db)).toEqual(before);
    expect(notOwned(d)).toEqual([]);

    const p = daemonAsUser(d);
    await connectedAsUser(d, p);
    expect(readdirSync(d.stateDir).some((f) => f.startsWith('botlink.db.corrupt-'))).toBe(true);
    expect(notOwned(d)).toEqual([]);
  });
});

describe("a root-run command appends only to the daemon's own log file, whatever its user put at the path", () => {
  const PRECIOUS = 'a root-owned file, not a log\n';
  /** What the daemon's user (UID, who owns the log folder) could leave at the log's path, pointing at `target`. */
  const plants: [what: string, plant: (logFile: string, target: string) => void, said: RegExp][] = [
    [
      'a symlink to a root-owned file',
      (logFile, target) => {
        symlinkSync(target, logFile);
        lchownSync(logFile, UID, UID);
      },
      /it is a symbolic link/,
    ],
    [
      'a hard link to a root-owned file',
      (logFile, target) => linkSync(target, logFile),
      /it belongs to uid 0, not to the log folder's owner \(uid 4242\)/,
    ],
    [
      'a FIFO, which would hang an open for writing',
      (logFile) => {
        execFileSync('mkfifo', [logFile]);
        chownSync(logFile, UID, UID);
      },
      /it is a FIFO/,
    ],
  ];
  const commands: [name: string, args: (d: DeviceDir) => string[]][] = [
    ['token', (d) => ['token', '--config', d.configFile]],
    ['provision', (d) => ['provision', '--config', d.configFile, '--vendor-id', 'V1', '--device-id', 'SN-root']],
  ];
  for (const [what, plant, said] of plants) {
    it.each(commands)(
      `sudo botlink %s with ${what} at the log's path: answers, logs nothing, the target untouched`,
      async (_name, args) => {
        const svc = await service(DAEMON_SEED);
        const d = ownedDevice(svc.url);
        const target = join(tempDir('botlink-target-'), 'precious');
        writeFileSync(target, PRECIOUS, { mode: 0o600 });
        plant(d.logFile, target);
        const run = await runCli(args(d), { timeoutMs: 10_000 });
        expect(run.code, run.stderr).toBe(0);
        expect(run.stderr).toMatch(/not logging: refusing the log file .*botlink\.log: /);
        expect(run.stderr).toMatch(said);
        expect(readFileSync(target, 'utf8')).toBe(PRECIOUS);
        expect(lstatSync(target).uid).toBe(0);
      },
    );
  }
});
