import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DAEMON_SECRET } from '../helpers/daemon-proc.js';
import { DAEMON_SEED, useHarness } from '../helpers/harness.js';
import {
  ARCHES,
  debFile,
  deviceConfig,
  ELF_MACHINE,
  elfMachine,
  extract,
  field,
  files,
  NODE_RUNTIME_SCRIPT,
  NODE_VERSION,
  PACKAGES,
  ROOT,
  RUNTIME_ARCHES,
  RUNTIME_NODE,
  RUNTIME_VERSION,
  runtimeOf,
  ScratchRoot,
  VERSION,
  type Arch,
  type Package,
} from './deb.js';
import { exec } from '../../scripts/lib/exec.js';

const { cleanups, service, tempDir } = useHarness();
const extracted = new Map<Arch, string>();
afterAll(() => {
  for (const dir of extracted.values()) rmSync(dir, { recursive: true, force: true });
});

/** The package's files, unpacked once per file. */
function unpacked(arch: Arch): string {
  if (!extracted.has(arch)) extracted.set(arch, extract(arch));
  return extracted.get(arch)!;
}

/** A unit of systemd/ as the package of `arch` ships it: at /usr/lib/botlink, run by that package's node. */
function packaged(unit: string, arch: Arch): string {
  return unit
    .replaceAll('/opt/botlink/', '/usr/lib/botlink/')
    .replace(/^ExecStart=\/usr\/bin\/node /m, `ExecStart=${runtimeOf(arch).node} `);
}
const escaped = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** Units the package ships but never enables or starts: the broker runs on a vendor's host, once configured. */
const SHIPPED_DISABLED = ['botlink-broker.service'];

/** The unit files of systemd/; for those with an [Install] section the target that wants them, unless shipped disabled. */
function units(): { name: string; wantedBy: string | undefined; disabled: boolean }[] {
  return files(join(ROOT, 'systemd'))
    .filter((name) => /\.(service|socket|timer|path)$/.test(name))
    .map((name) => ({
      name,
      wantedBy: /^WantedBy=(\S+)/m.exec(readFileSync(join(ROOT, 'systemd', name), 'utf8'))?.[1],
      disabled: SHIPPED_DISABLED.includes(name),
    }));
}
/** The units postinst enables. */
const enabledUnits = () => units().filter((u) => u.wantedBy && !u.disabled);

/** lintian on one package of `arch`: no error, and each warning explained in scripts/package/README.md. */
async function lintianPasses(arch: Arch, pkg: Package): Promise<void> {
  // botlink-node's 120 MB binary takes lintian minutes on a busy machine.
  // Its own temp folder: lintian leaves mldbm-elf-* files in the one it is given.
  const r = await exec('lintian', ['--no-cfg', '--display-info', debFile(arch, pkg)], {
    env: { ...process.env, TMPDIR: tempDir('botlink-lintian-') },
    timeoutMs: 900_000,
  });
  console.log(`lintian ${pkg} ${arch}:\n${r.stdout.trim() || '(nothing)'}`);
  const tags = [...r.stdout.matchAll(/^([EWI]): botlink[^:]*: (\S+)/gm)].map(([, level, tag]) => ({ level, tag }));
  expect(
    tags.filter((t) => t.level === 'E'),
    r.stdout,
  ).toEqual([]);
  const readme = readFileSync(join(ROOT, 'scripts/package/README.md'), 'utf8');
  for (const { tag } of tags.filter((t) => t.level === 'W'))
    expect(readme, `lintian warning ${tag} is not explained in scripts/package/README.md`).toContain(tag);
  expect(r.code, r.stderr).toBe(0);
}

