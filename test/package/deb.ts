import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CliRun, exec } from '../../scripts/lib/exec.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Prints the folder of the lock's Node.js for an architecture, fetched and checked once. */
export const NODE_RUNTIME_SCRIPT = join(ROOT, 'scripts', 'node-runtime.sh');
export const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** The packaged config template as a device installed from the package uses it against a service at `baseUrl`: bot-1, no vendorId. */
export function deviceConfig(baseUrl: string): Record<string, unknown> {
  const template = JSON.parse(readFileSync(join(ROOT, 'systemd', 'config.example.json'), 'utf8')) as Record<string, unknown>;
  const { vendorId: _vendorId, ...rest } = template;
  return { ...rest, baseUrl, accessKeyId: 'AK', botId: 'bot-1' };
}

export type Arch = 'amd64' | 'arm64' | 'armhf';
export const ARCHES: Arch[] = ['amd64', 'arm64', 'armhf'];
/** The architectures that have a botlink-node; armhf's botlink runs on the distribution's nodejs. */
export const RUNTIME_ARCHES: Arch[] = ['amd64', 'arm64'];

const LOCK = readFileSync(join(ROOT, 'scripts', 'package', 'node-runtime.lock'), 'utf8');
/** The Node.js botlink-node ships, and the one whose headers the addons are compiled against (scripts/package/node-runtime.lock). */
export const NODE_VERSION = /^runtime (\S+)$/m.exec(LOCK)?.[1] ?? 'missing in node-runtime.lock';
export const HEADERS_VERSION = /^headers (\S+)$/m.exec(LOCK)?.[1] ?? 'missing in node-runtime.lock';
/** The Node.js 20 whose headers armhf's addons are compiled against, the oldest its Depends accepts. */
export const HEADERS_ARMHF_VERSION = /^headers-armhf (\S+)$/m.exec(LOCK)?.[1] ?? 'missing in node-runtime.lock';
/** botlink-node's Debian version: the Node.js version and runtime.sh's RUNTIME_REVISION. */
export const RUNTIME_VERSION = `${NODE_VERSION}-${/^RUNTIME_REVISION=(\d+)$/m.exec(readFileSync(join(ROOT, 'scripts', 'package', 'runtime.sh'), 'utf8'))?.[1]}`;
/** Where botlink-node puts its node, which the botlink command and the service run. */
export const RUNTIME_NODE = '/usr/lib/botlink-node/bin/node';
/** The distribution's node, which armhf's botlink runs. */
export const DISTRO_NODE = '/usr/bin/node';

/** What runs botlink on `arch`: the package that brings the node, the node, and the headers its addons are built against. */
export function runtimeOf(arch: Arch): { pkg: 'botlink-node' | 'nodejs'; node: string; headers: string } {
  return arch === 'armhf'
    ? { pkg: 'nodejs', node: DISTRO_NODE, headers: HEADERS_ARMHF_VERSION }
    : { pkg: 'botlink-node', node: RUNTIME_NODE, headers: HEADERS_VERSION };
}

/** The two packages of an architecture: the agent, and the Node.js it runs on. */
export type Package = 'botlink' | 'botlink-node';
export const PACKAGES: Package[] = ['botlink', 'botlink-node'];

/** The package `npm run package` built for `arch`; a test fails with what to run when it is missing. */
export function debFile(arch: Arch, pkg: Package = 'botlink'): string {
  if (pkg === 'botlink-node' && !RUNTIME_ARCHES.includes(arch)) throw new Error(`${arch} has no botlink-node: its botlink runs on nodejs`);
  const name = pkg === 'botlink' ? `botlink_${VERSION}_${arch}.deb` : `botlink-node_${RUNTIME_VERSION}_${arch}.deb`;
  const file = join(ROOT, 'dist', 'deb', name);
  if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run package\` first (scripts/package/tools.sh installs its tools)`);
  return file;
}

/** The package's files unpacked into a fresh temp dir (dpkg-deb -x), as dpkg would place them below /. */
export function extract(arch: Arch): string {
  const dir = mkdtempSync(join(tmpdir(), `botlink-deb-${arch}-`));
  execFileSync('dpkg-deb', ['-x', debFile(arch), dir]);
  return dir;
}

/** One control field of the package. */
export function field(arch: Arch, name: string, pkg: Package = 'botlink'): string {
  return execFileSync('dpkg-deb', ['-f', debFile(arch, pkg), name], { encoding: 'utf8' }).trim();
}

/** Every file and symlink below `dir`, relative to it, sorted. */
export function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (lstatSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

/** The ELF machine each architecture's compiled files are for, as elfMachine names it. */
export const ELF_MACHINE: Record<Arch, string> = { amd64: 'x86-64', arm64: 'aarch64', armhf: 'arm' };

/** The ELF machine of a compiled file: 'x86-64', 'aarch64', 'arm' or the raw number. */
export function elfMachine(file: string): string {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  if (header.toString('latin1', 0, 4) !== '\x7fELF') return 'not ELF';
  const machine = header.readUInt16LE(18);
  return ({ 62: 'x86-64', 183: 'aarch64', 40: 'arm' } as Record<number, string>)[machine] ?? String(machine);
}

// Mounts an overlay of the root $3 (writes land in $1/u) with /dev and /proc, then runs the script $2 chrooted in it.
const ENTER = `set -e
d=$1
mount -t overlay overlay -o lowerdir="$3",upperdir="$d/u",workdir="$d/w" "$d/m"
mount --rbind /dev "$d/m/dev"
mount -t proc proc "$d/m/proc"
exec chroot "$d/m" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 /bin/sh -ec "$2"`;

/**
 * A scratch root: this machine's / (or another root: `lower`, e.g. a Debian root of
 * scripts/package/test-root.sh) under an overlay in a private mount namespace, so dpkg installs, runs
 * the maintainer scripts and purges for real while the files below stay untouched. Each `sh` mounts it
 * afresh over the same upper layer (`upper`), so changes carry from one call to the next.
 */
export class ScratchRoot {
  readonly dir = mkdtempSync(join(tmpdir(), 'botlink-root-'));
  /** What the scripts changed, added or removed (overlayfs whiteouts) relative to `lower`. */
  readonly upper = join(this.dir, 'u');

  constructor(readonly lower = '/') {
    for (const sub of ['u', 'w', 'm']) mkdirSync(join(this.dir, sub));
  }

  /** Runs `script` with sh -e as root inside the scratch root. */
  async sh(script: string, timeoutMs = 120_000): Promise<CliRun> {
    const r = await exec('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', ENTER, 'enter', this.dir, script, this.lower], {
      timeoutMs,
    });
    if (/mount:|unshare:|chroot:/.test(r.stderr) && r.code !== 0) {
      throw new Error(`the scratch root needs root and an overlay of / in a private mount namespace:\n${r.stderr}`);
    }
    return r;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
