import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { inspect } from 'node:util';
import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';

const REDACTED = '[redacted]';
/** A SecretKey is a short token; anything bigger is the wrong file. */
const MAX_SECRET_BYTES = 4096;

/** Holds the SecretKey; every path that could print or serialise it yields '[redacted]'. */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The only way to read the secret: call it where the HMAC is computed, nowhere else. */
  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

/** The secret key file is missing, unsafe or unusable; `fix` says what to do. */
export class SecretFileError extends BotlinkError {
  readonly path: string;

  constructor(path: string, message: string, options?: BotlinkErrorOptions) {
    super('ERR_SECRET_FILE', message, 'needs-config', options);
    this.path = path;
  }
}

const createHint = (path: string): string => `create it holding only the SecretKey and run \`chmod 600 ${path}\``;

/**
 * Reads the SecretKey from `path`: a regular file owned by this user or root, not readable by group or
 * others, non-empty; trailing newlines are trimmed. Owner and mode are checked on the opened descriptor
 * so a swap cannot slip by.
 */
export function readSecretFile(path: string): Secret {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SecretFileError(path, `secret key file ${path} does not exist`, { cause: err, fix: createHint(path) });
    if (code === 'EACCES') {
      throw new SecretFileError(path, `secret key file ${path} is not readable by this user (uid ${process.getuid?.()})`, {
        cause: err,
        fix: 'make the agent user its owner, or pass it with systemd LoadCredential=secret-key',
      });
    }
    throw new SecretFileError(path, `secret key file ${path} cannot be opened (${code ?? String(err)})`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) {
      throw new SecretFileError(path, `secret key file ${path} is not a regular file`, { fix: createHint(path) });
    }
    // Its owner can read or rewrite the key whatever the mode says: only this user or root may own it.
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid && st.uid !== 0) {
      throw new SecretFileError(
        path,
        `secret key file ${path} is owned by uid ${st.uid}, which is neither this user (uid ${uid}) nor root; refusing to use it`,
        { fix: `run \`sudo chown ${uid === 0 ? 'root:' : uid} ${path}\`` },
      );
    }
    if ((st.mode & 0o077) !== 0) {
      const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
      throw new SecretFileError(path, `secret key file ${path} has mode ${mode}, open to group or others; refusing to use it`, {
        fix: `run \`chmod 600 ${path}\``,
      });
    }
    const buf = Buffer.alloc(MAX_SECRET_BYTES + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n > MAX_SECRET_BYTES) {
      throw new SecretFileError(path, `secret key file ${path} is too big for a SecretKey`, { fix: createHint(path) });
    }
    const value = buf.toString('utf8', 0, n).replace(/[\r\n]+$/, '');
    if (value === '') {
      throw new SecretFileError(path, `secret key file ${path} is empty`, { fix: 'write the SecretKey into it (one line)' });
    }
    return new Secret(value);
  } finally {
    closeSync(fd);
  }
}
