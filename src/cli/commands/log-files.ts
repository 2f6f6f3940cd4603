/**
 * `botlink logs`, its reading of the log's files. The daemon's user owns the log folder and `sudo
 * botlink logs` reads it as root: whatever that user put there is opened without following a symlink
 * or waiting on a FIFO (O_NOFOLLOW, O_NONBLOCK), read only when it is a regular file, and a compressed
 * generation is inflated up to a bound.
 */

import { closeSync, constants, createReadStream, fstatSync, lstatSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip } from 'node:zlib';
import { splitLines } from './log-view.js';

/** Text inflated from one `.gz` generation at most: logrotate rotates at 10 MB, a bomb stops here. */
export const MAX_INFLATED = 64 * 1024 * 1024;
const CHUNK = 64 * 1024;
const READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** A file of the log's that will not be read, and why, in a few words. */
export class Skipped extends Error {}

/** The file at `path` opened to read, or Skipped when it is not a regular file; other errors as they come. */
export function openToRead(path: string): number {
  let fd: number;
  try {
    fd = openSync(path, READ);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new Skipped('a symbolic link');
    throw err;
  }
  const st = fstatSync(fd);
  if (st.isFile()) return fd;
  closeSync(fd);
  throw new Skipped(st.isFIFO() ? 'a FIFO' : 'not a regular file');
}

/** Every line of the plain file open at `fd`, then closes it. */
export function readPlain(fd: number, out: (line: string) => void): void {
  const lines = new LineReader(out);
  const buf = Buffer.alloc(CHUNK);
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, CHUNK, null);
      if (n <= 0) break;
      lines.push(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  lines.end();
}

/**
 * Every line of the gzip file open at `fd`, inflated up to `limit` bytes; closes it. Resolves
 * whether it stopped at the limit (the rest left unread); rejects when the data is not gzip.
 */
export async function readGzip(fd: number, out: (line: string) => void, limit = MAX_INFLATED): Promise<{ cut: boolean }> {
  const lines = new LineReader(out);
  const input = createReadStream('', { fd, autoClose: true, highWaterMark: CHUNK });
  const inflated = input.pipe(createGunzip({ chunkSize: CHUNK }));
  input.once('error', (err) => inflated.destroy(err));
  let total = 0;
  let cut = false;
  try {
    for await (const chunk of inflated as AsyncIterable<Buffer>) {
      const room = limit - total;
      cut = chunk.length > room;
      lines.push(cut ? chunk.subarray(0, room) : chunk);
      total += Math.min(chunk.length, room);
      if (cut) break;
    }
  } finally {
    input.destroy();
    inflated.destroy();
  }
  lines.end();
  return { cut };
}

/** Bytes in, whole lines out: UTF-8 decoded across chunk ends; end() gives the unfinished rest. */
export class LineReader {
  readonly #out: (line: string) => void;
  readonly #decoder = new StringDecoder('utf8');
  #rest = '';

  constructor(out: (line: string) => void) {
    this.#out = out;
  }

  push(bytes: Buffer): void {
    const { lines, rest } = splitLines(this.#rest, this.#decoder.write(bytes));
    this.#rest = rest;
    for (const line of lines) this.#out(line);
  }

  /** The unfinished last line, if any: a line torn by a crash is shown for what it is. */
  end(): void {
    const rest = this.#rest + this.#decoder.end();
    this.#rest = '';
    if (rest !== '') this.#out(rest);
  }
}

/** The current log file, read as it grows, and again from its start when logrotate replaces it. */
export class Tail {
  readonly #path: string;
  readonly #out: (line: string) => void;
  readonly #skip: (why: string) => void;
  #lines: LineReader;
  #fd: number | undefined;
  /** The inode at the path when last opened (or refused): a new one is a rotation. */
  #ino = -1;
  #pos = 0;

  constructor(path: string, out: (line: string) => void, skip: (why: string) => void) {
    this.#path = path;
    this.#out = out;
    this.#skip = skip;
    this.#lines = new LineReader(out);
    this.#open();
  }

  /** Prints every whole line written since the last read. */
  read(): void {
    if (this.#fd === undefined) return;
    const buf = Buffer.alloc(CHUNK);
    for (;;) {
      const n = readSync(this.#fd, buf, 0, CHUNK, this.#pos);
      if (n <= 0) break;
      this.#pos += n;
      this.#lines.push(buf.subarray(0, n));
    }
  }

  /** Reads what is new; after a rotation, the old file to its end, then the new one from its start. */
  follow(): void {
    this.read();
    let st: { ino: number; size: number } | undefined;
    try {
      st = lstatSync(this.#path);
    } catch {
      // Renamed away and not created again yet: the daemon makes the new file at its SIGHUP.
      return;
    }
    if (st.ino === this.#ino && (this.#fd === undefined || st.size >= this.#pos)) return;
    // Rotated (or truncated): what is left of the old file's last line is all it will ever hold.
    this.end();
    this.#open();
    this.read();
  }

  /** The unfinished last line, if any, and the file closed. */
  end(): void {
    this.#lines.end();
    this.#lines = new LineReader(this.#out);
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  #open(): void {
    this.#pos = 0;
    try {
      this.#fd = openToRead(this.#path);
      this.#ino = fstatSync(this.#fd).ino;
    } catch (err) {
      this.#fd = undefined;
      if (!(err instanceof Skipped)) return;
      // Said once for what sits at the path; looked at again only once something else does.
      this.#ino = lstatInode(this.#path);
      this.#skip(err.message);
    }
  }
}

function lstatInode(path: string): number {
  try {
    return lstatSync(path).ino;
  } catch {
    return -1;
  }
}
