import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceService } from '../../src/service/server.js';
import { DAEMON_SECRET } from '../helpers/daemon-proc.js';
import { DAEMON_SEED } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import {
  ARCHES,
  type Arch,
  debFile,
  deviceConfig,
  HEADERS_VERSION,
  NODE_VERSION,
  PACKAGES,
  ROOT,
  RUNTIME_ARCHES,
  RUNTIME_NODE,
  runtimeOf,
  ScratchRoot,
  VERSION,
} from './deb.js';
import { exec } from '../../scripts/lib/exec.js';

// The install matrix (DESIGN §3.6): the built packages installed with apt into fresh Debian roots
// (scripts/package/test-root.sh: mmdebstrap, cached per suite, architecture and day), each root under
// an overlay (ScratchRoot) so every run starts from the root as built. The arm64 and armhf roots run
// through qemu-user-static registered with binfmt_misc (scripts/package/tools.sh does that); armhf's
// botlink runs on the root's own nodejs 20, the others' on botlink-node.

// The tests run concurrently (each mostly waits on a root), so what they leave is undone after the
// file, not after each test as useHarness does.
const leftovers: (() => unknown)[] = [];
const cleanups = { push: (fn: () => unknown): void => void leftovers.push(fn) };
afterAll(async () => {
  for (const fn of leftovers.reverse()) await fn();
});

interface Target {
  suite: 'bookworm' | 'trixie' | 'forky';
  arch: Arch;
  /** The major of the distribution's nodejs in the root (test-root.sh installs it there), or none. */
  distroNode: string | undefined;
}
const TARGETS: Target[] = [
  { suite: 'bookworm', arch: 'amd64', distroNode: '18' },
  { suite: 'trixie', arch: 'amd64', distroNode: '20' },
  { suite: 'forky', arch: 'amd64', distroNode: undefined },
  { suite: 'trixie', arch: 'arm64', distroNode: '20' },
  { suite: 'trixie', arch: 'armhf', distroNode: '20' },
];

/**
 * The release an upgrade starts from and the commit that built it (its own recipe rebuilds it:
 * scripts/package/baseline.sh), from baseline.txt, which .ci/run reads too to build it ahead.
 */
const [baselineVersion = '', baselineCommit = ''] = readFileSync(join(ROOT, 'test/package/baseline.txt'), 'utf8').trim().split(/\s+/);
const BASELINE = { version: baselineVersion, commit: baselineCommit };

/** Building a root cold takes minutes (the arm64 one, emulated, the longest); a cached one, none. */
const ROOT_TIMEOUT_MS = 1_200_000;
/** What one root's steps may take, emulated ones included: the arm64 root's passed 600 s beside the armhf one while others' benchmarks loaded the machine (5–11). */
const STEPS_TIMEOUT_MS = 900_000;

