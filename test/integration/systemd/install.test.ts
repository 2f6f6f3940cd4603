import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { delimiter, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { appFileOf, BUNDLE, daemonFileOf } from '../../../scripts/build.mjs';
import { closed } from '../../../scripts/lib/exec.js';
import { useHarness } from '../../helpers/harness.js';
import { waitFor } from '../../helpers/wait-for.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SCRIPT = join(ROOT, 'scripts', 'install.sh');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
/** Commands that change files or the system: under --dry-run none may run at all. */
const MUTATORS = ['install', 'cp', 'mv', 'rm', 'ln', 'chmod', 'chown', 'mkdir', 'touch', 'tee', 'systemctl', 'groupadd'];
/** One install copies ~12 MB and runs `npm ls`: seconds on an idle machine, more on 2 busy cores. */
const INSTALL_TIMEOUT_MS = 60_000;
const REAL_NPM = execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim();

const { cleanups, tempDir } = useHarness();

/**
 * A PATH folder whose systemctl and npm (other than the read-only `npm ls`) only record that they were
 * called and fail; with `tripwire` the file-changing commands do the same.
 */
function fakeBin(tripwire: boolean): { dir: string; calls: () => string[] } {
  const dir = tempDir('botlink-fakebin-');
  const log = join(dir, 'calls.log');
  const record = `#!/bin/sh\necho "$(basename "$0") $*" >> '${log}'\nexit 1\n`;
  for (const name of tripwire ? MUTATORS : ['systemctl']) writeFileSync(join(dir, name), record, { mode: 0o755 });
  writeFileSync(join(dir, 'npm'), `#!/bin/sh\n[ "$1" = ls ] && exec '${REAL_NPM}' "$@"\n${record.slice(10)}`, { mode: 0o755 });
  const calls = () => {
    try {
      return readFileSync(log, 'utf8').trim().split('\n');
    } catch {
      return [];
    }
  };
  return { dir, calls };
}

function install(args: string[], bin: { dir: string }) {
  const r = spawnSync('bash', [SCRIPT, ...args], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${bin.dir}${delimiter}${process.env.PATH ?? ''}` },
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, output: r.stdout + r.stderr };
}

/** Every path below `dir` with its type and mode, to compare trees. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      out.push(`${relative(dir, p)} ${st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : 'file'} ${(st.mode & 0o7777).toString(8)}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

const mode = (path: string) => (statSync(path).mode & 0o7777).toString(8).padStart(4, '0');

describe('scripts/install.sh', () => {
  it('prints its usage for --help and refuses unknown options with 64', () => {
    const bin = fakeBin(true);
    const help = install(['--help'], bin);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: scripts\/install\.sh \[--prefix DIR\] \[--dry-run\]/);
    const bad = install(['--frobnicate'], bin);
    expect(bad.status).toBe(64);
    expect(bad.stderr).toContain("unknown option '--frobnicate'");
    expect(install(['--prefix'], bin).status).toBe(64);
    expect(bin.calls()).toEqual([]);
  });

  it('--dry-run --prefix prints every action and runs none of them', () => {
    const bin = fakeBin(true);
    const root = tempDir('botlink-root-');
    const r = install(['--dry-run', '--prefix', root], bin);
    expect(r.status, r.output).toBe(0);
    expect(bin.calls()).toEqual([]);
    expect(readdirSync(root)).toEqual([]);
    for (const line of [
      `+ install -m 0755 ${BUNDLE} ${root}/opt/botlink.new/dist/botlink.mjs`,
      `+ install -m 0644 ${appFileOf(BUNDLE)} ${root}/opt/botlink.new/dist/botlink.cjs`,
      `+ install -m 0644 ${daemonFileOf(BUNDLE)} ${root}/opt/botlink.new/dist/botlink-daemon.cjs`,
      `+ cp -a --no-preserve=ownership ${ROOT}node_modules/ws ${root}/opt/botlink.new/node_modules/ws`,
      `+ write ${root}/opt/botlink.new/bin/botlink (mode 0755)`,
      `+ mv -- ${root}/opt/botlink.new ${root}/opt/botlink`,
      `+ ln -sfn ../../../opt/botlink/bin/botlink ${root}/usr/local/bin/botlink`,
      `+ install -D -m 0644 ${ROOT}systemd/botlink.service ${root}/etc/systemd/system/botlink.service`,
      `+ install -D -m 0644 ${ROOT}systemd/botlink.logrotate ${root}/etc/logrotate.d/botlink`,
      `+ install -D -m 0644 ${ROOT}systemd/botlink-logrotate.service ${root}/etc/systemd/system/botlink-logrotate.service`,
      `+ install -D -m 0644 ${ROOT}systemd/botlink-logrotate.timer ${root}/etc/systemd/system/botlink-logrotate.timer`,
      `+ install -m 0600 ${ROOT}systemd/config.example.json ${root}/etc/botlink/config.json`,
    ]) {
      expect(r.stdout.split('\n')).toContain(line);
    }
    expect(r.stdout).toMatch(/^\+ cp -a --no-preserve=ownership \S+\/better-sqlite3\/build\/Release\/better_sqlite3\.node /m);
    expect(r.stdout).not.toContain('+ systemctl');
    expect(r.stdout).toContain('on the target create the group: groupadd --system botlink');
  });

  it('--dry-run without --prefix shows the systemctl steps and changes nothing (every changing command is a tripwire)', () => {
    const bin = fakeBin(true);
    const r = install(['--dry-run'], bin);
    expect(r.status, r.output).toBe(0);
    expect(bin.calls()).toEqual([]);
    const lines = r.stdout.split('\n');
    expect(lines).toContain(`+ install -D -m 0644 ${ROOT}systemd/botlink.service /etc/systemd/system/botlink.service`);
    expect(lines).toContain('+ systemctl daemon-reload');
    // The unit's Group=botlink: made when this host has no such group yet.
    const hasGroup = spawnSync('getent', ['group', 'botlink']).status === 0;
    const groupadd = lines.indexOf('+ groupadd --system botlink');
    expect(groupadd >= 0).toBe(!hasGroup);
    if (!hasGroup) expect(groupadd).toBeLessThan(lines.indexOf('+ systemctl daemon-reload'));
    expect(lines).toContain('+ systemctl enable botlink.service');
    expect(lines).toContain('+ systemctl enable --now botlink-logrotate.timer');
    // The broker's unit is installed, never enabled or started: it runs on a vendor's host, once configured.
    expect(lines).toContain(`+ install -D -m 0644 ${ROOT}systemd/botlink-broker.service /etc/systemd/system/botlink-broker.service`);
    expect(lines.filter((l) => l.startsWith('+ systemctl') && l.includes('broker'))).toEqual([]);
  });

  // One tree for both runs: the second is idempotent's first check, and a fresh install the first (one install fewer).
  it('installs a working tree into a prefix (program, command, unit, logrotate, config 0600, no secret, no systemctl); a second run upgrades the program, keeps an edited config and leaves the same tree', {
    timeout: 2 * INSTALL_TIMEOUT_MS,
  }, () => {
    const bin = fakeBin(false);
    const root = tempDir('botlink-root-');
    const r = install(['--prefix', root], bin);
    expect(r.status, r.output).toBe(0);
    expect(bin.calls()).toEqual([]);

    const app = join(root, 'opt', 'botlink');
    // Buffer.equals: a deep toEqual over a megabyte-sized bundle takes seconds.
    expect(readFileSync(join(app, 'dist', 'botlink.mjs')).equals(readFileSync(BUNDLE))).toBe(true);
    expect(mode(join(app, 'dist', 'botlink.mjs'))).toBe('0755');
    expect(readFileSync(join(app, 'dist', 'botlink.cjs')).equals(readFileSync(appFileOf(BUNDLE)))).toBe(true);
    expect(readFileSync(join(app, 'dist', 'botlink-daemon.cjs')).equals(readFileSync(daemonFileOf(BUNDLE)))).toBe(true);
    expect(mode(join(app, 'bin', 'botlink'))).toBe('0755');
    expect(readFileSync(join(root, 'etc/systemd/system/botlink.service'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'systemd/botlink.service'), 'utf8'),
    );
    expect(mode(join(root, 'etc/systemd/system/botlink.service'))).toBe('0644');
    expect(readFileSync(join(root, 'etc/logrotate.d/botlink'), 'utf8')).toBe(readFileSync(join(ROOT, 'systemd/botlink.logrotate'), 'utf8'));
    expect(mode(join(root, 'etc/logrotate.d/botlink'))).toBe('0644');
    // logrotate.timer runs daily; this pair makes the snippet's maxsize count every hour.
    for (const unit of ['botlink-logrotate.service', 'botlink-logrotate.timer']) {
      expect(readFileSync(join(root, 'etc/systemd/system', unit), 'utf8')).toBe(readFileSync(join(ROOT, 'systemd', unit), 'utf8'));
      expect(mode(join(root, 'etc/systemd/system', unit))).toBe('0644');
    }
    expect(readFileSync(join(root, 'etc/systemd/system/botlink-broker.service'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'systemd/botlink-broker.service'), 'utf8'),
    );
    expect(readFileSync(join(app, 'broker-config.example.json'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'systemd/broker-config.example.json'), 'utf8'),
    );
    expect(mode(join(root, 'etc/botlink'))).toBe('0755');
    expect(readFileSync(join(root, 'etc/botlink/config.json'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'systemd/config.example.json'), 'utf8'),
    );
    expect(mode(join(root, 'etc/botlink/config.json'))).toBe('0600');
    expect(readdirSync(join(root, 'etc/botlink'))).toEqual(['config.json']);
    expect(r.stdout).toContain("sudo sh -c 'umask 077 && cat > /etc/botlink/secret-key'");
    expect(readdirSync(join(root, 'opt'))).toEqual(['botlink']);

    // Production dependencies only, native addons reduced to their compiled files.
    const modules = readdirSync(join(app, 'node_modules'));
    expect(modules).toEqual(expect.arrayContaining(Object.keys(PKG.dependencies)));
    for (const dev of Object.keys(PKG.devDependencies)) expect(modules).not.toContain(dev.split('/')[0]);
    expect(readdirSync(join(app, 'node_modules/better-sqlite3/build/Release'))).toContain('better_sqlite3.node');
    expect(readdirSync(join(app, 'node_modules/unix-dgram/build/Release'))).toEqual(['unix_dgram.node']);
    expect(readdirSync(join(app, 'node_modules/better-sqlite3'))).not.toContain('deps');

    // The command resolves through the relative link into this tree, wherever the tree is.
    const command = join(root, 'usr/local/bin/botlink');
    expect(lstatSync(command).isSymbolicLink()).toBe(true);
    expect(realpathSync(command)).toBe(realpathSync(join(app, 'bin', 'botlink')));

    // Idempotent: the same tree after a second run, the operator's edited config kept as it is.
    const config = join(root, 'etc/botlink/config.json');
    const edited = '{"baseUrl": "https://cloud.example.net", "accessKeyId": "AK", "botId": "bot-7"}\n';
    writeFileSync(config, edited);
    const before = tree(root);
    const again = install(['--prefix', root], bin);
    expect(again.status, again.output).toBe(0);
    expect(again.stdout).toContain(`keeping ${config}`);
    expect(again.stdout).not.toContain('next: edit /etc/botlink/config.json');
    expect(readFileSync(config, 'utf8')).toBe(edited);
    expect(mode(config)).toBe('0600');
    expect(tree(root)).toEqual(before);
    expect(bin.calls()).toEqual([]);
  });

  it('the installed command runs from the prefix alone and loads its native addons from it, each only when used', {
    timeout: INSTALL_TIMEOUT_MS,
  }, async () => {
    const root = tempDir('botlink-root-');
    expect(install(['--prefix', root], fakeBin(false)).status).toBe(0);
    const app = join(root, 'opt', 'botlink');
    // The copied addons were built for the node running this test; the wrapper runs /usr/bin/node, which
    // is that node except under scripts/test-runtimes.sh: then run the installed bundle on this node.
    const wrapper = join(root, 'usr/local/bin/botlink');
    const sameNode = realpathSync(process.execPath) === realpathSync('/usr/bin/node');
    const [cmd, ...pre] = sameNode ? [wrapper] : [process.execPath, join(app, 'dist', 'botlink.mjs')];
    // Every native addon the process loads, by file: the addons load at first use, so --version loads none.
    const probe = tempDir('botlink-dlopen-');
    const dlopenLog = join(probe, 'dlopen.log');
    writeFileSync(
      join(probe, 'probe.cjs'),
      "const { appendFileSync } = require('node:fs'); const dlopen = process.dlopen;\n" +
        'process.dlopen = function (m, file, ...rest) { appendFileSync(process.env.DLOPEN_LOG, file + "\\n"); return dlopen.call(this, m, file, ...rest); };\n',
    );
    const env = { ...process.env, NODE_OPTIONS: `--require ${join(probe, 'probe.cjs')}`, DLOPEN_LOG: dlopenLog };
    const loaded = (): string[] => (existsSync(dlopenLog) ? readFileSync(dlopenLog, 'utf8').trim().split('\n') : []);
    const version = spawnSync(cmd!, [...pre, '--version'], { encoding: 'utf8', cwd: root, env });
    expect(version.stderr).toBe('');
    expect(version.stdout).toBe(`${PKG.version}\n`);
    expect(loaded()).toEqual([]);
    const resolved = execFileSync(
      process.execPath,
      [
        '-e',
        "const r = require('node:module').createRequire(process.argv[1]); console.log(r.resolve('better-sqlite3') + '\\n' + r.resolve('unix-dgram'))",
        join(app, 'dist', 'botlink.mjs'),
      ],
      { encoding: 'utf8' },
    );
    for (const path of resolved.trim().split('\n')) expect(path.startsWith(`${app}/node_modules/`)).toBe(true);

    // A command that opens a SQLite database through the installed better-sqlite3.
    const serve = spawn(cmd!, [...pre, 'serve', '--port', '0', '--db', join(root, 'serve.db')], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => serve.kill('SIGKILL'));
    let out = '';
    serve.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 10_000, 'the installed botlink serve');
    serve.kill('SIGTERM');
    const { code } = await closed(serve);
    expect(code).toBe(0);
    expect(loaded()).toEqual([join(realpathSync(app), 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')]);
  });

  it("never loosens an existing /etc/botlink: an operator's 0700, or 0750 with a group, survives a run", {
    timeout: 2 * INSTALL_TIMEOUT_MS,
  }, () => {
    const bin = fakeBin(false);
    for (const [chosen, gid] of [
      [0o700, 0],
      [0o750, 4],
    ] as const) {
      const root = tempDir('botlink-root-');
      const etc = join(root, 'etc/botlink');
      mkdirSync(etc, { recursive: true });
      chmodSync(etc, chosen);
      // A group of the operator's (gid 4 is Debian's adm), kept as they set it.
      chownSync(etc, 0, gid);
      const r = install(['--prefix', root], bin);
      expect(r.status, r.output).toBe(0);
      expect(mode(etc)).toBe(`0${chosen.toString(8)}`);
      expect(statSync(etc).gid).toBe(gid);
      expect(r.stdout).toContain(`keeping ${etc} (mode 0${chosen.toString(8)})`);
      expect(r.stdout).not.toMatch(/^\+ install -d -m 0755 \S+\/etc\/botlink$/m);
      // Its new config is made inside it as on a fresh install.
      expect(mode(join(etc, 'config.json'))).toBe('0600');
    }
  });
});