describe.each(ARCHES)('the %s package', (arch) => {
  const runtime = runtimeOf(arch);
  it('declares what it needs at run time and ships the units, the logrotate snippet and no config', () => {
    const depends = field(arch, 'Depends');
    expect(field(arch, 'Package')).toBe('botlink');
    expect(field(arch, 'Version')).toBe(VERSION);
    expect(field(arch, 'Architecture')).toBe(arch);
    // The addons are built for one Node major's ABI, against the headers of the oldest version accepted:
    // botlink-node's Node 24 (24.18.1's headers), with no nodejs of the distribution needed; on armhf
    // the distribution's nodejs 20 (20.18.0's headers), as trixie ships it.
    const major = Number(runtime.headers.split('.')[0]);
    expect(major).toBe(arch === 'armhf' ? 20 : 24);
    expect(depends).toContain(`${runtime.pkg} (>= ${runtime.headers}), ${runtime.pkg} (<< ${major + 1}~)`);
    expect(depends).not.toMatch(arch === 'armhf' ? /\bbotlink-node\b/ : /\bnodejs\b/);
    expect(depends).toMatch(/\badduser\b/);
    expect(depends).toMatch(/\blibc6 \(>= [\d.]+\)/);
    expect(depends).toMatch(/\blibstdc\+\+6 \(>= [\d.]+\)/);
    expect(field(arch, 'Recommends')).toBe('logrotate');

    const dir = unpacked(arch);
    const all = files(dir);
    expect(all.filter((f) => f.startsWith('etc/'))).toEqual(['etc/logrotate.d/botlink']);
    // Units under /usr/lib/systemd/system: trixie's lintian calls /lib/systemd/system an aliased location.
    expect(all.filter((f) => f.startsWith('lib/'))).toEqual([]);
    for (const { name } of units()) {
      const unit = readFileSync(join(dir, 'usr/lib/systemd/system', name), 'utf8');
      expect(unit).toBe(packaged(readFileSync(join(ROOT, 'systemd', name), 'utf8'), arch));
    }
    expect(readFileSync(join(dir, 'usr/lib/systemd/system/botlink.service'), 'utf8')).toMatch(
      new RegExp(`^ExecStart=${escaped(runtime.node)}( --[^ ]+)* /usr/lib/botlink/dist/botlink\\.mjs run `, 'm'),
    );
    // The broker's unit runs the same bundle on the same node; no packaged unit names install.sh's paths
    // (nor, where botlink-node runs it, the distribution's node).
    expect(readFileSync(join(dir, 'usr/lib/systemd/system/botlink-broker.service'), 'utf8')).toMatch(
      new RegExp(`^ExecStart=${escaped(runtime.node)}( --[^ ]+)* /usr/lib/botlink/dist/botlink\\.mjs broker `, 'm'),
    );
    for (const { name } of units()) {
      expect(readFileSync(join(dir, 'usr/lib/systemd/system', name), 'utf8'), name).not.toMatch(
        arch === 'armhf' ? /\/opt\/botlink|botlink-node/ : /\/opt\/botlink|\/usr\/bin\/node/,
      );
    }
    expect(readFileSync(join(dir, 'usr/lib/botlink/broker-config.example.json'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'systemd/broker-config.example.json'), 'utf8'),
    );
    // The metricsFile drop-in its own comments tell a technician to install from here.
    const dropIn = readFileSync(join(dir, 'usr/lib/botlink/metrics-file.conf'), 'utf8');
    expect(dropIn).toBe(readFileSync(join(ROOT, 'systemd/botlink.service.d/metrics-file.conf'), 'utf8'));
    expect(dropIn).toContain('sudo install -D -m 0644 /usr/lib/botlink/metrics-file.conf /etc/systemd/system/botlink.service.d/');
    expect(readlinkSync(join(dir, 'usr/bin/botlink'))).toBe('../lib/botlink/bin/botlink');
    expect(readFileSync(join(dir, 'usr/lib/botlink/bin/botlink'), 'utf8')).toContain(
      `exec ${runtime.node} /usr/lib/botlink/dist/botlink.mjs "$@"`,
    );

    const addons = all.filter((f) => f.endsWith('.node'));
    expect(addons.map((f) => f.split('/').at(-1)).sort()).toEqual(['better_sqlite3.node', 'unix_dgram.node']);
    for (const addon of addons) expect(elfMachine(join(dir, addon)), addon).toBe(ELF_MACHINE[arch]);
  });

  it.each(PACKAGES.filter((pkg) => pkg === 'botlink' || RUNTIME_ARCHES.includes(arch)))(
    '%s passes lintian with no error, and every warning it keeps is explained in scripts/package/README.md',
    (pkg) => lintianPasses(arch, pkg),
    900_000,
  );
});

