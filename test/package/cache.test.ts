import { execFileSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exec } from '../../scripts/lib/exec.js';
import { useHarness } from '../helpers/harness.js';
import { NODE_RUNTIME_SCRIPT, ROOT, RUNTIME_VERSION } from './deb.js';

// Cached artefacts are checked on every use, not trusted on a stamp: scripts/node-runtime.sh re-hashes
// the fetched tarball and the folder unpacked from it against node-runtime.lock, and
// scripts/package/runtime.sh compares the kept botlink-node .deb with the package its recipe makes.
// Each test works on a copy of the real cache, so the real one is never touched.

const { tempDir } = useHarness();
const RUNTIME_SCRIPT = join(ROOT, 'scripts', 'package', 'runtime.sh');
const ARCH = process.arch === 'arm64' ? 'arm64' : 'amd64';

/** Flips one bit of `file` at `offset` (the middle of the file by default); again restores it. */
function flip(file: string, offset = Math.floor(statSync(file).size / 2)): void {
  const fd = openSync(file, 'r+');
  try {
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, offset);
    b[0]! ^= 1;
    writeSync(fd, b, 0, 1, offset);
  } finally {
    closeSync(fd);
  }
}

/** A copy of the node-runtime cache holding this machine's runtime (its tarball and unpacked folder). */
function runtimeCache(): { env: NodeJS.ProcessEnv; dir: string; tgz: string } {
  const real = execFileSync('bash', [NODE_RUNTIME_SCRIPT, ARCH], { encoding: 'utf8' }).trim();
  const cache = tempDir('botlink-node-cache-');
  const dir = join(cache, basename(real));
  // --reflink where the filesystem can: never a hard link, which would let the flips reach the real cache.
  execFileSync('cp', ['-a', '--reflink=auto', real, `${real}.tgz`, cache]);
  return { env: { ...process.env, BOTLINK_NODE_CACHE: cache }, dir, tgz: `${dir}.tgz` };
}

describe('scripts/node-runtime.sh re-hashes its cache on every run', () => {
  it('uses an intact cache, and refuses a changed tarball, binary or header, naming the file and the fix', async () => {
    const { env, dir, tgz } = runtimeCache();
    const run = () => exec('bash', [NODE_RUNTIME_SCRIPT, ARCH], { env, timeoutMs: 120_000 });

    const intact = await run();
    expect(intact.code, intact.stderr).toBe(0);
    expect(intact.stdout.trim()).toBe(dir);

    flip(tgz);
    const tarball = await run();
    expect(tarball.code).toBe(1);
    expect(tarball.stdout).toBe('');
    expect(tarball.stderr).toContain(`node-runtime: ${tgz} has sha512 `);
    expect(tarball.stderr).toContain(`Fix: rm ${tgz} (the next run fetches it again and checks it)`);
    flip(tgz);

    flip(join(dir, 'bin/node'));
    const binary = await run();
    expect(binary.code).toBe(1);
    expect(binary.stdout).toBe('');
    expect(binary.stderr).toContain(`node-runtime: ${dir} differs from the checked tarball it was unpacked from (${dir}/bin/node)`);
    expect(binary.stderr).toContain(`Fix: rm -rf ${dir} (the next run unpacks it again)`);
    flip(join(dir, 'bin/node'));

    // Something added is refused too: a header the addons would compile against, a planted symlink.
    writeFileSync(join(dir, 'include/node/planted.h'), '#define PLANTED 1\n');
    symlinkSync('/etc/passwd', join(dir, 'include/node/linked.h'));
    const added = await run();
    expect(added.code).toBe(1);
    expect(added.stderr).toContain(`(${dir}/include/node/linked.h ${dir}/include/node/planted.h)`);

    // The fix it names works, offline: the folder is unpacked again from the checked tarball.
    rmSync(dir, { recursive: true });
    const fixed = await run();
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(fixed.stdout.trim()).toBe(dir);
  }, 240_000);
});

describe('scripts/package/runtime.sh checks the kept botlink-node .deb on every build', () => {
  /** A copy of the package cache holding the botlink-node .deb `npm run package` kept, and its stamp. */
  function packageCache(): { env: NodeJS.ProcessEnv; deb: string } {
    const real = join(process.env['BOTLINK_PACKAGE_CACHE'] ?? '/var/cache/botlink-package', `botlink-node_${RUNTIME_VERSION}_${ARCH}.deb`);
    const cache = tempDir('botlink-package-cache-');
    const deb = join(cache, basename(real));
    try {
      copyFileSync(real, deb);
      copyFileSync(`${real}.stamp`, `${deb}.stamp`);
    } catch {
      throw new Error(`${real} is missing: run \`npm run package\` first`);
    }
    return { env: { ...process.env, BOTLINK_PACKAGE_CACHE: cache }, deb };
  }
  const run = (env: NodeJS.ProcessEnv) => exec('bash', [RUNTIME_SCRIPT, ARCH], { env, timeoutMs: 200_000 });

  it('uses an intact .deb as it is, without building it again', async () => {
    const { env, deb } = packageCache();
    const before = statSync(deb).mtimeMs;
    const r = await run(env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(deb);
    expect(r.stderr).not.toContain('built in');
    expect(statSync(deb).mtimeMs).toBe(before);
  }, 240_000);

  it('refuses a .deb with a flipped byte, naming it and the fix', async () => {
    const { env, deb } = packageCache();
    flip(deb);
    const r = await run(env);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`package: ${deb} cannot be unpacked: it changed after it was built, and is refused.`);
    expect(r.stderr).toContain(`Fix: rm ${deb} (the next \`npm run package\` builds it again)`);
  }, 240_000);

  it('refuses a well-formed .deb whose node is not the checked one, naming the file inside', async () => {
    const { env, deb } = packageCache();
    // The same package, its node changed by one bit (and its md5sums to match, as a careful forger would).
    const tree = tempDir('botlink-forged-');
    execFileSync('dpkg-deb', ['-R', deb, join(tree, 'p')]);
    const node = join(tree, 'p/usr/lib/botlink-node/bin/node');
    flip(node);
    const sum = execFileSync('md5sum', [node], { encoding: 'utf8' }).split(' ')[0];
    const md5sums = join(tree, 'p/DEBIAN/md5sums');
    writeFileSync(md5sums, readFileSync(md5sums, 'utf8').replace(/^\S+(?= {2}usr\/lib\/botlink-node\/bin\/node$)/m, sum!));
    execFileSync('dpkg-deb', ['--root-owner-group', '-Znone', '--build', join(tree, 'p'), deb]);
    const r = await run(env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `package: ${deb} differs from the package its recipe makes from the checked Node.js, in DEBIAN/md5sums usr/lib/botlink-node/bin/node:`,
    );
    expect(r.stderr).toContain(`Fix: rm ${deb}`);
  }, 240_000);
});
