import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { botlinkAs } from '../../helpers/bundle.js';
import { DaemonProc, type DeviceDir } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { treeOf } from '../../helpers/tree.js';
import { waitFor } from '../../helpers/wait-for.js';

// metricsFile under the shipped unit (issue 27 item 4): the drop-in opens the collector's folder, and
// the daemon, run as the unit's uid with its umask, writes a file node_exporter's own user can read.
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const UNIT_FILE = join(ROOT, 'systemd', 'botlink.service');
const DROP_IN = join(ROOT, 'systemd', 'botlink.service.d', 'metrics-file.conf');
/** The daemon's uid, as DynamicUser= gives it one; its gid stands for the unit's Group=botlink. */
const UID = 4243;
/** Another user's file in the collector's folder (a root-run collector script's, say). */
const OTHER_UID = 4244;

const unitText = readFileSync(UNIT_FILE, 'utf8');
const dropInText = readFileSync(DROP_IN, 'utf8');
const { cleanups, service, device, tempDir } = useHarness();

/** The one value of `key` in `text`'s [Service] section. */
function serviceSetting(text: string, key: string): string {
  const service = text.split(/^\[/m).find((s) => s.startsWith('Service]')) ?? '';
  const values = [...service.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1]!);
  expect(values, `${key}= in [Service]`).toHaveLength(1);
  return values[0]!;
}

/** systemd-analyze verify of the unit with `dropIn` beside it, as /etc/systemd/system/botlink.service.d/ holds it. */
function verify(dropIn: string): { status: number | null; output: string } {
  const dir = tempDir('botlink-verify-');
  const unit = join(dir, 'botlink.service');
  // verify checks ExecStart's program exists; a host without /usr/bin/node gets this node instead.
  writeFileSync(unit, existsSync('/usr/bin/node') ? unitText : unitText.replaceAll('/usr/bin/node', process.execPath));
  mkdirSync(join(dir, 'botlink.service.d'));
  writeFileSync(join(dir, 'botlink.service.d', 'metrics-file.conf'), dropIn);
  const r = spawnSync(requireTool('systemd-analyze'), ['verify', '--man=no', unit], {
    encoding: 'utf8',
    env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
  });
  return { status: r.status, output: (r.stdout + r.stderr).trim() };
}

/** What a file is: its bytes, mode, owner and last change. */
function snapshot(path: string): { text: string; mode: number; uid: number; gid: number; mtimeMs: number } {
  const s = lstatSync(path);
  return { text: readFileSync(path, 'utf8'), mode: s.mode, uid: s.uid, gid: s.gid, mtimeMs: s.mtimeMs };
}

describe('systemd/botlink.service.d/metrics-file.conf', () => {
  const readWrite = serviceSetting(dropInText, 'ReadWritePaths');
  const folder = readWrite.replace(/^-/, '');

  it("opens node_exporter's textfile folder, optional, and documents a metricsFile inside it", () => {
    // "-": a folder that is missing must not keep botlink from starting (systemd fails the unit otherwise).
    expect(readWrite).toBe('-/var/lib/prometheus/node-exporter');
    const documented = /"metricsFile": "([^"]+)"/.exec(dropInText)?.[1];
    expect(documented).toBeDefined();
    expect(dirname(documented!)).toBe(folder);
    expect(documented!).toMatch(/\.prom$/);
    // The folder's permissions it asks for: the daemon's group may add files, the sticky bit guards everyone's.
    expect(dropInText).toContain(`sudo chgrp ${serviceSetting(unitText, 'Group')} ${folder} && sudo chmod 1775 ${folder}`);
  });

  it('passes systemd-analyze verify with the unit, with no message at all', () => {
    expect(verify(dropInText)).toEqual({ status: 0, output: '' });
  });

  it('has verify read the drop-in (the check can fail: a relative path is reported)', () => {
    const broken = dropInText.replace(`ReadWritePaths=${readWrite}`, 'ReadWritePaths=-var/lib/prometheus/node-exporter');
    expect(verify(broken).output).toMatch(/metrics-file\.conf:\d+: ReadWritePaths= path is not absolute/);
  });
});