describe.each(RUNTIME_ARCHES)('the %s runtime package', (arch) => {
  it("botlink-node: the npm registry's Node.js binary, unmodified, as /usr/lib/botlink-node/bin/node and nothing on the PATH", () => {
    expect(field(arch, 'Package', 'botlink-node')).toBe('botlink-node');
    expect(field(arch, 'Version', 'botlink-node')).toBe(RUNTIME_VERSION);
    expect(field(arch, 'Architecture', 'botlink-node')).toBe(arch);
    expect(field(arch, 'Depends', 'botlink-node')).toMatch(/\blibc6 \(>= [\d.]+\)/);
    const dir = mkdtempSync(join(tmpdir(), 'botlink-node-deb-'));
    try {
      execFileSync('dpkg-deb', ['-x', debFile(arch, 'botlink-node'), dir]);
      expect(files(dir).filter((f) => !f.startsWith('usr/share/'))).toEqual(['usr/lib/botlink-node/bin/node']);
      const node = join(dir, 'usr/lib/botlink-node/bin/node');
      expect(elfMachine(node)).toBe(ELF_MACHINE[arch]);
      // Byte for byte the binary of the npm registry's package, whose tarball scripts/node-runtime.sh checked against node-runtime.lock.
      const npmPkg = execFileSync('bash', [NODE_RUNTIME_SCRIPT, arch], { encoding: 'utf8' }).trim();
      expect(readFileSync(node).equals(readFileSync(join(npmPkg, 'bin/node')))).toBe(true);
      if (arch === 'amd64' && process.arch === 'x64') {
        expect(execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()).toBe(`v${NODE_VERSION}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** systemctl verbs that act on a running systemd. */
const RUNTIME_VERBS = ['start', 'stop', 'restart', 'try-restart', 'reload', 'daemon-reload', 'is-active'];
/** The calls of the recording systemctl (see scratchRoot) that needed a running systemd. */
const runtimeCalls = (calls: string): string[] => calls.split('\n').filter((l) => l.split(' ').some((w) => RUNTIME_VERBS.includes(w)));

describe('the amd64 package', () => {
  it("installs scripts/install.sh's layout, at Debian's paths", async () => {
    const prefix = tempDir('botlink-install-sh-');
    const r = await exec('bash', [join(ROOT, 'scripts/install.sh'), '--prefix', prefix], { timeoutMs: 120_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    // install.sh's path -> the package's (undefined: postinst creates it, see the scratch-root test).
    const toPackage = (p: string): string | undefined =>
      p === 'etc/botlink/config.json'
        ? undefined
        : p
            .replace(/^opt\/botlink\//, 'usr/lib/botlink/')
            .replace(/^usr\/local\/bin\//, 'usr/bin/')
            .replace(/^etc\/systemd\/system\//, 'usr/lib/systemd/system/');
    const fromScript = files(prefix)
      .map(toPackage)
      .filter((p): p is string => p !== undefined)
      .sort();
    const dir = unpacked('amd64');
    const fromPackage = files(dir).filter((p) => !p.startsWith('usr/share/'));
    const modules = (list: string[]) => list.filter((p) => p.startsWith('usr/lib/botlink/node_modules/'));
    const rest = (list: string[]) => list.filter((p) => !p.startsWith('usr/lib/botlink/node_modules/'));
    expect(rest(fromPackage)).toEqual(rest(fromScript));
    // The package ships only the modules the bundle loads at run time, and not their docs or sources.
    expect(modules(fromScript)).toEqual(expect.arrayContaining(modules(fromPackage)));
    // (bin/botlink differs: the package's runs botlink-node's node, install.sh's the machine's.)
    for (const same of ['usr/lib/botlink/config.example.json', 'etc/logrotate.d/botlink']) {
      const scriptPath = same.replace('usr/lib/botlink/', 'opt/botlink/');
      expect(readFileSync(join(dir, same), 'utf8'), same).toBe(readFileSync(join(prefix, scriptPath), 'utf8'));
    }
  });

  /**
   * A scratch root holding the package as /tmp/botlink.deb, and a systemctl that records every call and
   * hands the unit-file verbs (preset, enable, is-enabled, …) to the real one, offline (--root=/), but
   * only pretends the runtime ones: no systemd runs here. A unit it was told to start or restart (and
   * not since to stop) is active.
   */
  function scratchRoot(): ScratchRoot {
    const root = new ScratchRoot();
    cleanups.push(() => root.remove());
    for (const sub of ['tmp', 'usr/local/sbin']) mkdirSync(join(root.dir, 'u', sub), { recursive: true });
    copyFileSync(debFile('amd64'), join(root.dir, 'u/tmp/botlink.deb'));
    copyFileSync(debFile('amd64', 'botlink-node'), join(root.dir, 'u/tmp/botlink-node.deb'));
    const stub = `#!/bin/sh
echo "$*" >> /var/log/systemctl.calls
active=/run/systemctl-stub.active
touch $active
named() { for a; do case $a in *.service|*.timer) echo "$a" ;; esac; done; }
for a; do
  case $a in
    start|restart|try-restart|reload) named "$@" >> $active; exit 0 ;;
    stop) named "$@" > $active.stop; grep -vxF -f $active.stop $active > $active.new || true; mv $active.new $active; exit 0 ;;
    is-active) for u in $(named "$@"); do grep -qxF "$u" $active || exit 3; done; exit 0 ;;
    ${RUNTIME_VERBS.filter((v) => !['start', 'restart', 'try-restart', 'reload', 'stop', 'is-active'].includes(v)).join('|')}) exit 0 ;;
  esac
done
exec /usr/bin/systemctl --root=/ "$@"
`;
    writeFileSync(join(root.dir, 'u/usr/local/sbin/systemctl'), stub, { mode: 0o755 });
    return root;
  }

  it('installed with dpkg: --version, then `run` on the installed config reaches connected, `status` and `token` answer, SIGTERM stops it', async () => {
    const svc = await service(DAEMON_SEED);
    const root = scratchRoot();
    const config = deviceConfig(svc.url);
    // The installed command with the installed paths: /etc/botlink, /var/lib/botlink, /run/botlink, /var/log/botlink.
    const r = await root.sh(`
      dpkg -i /tmp/botlink-node.deb /tmp/botlink.deb >/dev/null
      echo '${JSON.stringify(config)}' > /etc/botlink/config.json
      (umask 077 && echo '${DAEMON_SECRET}' > /etc/botlink/secret-key)
      botlink --version
      echo ---
      botlink run 2>/tmp/run.stderr &
      pid=$!
      n=0
      until grep -q '"state": "connected"' /run/botlink/status.json 2>/dev/null; do
        n=$((n + 1))
        if [ $n -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
          echo "not connected after $n tries"; cat /tmp/run.stderr /var/log/botlink/botlink.log; kill $pid; exit 1
        fi
        sleep 0.1
      done
      grep -o '/[^ ]*[.]node$' /proc/$pid/maps | sort -u
      echo ---
      readlink /proc/$pid/exe
      echo ---
      botlink status --json
      echo ---
      botlink token
      echo ---
      kill -TERM $pid
      rc=0
      wait $pid || rc=$?
      echo "exit $rc"`);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const [version = '', maps = '', exe = '', status = '', token = '', stop = ''] = r.stdout.split('---\n');
    expect(exe.trim()).toBe(RUNTIME_NODE);
    expect(version.trim()).toBe(VERSION);
    // Every addon the daemon loaded is the package's (the checkout's node_modules is visible here too).
    const loaded = maps.trim().split('\n');
    expect(loaded).toContain('/usr/lib/botlink/node_modules/better-sqlite3/build/Release/better_sqlite3.node');
    for (const addon of loaded) expect(addon).toMatch(/^\/usr\/lib\/botlink\/node_modules\//);
    expect(JSON.parse(status)).toMatchObject({ daemon: { running: true }, link: { state: 'connected' }, identity: { id: 'bot-1' } });
    expect(token.trim().length).toBeGreaterThan(10);
    expect(stop.trim()).toBe('exit 0');
    expect(svc.stats.getToken.ok).toBe(1);
  });

  it('maintainer scripts, as in an image build (no systemd running): group, config made once, units enabled; remove keeps the config, purge removes config, state and logs', async () => {
    const root = scratchRoot();
    const install = await root.sh('dpkg -i /tmp/botlink-node.deb /tmp/botlink.deb');
    expect(install.code, install.stdout + install.stderr).toBe(0);

    const facts = await root.sh(`
      getent group botlink
      stat -c '%a %U' /etc/botlink/config.json
      cmp /etc/botlink/config.json /usr/lib/botlink/config.example.json && echo template
      botlink --version
      ${enabledUnits()
        .map((u) => `readlink /etc/systemd/system/${u.wantedBy}.wants/${u.name}`)
        .join('\n')}
      echo ---
      ${SHIPPED_DISABLED.map((name) => `systemctl is-enabled ${name} || true`).join('\n')}
      echo ---
      cat /var/log/systemctl.calls`);
    expect(facts.code, facts.stdout + facts.stderr).toBe(0);
    const [found = '', disabled = '', calls = ''] = facts.stdout.split('---\n');
    const lines = found.trim().split('\n');
    expect(lines[0]).toMatch(/^botlink:x:\d+:$/);
    expect(lines.slice(1, 4)).toEqual(['600 root', 'template', VERSION]);
    // The unit file, by the path systemd found it at: /lib on a merged-/usr bookworm is /usr/lib.
    expect(lines.slice(4).map((l) => l.replace(/^\/lib\//, '/usr/lib/'))).toEqual(
      enabledUnits().map((u) => `/usr/lib/systemd/system/${u.name}`),
    );
    // Shipped, and left for the operator to enable.
    expect(disabled.trim().split('\n')).toEqual(SHIPPED_DISABLED.map(() => 'disabled'));
    // Enabled through `systemctl preset` on the unit files; nothing asked a systemd that is not running.
    expect(calls).toMatch(/ preset botlink\.service$/m);
    expect(runtimeCalls(calls)).toEqual([]);

    // The operator's edits survive an upgrade (here: the same version installed again).
    const upgrade = await root.sh(`
      echo '{"edited": true}' > /etc/botlink/config.json
      (umask 077 && echo secret > /etc/botlink/secret-key)
      dpkg -i /tmp/botlink.deb >/dev/null
      cat /etc/botlink/config.json
      dpkg -r botlink >/dev/null
      cat /etc/botlink/config.json /etc/botlink/secret-key /etc/logrotate.d/botlink >/dev/null && echo kept
      readlink /etc/systemd/system/botlink.service
      test ! -e /usr/bin/botlink && test ! -e /usr/lib/botlink && echo 'program gone'`);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(upgrade.stdout.trim().split('\n')).toEqual(['{"edited": true}', 'kept', '/dev/null', 'program gone']);

    // What the service leaves behind under DynamicUser=, then purge.
    const purge = await root.sh(`
      for d in lib cache log; do
        mkdir -p /var/$d/private/botlink && touch /var/$d/private/botlink/file && ln -s private/botlink /var/$d/botlink
      done
      dpkg --purge botlink botlink-node >/dev/null
      for p in /usr/lib/botlink-node /etc/botlink /etc/logrotate.d/botlink /var/lib/botlink /var/lib/private/botlink /var/cache/botlink /var/cache/private/botlink \\
        /var/log/botlink /var/log/private/botlink \\
        /etc/systemd/system/botlink.service /etc/systemd/system/multi-user.target.wants/botlink.service; do
        if [ -e "$p" ] || [ -L "$p" ]; then echo "left: $p"; fi
      done
      dpkg-query -W botlink >/dev/null 2>&1 || echo 'not installed'
      getent group botlink >/dev/null && echo 'group kept'`);
    expect(purge.code, purge.stderr).toBe(0);
    expect(purge.stdout.trim().split('\n')).toEqual(['not installed', 'group kept']);
  });

  it('postinst warns when the group or others have any access to the secret (0640 root:botlink too), and carries on', async () => {
    const root = scratchRoot();
    const install = await root.sh('dpkg -i /tmp/botlink-node.deb /tmp/botlink.deb >/dev/null');
    expect(install.code, install.stderr).toBe(0);
    const modes = ['0600', '0400', '0640', '0440', '0604', '0620', '0601'];
    const r = await root.sh(
      modes
        .map(
          (
            m,
          ) => `(umask 077 && echo secret > /etc/botlink/secret-key) && chgrp botlink /etc/botlink/secret-key && chmod ${m} /etc/botlink/secret-key
          dpkg -i /tmp/botlink.deb >/dev/null 2>/tmp/err; echo "@@${m} $?"; grep secret-key /tmp/err || true`,
        )
        .join('\n'),
    );
    expect(r.code, r.stderr).toBe(0);
    const told = Object.fromEntries(
      r.stdout
        .split('@@')
        .slice(1)
        .map((part) => [part.slice(0, 4), part.slice(5).trim()]),
    );
    const warning = (m: string) =>
      `botlink: warning: /etc/botlink/secret-key is open to its group or others (mode ${m}): chmod 0600 /etc/botlink/secret-key`;
    expect(told).toEqual(Object.fromEntries(modes.map((m) => [m, ['0600', '0400'].includes(m) ? '0' : `0\n${warning(m)}`])));
  });

  it('maintainer scripts, with systemd running: a timer starts at once, the agent only once configured, an upgrade restarts, remove stops', async () => {
    const root = scratchRoot();
    const others = enabledUnits().filter((u) => u.name !== 'botlink.service');
    const broker = / botlink-broker\.service/;
    // A running systemd, and no policy-rc.d that forbids starting services (container images have one).
    const first = await root.sh(
      'mkdir -p /run/systemd/system && rm -f /usr/sbin/policy-rc.d && dpkg -i /tmp/botlink-node.deb /tmp/botlink.deb && cat /var/log/systemctl.calls',
    );
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('daemon-reload');
    for (const u of others) expect(first.stdout).toContain(`--quiet --system start ${u.name}`);
    expect(first.stdout).not.toMatch(/(start|restart) botlink\.service/);
    expect(first.stdout).toContain('edit /etc/botlink/config.json and store /etc/botlink/secret-key');
    // The broker's unit: neither enabled nor started.
    expect(first.stdout.split('\n').filter((l) => broker.test(l) && !/is-(enabled|active)/.test(l))).toEqual([]);

    const upgrade = await root.sh(`
      echo '{"edited": true}' > /etc/botlink/config.json
      (umask 077 && echo secret > /etc/botlink/secret-key)
      rm /var/log/systemctl.calls
      dpkg -i /tmp/botlink.deb >/dev/null
      cat /var/log/systemctl.calls`);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(upgrade.stdout).toContain('--quiet --system restart botlink.service');
    for (const u of others) expect(upgrade.stdout).toContain(`--quiet --system restart ${u.name}`);
    expect(upgrade.stdout).not.toMatch(/(start|restart|enable) botlink-broker\.service/);

    // Once the operator enables the broker, an upgrade keeps it enabled and restarts it.
    const enabled = await root.sh(`
      systemctl enable botlink-broker.service >/dev/null 2>&1
      rm /var/log/systemctl.calls
      dpkg -i /tmp/botlink.deb >/dev/null
      cat /var/log/systemctl.calls
      echo ---
      systemctl is-enabled botlink-broker.service`);
    expect(enabled.code, enabled.stderr).toBe(0);
    const [upgradeCalls = '', state = ''] = enabled.stdout.split('---\n');
    expect(upgradeCalls).toContain('--quiet --system restart botlink-broker.service');
    expect(state.trim()).toBe('enabled');

    const remove = await root.sh('rm /var/log/systemctl.calls && dpkg -r botlink >/dev/null && cat /var/log/systemctl.calls');
    expect(remove.code, remove.stderr).toBe(0);
    const stop = remove.stdout.split('\n').find((l) => l.startsWith('stop '));
    expect(stop?.split(' ').slice(1).sort()).toEqual(
      units()
        .map((u) => u.name)
        .sort(),
    );
  });
});
