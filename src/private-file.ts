import { closeSync, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import type { BotlinkErrorOptions } from './protocol/errors.js';

/**
 * How one kind of private file (the agent's SecretKey and device key; the broker's account secret, token
 * key and store password) is named, and how its refusals are made.
 */
export interface PrivateFileRules {
  /** How messages name it: `secret key file`. */
  noun: string;
  /** Whose file it is, for the fix of an unreadable one: `the agent user`. */
  user: string;
  /** The name systemd's LoadCredential= passes it under: `secret-key`. */
  credential: string;
  /** What to do when it is missing or not a regular file. */
  createHint: (path: string) => string;
  /** What to do when group or others could read it (default: chmod 600). */
  exposedFix?: (path: string) => string;
  /** The error a refusal about `path` is thrown as. */
  refuse: (path: string, message: string, options: BotlinkErrorOptions) => Error;
}

/**
 * Reads up to `maxBytes + 1` bytes of `path`, which must be a regular file owned by this user or root
 * and not readable by group or others. Owner and mode are checked on the opened descriptor, so a file
 * swapped in between cannot slip by. A result longer than `maxBytes` means the file is too big.
 */
export function readPrivateFile(path: string, rules: PrivateFileRules, maxBytes: number): Buffer {
  const { noun } = rules;
  const refuse = (message: string, options: BotlinkErrorOptions): Error => rules.refuse(path, message, options);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw refuse(`${noun} ${path} does not exist`, { cause: err, fix: rules.createHint(path) });
    if (code === 'EACCES') {
      throw refuse(`${noun} ${path} is not readable by this user (uid ${process.getuid?.()})`, {
        cause: err,
        fix: `make ${rules.user} its owner, or pass it with systemd LoadCredential=${rules.credential}`,
      });
    }
    throw refuse(`${noun} ${path} cannot be opened (${code ?? String(err)})`, { cause: err });
  }
  try {
    refuseUnlessPrivate(path, fstatSync(fd), rules);
    const buf = Buffer.alloc(maxBytes + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/**
 * Refuses (rules.refuse) a file that is not a regular file owned by this user or root and closed to group
 * and others, as `st` (the opened descriptor's) says.
 */
export function refuseUnlessPrivate(path: string, st: Stats, rules: PrivateFileRules): void {
  const { noun } = rules;
  if (!st.isFile()) throw rules.refuse(path, `${noun} ${path} is not a regular file`, { fix: rules.createHint(path) });
  // Its owner can read or rewrite the key whatever the mode says: only this user or root may own it.
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0) {
    throw rules.refuse(
      path,
      `${noun} ${path} is owned by uid ${st.uid}, which is neither this user (uid ${uid}) nor root; refusing to use it`,
      {
        fix: `run \`sudo chown ${uid === 0 ? 'root:' : uid} ${path}\``,
      },
    );
  }
  if ((st.mode & 0o077) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
    throw rules.refuse(path, `${noun} ${path} has mode ${mode}, open to group or others; refusing to use it`, {
      fix: rules.exposedFix?.(path) ?? `run \`chmod 600 ${path}\``,
    });
  }
}
