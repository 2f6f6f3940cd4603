import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';

/** A fresh file only, never through a link: a name planted in a folder others can write cannot redirect the write. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface ReplaceOptions {
  /** The file's mode, exactly: set with fchmod, so the process's umask (the unit's 0077) takes nothing off. */
  mode: number;
  /** fsync before the rename: the new text survives a power cut once the rename does (not needed on a tmpfs). */
  durable: boolean;
  /** The temporary file's path; by default a random name beside `file` (tempNameFor). */
  temp?: string;
}

/** The temporary file's name beside `file`: random, so nobody can plant anything at it in advance. */
export function tempNameFor(file: string): string {
  return `${file}.${randomBytes(8).toString('hex')}.tmp`;
}

/**
 * Replaces `file` with `text`, atomically for a reader: written to a temp file beside it, created new
 * (never through a link), then renamed over it; a temp file that fails on the way is removed. rename()
 * replaces a link planted at `file` itself, never what the link points to.
 */
export function replaceFile(file: string, text: string, o: ReplaceOptions): void {
  const temp = o.temp ?? tempNameFor(file);
  const fd = openSync(temp, CREATE_NEW, o.mode);
  try {
    try {
      fchmodSync(fd, o.mode);
      const bytes = Buffer.from(text);
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
      if (o.durable) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (err) {
    try {
      unlinkSync(temp);
    } catch {
      // Gone already, or its folder went with it: nothing is left to remove.
    }
    throw err;
  }
}
