import { execFileSync } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

function mountCommand(args: string[], what: string): void {
  try {
    execFileSync('mount', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const stderr = String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim();
    // A test that needs this fails, never skips: it says what the machine lacks.
    throw new Error(`${what} failed (${stderr}): this test needs root (or CAP_SYS_ADMIN) and mount(8) from util-linux`);
  }
}

/** A real filesystem of `sizeKb` on `dir` (an empty folder), so a test can fill it; returns its unmount. */
export function mountTmpfs(dir: string, sizeKb: number): () => void {
  mountCommand(['-t', 'tmpfs', '-o', `size=${sizeKb}k,mode=0700`, 'tmpfs', dir], `mounting a ${sizeKb} KB tmpfs on ${dir}`);
  return () => execFileSync('umount', ['--lazy', dir]);
}

/** Makes the tmpfs on `dir` read-only or writable again (read-only needs no file on it open for writing). */
export function remount(dir: string, mode: 'ro' | 'rw'): void {
  mountCommand(['-o', `remount,${mode}`, dir], `remounting ${dir} ${mode}`);
}

/** Fills the filesystem holding `dir` to the last byte; delete the returned file to free it. */
export function fillUp(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'a');
  try {
    for (const size of [65_536, 4096, 1]) {
      const chunk = Buffer.alloc(size, 0x5a);
      try {
        while (writeSync(fd, chunk) > 0);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}