/** The cached root of `suite` and `arch`, built when the cache has none from today. */
async function debianRoot(suite: string, arch: Arch): Promise<string> {
  const started = performance.now();
  const r = await exec('bash', [join(ROOT, 'scripts/package/test-root.sh'), suite, arch], { timeoutMs: ROOT_TIMEOUT_MS });
  expect(r.code, r.stderr).toBe(0);
  console.log(`root ${suite} ${arch}: ${((performance.now() - started) / 1000).toFixed(0)} s ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** The binfmt_misc entry that runs each foreign architecture's binaries, and the Node.js architecture that needs none. */
const FOREIGN: Record<Exclude<Arch, 'amd64'>, { binfmt: string; native: string }> = {
  arm64: { binfmt: 'qemu-aarch64', native: 'arm64' },
  armhf: { binfmt: 'qemu-arm', native: 'arm' },
};

/**
 * Why this machine cannot run a root of `arch`, or undefined when it can (natively, or through
 * binfmt_misc). Only arm64 has a fallback where the kernel has no binfmt_misc (arm64.test.ts); an
 * armhf root it cannot run fails the test.
 */
function foreignRefusal(arch: Exclude<Arch, 'amd64'>): string | undefined {
  const { binfmt, native } = FOREIGN[arch];
  if (process.arch === native) return undefined;
  if (!existsSync('/proc/sys/fs/binfmt_misc/register')) {
    const why = 'this kernel offers no binfmt_misc (not mounted, and mounting it is refused here), so no foreign root can run';
    if (arch === 'arm64') return `${why}; test/package/arm64.test.ts runs the arm64 files with qemu-aarch64-static instead`;
    throw new Error(`${why}: the armhf package is proven only in its trixie root`);
  }
  if (!existsSync(`/proc/sys/fs/binfmt_misc/${binfmt}`)) {
    throw new Error(
      `${binfmt} is not registered with binfmt_misc: run scripts/package/tools.sh as root (it installs qemu-user-static and registers it)`,
    );
  }
  return undefined;
}

/** A root of `target` under a fresh overlay, holding this checkout's packages in /tmp: botlink, and botlink-node where it has one. */
async function rootWithPackages(target: Target): Promise<ScratchRoot> {
  const root = new ScratchRoot(await debianRoot(target.suite, target.arch));
  cleanups.push(() => root.remove());
  mkdirSync(join(root.upper, 'tmp'), { recursive: true });
  copyFileSync(debFile(target.arch), join(root.upper, 'tmp/botlink.deb'));
  if (RUNTIME_ARCHES.includes(target.arch)) copyFileSync(debFile(target.arch, 'botlink-node'), join(root.upper, 'tmp/botlink-node.deb'));
  return root;
}

/** Sections of a script's output, each started by a line `@@name`. */
function sections(out: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const part of out.split(/^@@/m).slice(1)) {
    const nl = part.indexOf('\n');
    found[part.slice(0, nl).trim()] = part.slice(nl + 1).trim();
  }
  return found;
}

/** Every path below `dir`, relative to it (directories too), sorted. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      out.push(relative(dir, p));
      if (lstatSync(p).isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

// Shell helpers for the scripts below: apt without questions, and a wait for the agent's status.
const SH_HELPERS = `
export DEBIAN_FRONTEND=noninteractive
apt() { apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }
# Waits for "state": "connected" in /run/botlink/status.json while process $1 lives.
connected() {
  n=0
  until grep -q '"state": "connected"' /run/botlink/status.json 2>/dev/null; do
    n=$((n + 1))
    if [ $n -gt 1200 ] || ! kill -0 $1 2>/dev/null; then
      echo "not connected after $n tries"; cat /tmp/run.stderr /var/log/botlink/botlink.log 2>/dev/null; exit 1
    fi
    sleep 0.1
  done
}
`;

/** Where one boot spent its time (ms), from the agent's log: spawn → 'botlink starting' → 'link connecting' → 'link connected'. */
interface Boot {
  load: number;
  setUp: number;
  connect: number;
}

/** The boot of process `pid` spawned at `spawnedMs` (wall clock), from the agent's JSON log. */
function bootOf(log: string, pid: number, spawnedMs: number): Boot {
  const at = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { time: string; msg: string; pid: number };
    if (entry.pid === pid && !at.has(entry.msg)) at.set(entry.msg, Date.parse(entry.time));
  }
  const starting = at.get('botlink starting') ?? Number.NaN;
  const connecting = at.get('link connecting') ?? Number.NaN;
  return { load: starting - spawnedMs, setUp: connecting - starting, connect: (at.get('link connected') ?? Number.NaN) - connecting };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const describeBoot = (b: Boot): string =>
  `spawn → 'botlink starting' ${seconds(b.load)}, → 'link connecting' ${seconds(b.setUp)}, → 'link connected' ${seconds(b.connect)}`;
/** "VmRSS: 1234 kB" lines as MiB. */
const mib = (status: string, key: string): string =>
  `${(Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) / 1024).toFixed(1)} MiB`;

describe('the install matrix: apt install of botlink (and botlink-node) in fresh Debian roots', () => {
  it.concurrent.each(TARGETS.map((t) => [`${t.suite} ${t.arch}`, t] as const))(
    '%s: apt install, --version, serve + run → connected, status, token, chat, a cached boot, reinstall, remove, purge',
    async (_name, target) => {
      if (target.arch !== 'amd64') {
        const refusal = foreignRefusal(target.arch);
        if (refusal !== undefined) {
          console.log(`install matrix, ${target.suite} ${target.arch}: not run in a root: ${refusal}`);
          return;
        }
      }
      const started = performance.now();
      const runtime = runtimeOf(target.arch);
      // armhf's botlink needs only the root's nodejs; the others bring botlink-node.
      const debs = runtime.pkg === 'botlink-node' ? './botlink-node.deb ./botlink.deb' : './botlink.deb';
      const root = await rootWithPackages(target);
      // A port free here is free in the root: the roots share this machine's network.
      const port = await freePort();
      const config = deviceConfig(`http://127.0.0.1:${port}`);
      const r = await root.sh(
        `${SH_HELPERS}
        cd /tmp
        distro_node_before=$(/usr/bin/node --version 2>/dev/null || echo none)
        apt install ${debs} >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@installed; grep 'newly installed' /tmp/apt.log
        echo @@distro-node; echo "$distro_node_before $(/usr/bin/node --version 2>/dev/null || echo none)"
        echo @@version; botlink --version
        echo @@runtime; ${runtime.node} --version
        # The reference service (its default seed: AK/SK, vendor V1, bot-1), from the package too.
        botlink serve --port ${port} >/tmp/serve.log 2>&1 &
        serve=$!
        echo '${JSON.stringify(config)}' > /etc/botlink/config.json
        (umask 077 && printf SK > /etc/botlink/secret-key)
        cp /etc/botlink/config.json /tmp/config.saved
        # A code cache directory, as the unit's CacheDirectory= gives one.
        export CACHE_DIRECTORY=/var/cache/botlink
        install -d -m 0700 $CACHE_DIRECTORY
        echo @@first-spawned; date +%s%3N
        botlink run 2>/tmp/run.stderr &
        pid=$!
        echo @@first-pid; echo $pid
        connected $pid
        echo @@exe; readlink /proc/$pid/exe
        echo @@cmdline; tr '\\0' ' ' </proc/$pid/cmdline; echo
        echo @@status; botlink status --json
        echo @@token; botlink token | wc -c
        echo @@chat; botlink chat --json hello
        # The code cache, written 5 s after a boot that had none.
        n=0
        until ls $CACHE_DIRECTORY/*.v8cache >/dev/null 2>&1; do
          n=$((n + 1)); [ $n -le 1200 ] || { echo 'no code cache written'; exit 1; }; sleep 0.1
        done
        kill -TERM $pid; rc=0; wait $pid || rc=$?
        echo @@stop; echo "exit $rc"
        # A boot as the unit starts one (its ExecStart's node and bundle), with the token and code cached.
        rm -f /run/botlink/status.json
        echo @@cached-spawned; date +%s%3N
        ${runtime.node} /usr/lib/botlink/dist/botlink.mjs run 2>/tmp/run.stderr &
        pid=$!
        echo @@cached-pid; echo $pid
        connected $pid
        echo @@cached-memory; grep -E '^Vm(RSS|HWM):' /proc/$pid/status
        kill -TERM $pid; wait $pid
        echo @@log; cat /var/log/botlink/botlink.log
        # Node.js alone, idle, for scale: its start and memory (under emulation QEMU's own memory is in both).
        echo @@bare-spawned; date +%s%3N
        ${runtime.node} -e 'require("fs").writeFileSync("/tmp/bare.tmp", String(Date.now())); require("fs").renameSync("/tmp/bare.tmp", "/tmp/bare.up"); setInterval(() => {}, 60000)' &
        bare=$!
        n=0
        until [ -e /tmp/bare.up ]; do n=$((n + 1)); [ $n -le 1200 ] || { echo 'node did not start'; exit 1; }; sleep 0.1; done
        echo @@bare-up; cat /tmp/bare.up; echo
        echo @@bare-memory; grep -E '^Vm(RSS|HWM):' /proc/$bare/status
        kill $bare; wait $bare || true
        kill -TERM $serve; wait $serve || true
        apt install --reinstall ./botlink.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@reinstall; cmp /etc/botlink/config.json /tmp/config.saved && echo 'config kept'
        apt remove botlink >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@remove; test -f /etc/botlink/config.json && test ! -e /usr/bin/botlink && echo 'config kept, program gone'
        apt purge ${runtime.pkg === 'botlink-node' ? 'botlink botlink-node' : 'botlink'} >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@purge; dpkg-query -W botlink botlink-node 2>&1 | grep -c 'no packages found'; getent group botlink | cut -d: -f1
        echo @@distro-node-after; /usr/bin/node --version 2>/dev/null || echo none
        rm -f /tmp/apt.log /tmp/config.saved /tmp/serve.log /tmp/run.stderr /tmp/bare.up /tmp/botlink.deb /tmp/botlink-node.deb`,
        STEPS_TIMEOUT_MS,
      );
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const s = sections(r.stdout);
      // The distribution's nodejs (18 on bookworm, 20 on trixie, none on forky) is left as it was:
      // not needed by the packages with botlink-node, and armhf's runs on it.
      const distro = s['distro-node']?.split(' ') ?? [];
      if (target.distroNode === undefined) expect(distro).toEqual(['none', 'none']);
      else expect(distro[0]).toMatch(new RegExp(`^v${target.distroNode}\\.`));
      expect(distro[1]).toBe(distro[0]);
      expect(s['distro-node-after']).toBe(distro[0]);
      // Its packages and nothing else: their other dependencies are on every Debian system (armhf's nodejs in its root).
      const count = runtime.pkg === 'botlink-node' ? 2 : 1;
      expect(s.installed).toMatch(new RegExp(`^0 upgraded, ${count} newly installed, 0 to remove`));
      expect(s.version).toBe(VERSION);
      expect(s.runtime).toBe(runtime.pkg === 'botlink-node' ? `v${NODE_VERSION}` : distro[0]);
      // The agent runs on its package's node (under binfmt_misc the process is QEMU running it).
      if (target.arch === 'amd64') expect(s.exe).toBe(runtime.node);
      else expect(s.cmdline).toContain(`${runtime.node} /usr/lib/botlink/dist/botlink.mjs run`);
      expect(JSON.parse(s.status ?? '')).toMatchObject({
        daemon: { running: true },
        link: { state: 'connected' },
        identity: { id: 'bot-1' },
      });
      expect(Number(s.token)).toBeGreaterThan(10);
      expect(s.chat).not.toBe('');
      expect(s.stop).toBe('exit 0');
      expect(s.reinstall).toBe('config kept');
      expect(s.remove).toBe('config kept, program gone');
      expect(s.purge?.split('\n')).toEqual(['2', 'botlink']);

      // After the purge nothing of botlink is left in the root but its group (scripts/package/README.md, purge):
      // what the overlay holds now is apt's and dpkg's bookkeeping, /etc/group and the like, and
      // /run, a tmpfs on a real system.
      const left = tree(root.upper).filter((p) => /botlink/i.test(p) && !p.startsWith('run/'));
      expect(left).toEqual([]);
      for (const file of ['etc/group', 'etc/gshadow']) {
        const lines = readFileSync(join(root.upper, file), 'utf8').split('\n');
        expect(lines.filter((l) => l.startsWith('botlink:')).length, file).toBe(1);
      }

      // What a boot costs here (scripts/bench/README.md quotes the emulated ones, with their caveat).
      const log = s.log ?? '';
      const first = bootOf(log, Number(s['first-pid']), Number(s['first-spawned']));
      const cached = bootOf(log, Number(s['cached-pid']), Number(s['cached-spawned']));
      for (const phase of [...Object.values(first), ...Object.values(cached)]) expect(phase).toBeGreaterThanOrEqual(0);
      const memory = s['cached-memory'] ?? '';
      const bare = s['bare-memory'] ?? '';
      console.log(
        `install matrix, ${target.suite} ${target.arch} (${target.arch === 'amd64' ? 'native' : 'QEMU user emulation'}, node ${s.runtime}): ` +
          `first boot (signs, no code cache) ${describeBoot(first)}; cached boot (token and code cache) ${describeBoot(cached)}; ` +
          `at connected RSS ${mib(memory, 'VmRSS')} (peak ${mib(memory, 'VmHWM')}); ` +
          `node alone: spawn → its first statement ${seconds(Number(s['bare-up']) - Number(s['bare-spawned']))}, idle RSS ${mib(bare, 'VmRSS')}; ` +
          `passed in ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    },
    ROOT_TIMEOUT_MS + STEPS_TIMEOUT_MS,
  );
});

describe('the trixie root', () => {
  it.concurrent(
    "trixie's lintian finds no error in any package of any architecture, and every warning is explained in scripts/package/README.md",
    async () => {
      const root = new ScratchRoot(await debianRoot('trixie', 'amd64'));
      cleanups.push(() => root.remove());
      mkdirSync(join(root.upper, 'tmp/debs'), { recursive: true });
      const names: string[] = [];
      for (const arch of ARCHES) {
        for (const pkg of PACKAGES.filter((p) => p === 'botlink' || RUNTIME_ARCHES.includes(arch))) {
          const file = debFile(arch, pkg);
          names.push(file.split('/').at(-1) ?? file);
          copyFileSync(file, join(root.upper, 'tmp/debs', names.at(-1) ?? ''));
        }
      }
      const r = await root.sh(
        // One call for the five: lintian checks them side by side (botlink-node's 120 MB binary takes minutes).
        `echo "lintian $(dpkg-query -W -f '\${Version}' lintian)"; cd /tmp/debs; lintian --no-cfg --display-info ${names.join(' ')} || echo "lintian exit $?"`,
        STEPS_TIMEOUT_MS + 300_000,
      );
      expect(r.code, r.stdout + r.stderr).toBe(0);
      console.log(r.stdout.trim());
      expect(r.stdout).toMatch(/^lintian 2\.(1[2-9]\d|[2-9]\d\d)/);
      expect(r.stdout).not.toMatch(/^lintian exit/m);
      const tags = [...r.stdout.matchAll(/^([EWI]): botlink[^:]*: (\S+)/gm)].map(([, level, tag]) => ({ level, tag }));
      expect(tags.filter((t) => t.level === 'E')).toEqual([]);
      const readme = readFileSync(join(ROOT, 'scripts/package/README.md'), 'utf8');
      for (const { tag } of tags.filter((t) => t.level === 'W'))
        expect(readme, `lintian warning ${tag} is not explained in scripts/package/README.md`).toContain(tag);
    },
    ROOT_TIMEOUT_MS + STEPS_TIMEOUT_MS + 300_000,
  );

  it.concurrent(
    `an upgrade from ${BASELINE.version} keeps the botId, the token cache, the config and the modes the operator chose, and reconnects without signing again`,
    async () => {
      const built = await exec('bash', [join(ROOT, 'scripts/package/baseline.sh'), BASELINE.commit, 'amd64'], {
        timeoutMs: ROOT_TIMEOUT_MS,
      });
      expect(built.code, built.stderr).toBe(0);
      const root = await rootWithPackages({ suite: 'trixie', arch: 'amd64', distroNode: '20' });
      copyFileSync(built.stdout.trim(), join(root.upper, 'tmp/botlink-old.deb'));
      const svc = await createReferenceService({ seed: DAEMON_SEED });
      cleanups.push(() => svc.close());
      const config = deviceConfig(svc.url);
      const r = await root.sh(
        `${SH_HELPERS}
        cd /tmp
        apt install ./botlink-old.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@old; botlink --version; dpkg-query -W -f '\${Depends}\\n' botlink
        echo '${JSON.stringify(config)}' > /etc/botlink/config.json
        (umask 077 && echo '${DAEMON_SECRET}' > /etc/botlink/secret-key)
        # The operator's choices: only root and the botlink group may enter /etc/botlink, and the
        # secret is read-only even for root (postinst made /etc/botlink 0755 root:root).
        chmod 0750 /etc/botlink && chgrp botlink /etc/botlink
        chmod 0400 /etc/botlink/secret-key
        cp /etc/botlink/config.json /tmp/config.saved
        botlink run 2>/tmp/run.stderr &
        pid=$!
        connected $pid
        echo @@old-exe; readlink /proc/$pid/exe
        kill -TERM $pid; wait $pid
        echo @@before; stat -c '%n %a %U:%G' /etc/botlink /etc/botlink/secret-key /etc/botlink/config.json /var/lib/botlink/botlink.db
        apt install ./botlink-node.deb ./botlink.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@upgrade; grep -c 'readable by every user' /tmp/apt.log || true
        echo @@after; stat -c '%n %a %U:%G' /etc/botlink /etc/botlink/secret-key /etc/botlink/config.json /var/lib/botlink/botlink.db
        echo @@config; cmp /etc/botlink/config.json /tmp/config.saved && echo kept
        echo @@new; botlink --version
        rm -f /run/botlink/status.json
        botlink run 2>/tmp/run.stderr &
        pid=$!
        connected $pid
        echo @@new-exe; readlink /proc/$pid/exe
        echo @@status; botlink status --json
        kill -TERM $pid; wait $pid
        # Readable by its group (botlink: the local API's users): postinst says so, and the upgrade still succeeds.
        chgrp botlink /etc/botlink/secret-key && chmod 0640 /etc/botlink/secret-key
        apt install --reinstall ./botlink.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
        echo @@warned; grep 'open to its group or others' /tmp/apt.log; stat -c '%a %G' /etc/botlink/secret-key`,
        STEPS_TIMEOUT_MS,
      );
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const s = sections(r.stdout);
      expect(s.old?.split('\n')[0]).toBe(BASELINE.version);
      expect(s.old).toContain('nodejs (>= 20.18)');
      expect(s['old-exe']).toMatch(/^\/usr\/bin\/node/);
      expect(s.before).toBe(
        [
          '/etc/botlink 750 root:botlink',
          '/etc/botlink/secret-key 400 root:root',
          '/etc/botlink/config.json 600 root:root',
          '/var/lib/botlink/botlink.db 600 root:root',
        ].join('\n'),
      );
      expect(s.after).toBe(s.before);
      expect(s.upgrade).toBe('0');
      expect(s.config).toBe('kept');
      expect(s.new).toBe(VERSION);
      expect(s['new-exe']).toBe(RUNTIME_NODE);
      expect(JSON.parse(s.status ?? '')).toMatchObject({ link: { state: 'connected' }, identity: { id: 'bot-1' } });
      // One getToken in all: the new agent reconnected on the token the old one cached.
      expect(svc.stats.getToken.ok).toBe(1);
      expect(s.warned).toBe(
        'botlink: warning: /etc/botlink/secret-key is open to its group or others (mode 0640): chmod 0600 /etc/botlink/secret-key\n640 botlink',
      );
      expect(HEADERS_VERSION).toMatch(/^24\./);
    },
    ROOT_TIMEOUT_MS + STEPS_TIMEOUT_MS,
  );
});
