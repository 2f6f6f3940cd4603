import { inspect } from 'node:util';
import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';
import { type PrivateFileRules, readPrivateFile } from '../../private-file.js';

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

const SECRET_RULES: PrivateFileRules = {
  noun: 'secret key file',
  user: 'the agent user',
  credential: 'secret-key',
  createHint: (path) => `create it holding only the SecretKey and run \`chmod 600 ${path}\``,
  refuse: (path, message, options) => new SecretFileError(path, message, options),
};

/**
 * What botlink.service passes as the secret-key credential when /etc/botlink/secret-key does not exist
 * (its SetCredential= default): a device in broker mode has none, and a missing LoadCredential= source
 * would fail the unit. Read in signing mode, it says plainly that the secret is missing.
 */
export const NO_SECRET_STAND_IN = 'botlink:no-secret-key-file';

/**
 * Reads the SecretKey from `path`: a private file (readPrivateFile), non-empty; trailing newlines are
 * trimmed.
 */
export function readSecretFile(path: string): Secret {
  const bytes = readPrivateFile(path, SECRET_RULES, MAX_SECRET_BYTES);
  if (bytes.length > MAX_SECRET_BYTES) {
    throw new SecretFileError(path, `secret key file ${path} is too big for a SecretKey`, { fix: SECRET_RULES.createHint(path) });
  }
  const value = bytes.toString('utf8').replace(/[\r\n]+$/, '');
  if (value === NO_SECRET_STAND_IN) {
    throw new SecretFileError(path, `no secret key file: the unit found no /etc/botlink/secret-key and passed its stand-in (${path})`, {
      fix: 'store the SecretKey in /etc/botlink/secret-key (0600) and restart, or move this device to broker mode (botlink provision --broker)',
    });
  }
  if (value === '') {
    throw new SecretFileError(path, `secret key file ${path} is empty`, { fix: 'write the SecretKey into it (one line)' });
  }
  return new Secret(value);
}