describe('metricsFile written as the unit would write it', () => {
  /** A device dir owned by UID (as StateDirectory= and friends are), with a collector folder set up as the drop-in says. */
  function ownedDevice(baseUrl: string): { d: DeviceDir; collector: string; others: string[] } {
    if (process.geteuid?.() !== 0) throw new Error('this test runs the daemon as another uid: run it as root');
    const d0 = device(baseUrl);
    const collector = join(d0.dir, 'collector');
    d0.writeConfig({ baseUrl, botId: 'bot-1', metricsFile: join(collector, 'botlink.prom') });
    for (const dir of [d0.stateDir, d0.runtimeDir, dirname(d0.logFile)]) mkdirSync(dir, { recursive: true });
    for (const path of treeOf(d0.dir)) chownSync(path, UID, UID);
    // chgrp botlink && chmod 1775, owned by root as the package leaves it; node_exporter's and others' files in it.
    mkdirSync(collector);
    chownSync(collector, 0, UID);
    chmodSync(collector, 0o1775);
    const node = join(collector, 'node.prom');
    writeFileSync(node, 'node_textfile_example 1\n', { mode: 0o644 });
    const apt = join(collector, 'apt.prom');
    writeFileSync(apt, 'apt_upgrades_pending 0\n', { mode: 0o644 });
    chownSync(apt, OTHER_UID, OTHER_UID);
    return { d: d0, collector, others: [node, apt] };
  }

  /** `botlink run` as UID with the unit's UMask (setpriv keeps the umask its shell set). */
  function daemonAsUnit(d: DeviceDir, umask: string): DaemonProc {
    const [setpriv, args] = botlinkAs(UID, ['run', '--config', d.configFile]);
    const child = spawn('/bin/sh', ['-c', `umask ${umask} && exec "$@"`, 'sh', setpriv, ...args], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const p = new DaemonProc(child);
    cleanups.push(() => p.stop('SIGKILL'));
    return p;
  }

  it("is 0644 and the daemon's own under UMask=0077, replaced at stop, the folder's other files untouched", async () => {
    const umask = serviceSetting(unitText, 'UMask');
    expect(umask).toBe('0077');
    const svc = await service(DAEMON_SEED);
    const { d, collector, others } = ownedDevice(svc.url);
    const before = others.map(snapshot);
    const p = daemonAsUnit(d, umask);
    const exited = p.exited.then(({ code }) => {
      throw new Error(`the daemon exited with ${code}: ${p.stderr}`);
    });
    await Promise.race([d.waitForLink('connected', 15_000), exited]);
    // The unit's umask is the daemon's: what it creates without a mode of its own is private.
    expect(readFileSync(`/proc/${p.child.pid}/status`, 'utf8')).toMatch(/^Umask:\s+0077$/m);
    const file = join(collector, 'botlink.prom');
    await waitFor(() => existsSync(file), 10_000, 'metricsFile written');
    expect(statSync(file)).toMatchObject({ uid: UID, mode: 0o100644 });
    // status.json too is for the group and others to read (`botlink status`, doctor), whatever the umask.
    expect(statSync(join(d.runtimeDir, 'status.json')).mode & 0o777).toBe(0o644);

    const { code } = await p.stop('SIGTERM');
    expect(code, p.stderr).toBe(0);
    // The last write, as the daemon stopped: what a scrape after it shows. A file of its own, 0644, replaced.
    expect(readFileSync(file, 'utf8')).toContain('botlink_link_state{state="stopped"} 1');
    expect(statSync(file)).toMatchObject({ uid: UID, mode: 0o100644 });
    expect(others.map(snapshot)).toEqual(before);
    expect(readdirSync(collector).sort()).toEqual(['apt.prom', 'botlink.prom', 'node.prom']);
    expect(statSync(collector)).toMatchObject({ uid: 0, gid: UID, mode: 0o41775 });
  });
});
