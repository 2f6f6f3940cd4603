import { closeSync, constants, existsSync, fchownSync, fstatSync, lstatSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Bindings, type ChildLoggerOptions, type LogFn, type Logger, pino } from 'pino';
import { makeFolders } from './ownership.js';
import { BotlinkError, fixOf, messageOf } from './protocol/errors.js';

export const REDACTED = '[redacted]';
/** Compared lower-cased, so `Authorization`, `AccessToken` … are caught too. */
const SENSITIVE_KEYS = new Set(['secret', 'secretkey', 'accesstoken', 'refreshtoken', 'accesssign', 'authorization']);
/** Deeper structures are cut off rather than walked: bounded work per line, and cycles end. */
const MAX_DEPTH = 10;
const BEARER = /\bBearer\s+[^\s"'\\,;]+/gi;

export interface LoggerOptions {
  /** Log file path, or '-' for stdout. */
  file: string;
  level: string;
  name?: string;
  /** Lines for a person on stdout instead of JSON (the demo): how to render each entry, already redacted. */
  pretty?: (entry: Record<string, unknown>) => string;
  /** The daemon: a log file it cannot open sends the log to stderr (journald), saying so, instead of failing. */
  stderrIfUnwritable?: boolean;
}

export interface BotlinkLogger {
  logger: Logger;
  /** Reopens the log file at its path (SIGHUP after logrotate moved it); no-op on stdout. */
  reopen(): void;
  /** Resolves once every line logged so far has reached the file descriptor. */
  flush(): Promise<void>;
  /** Drops later log calls, writes what is buffered, then closes the file: `await flush()` first at exit. */
  close(): void;
}

/**
 * A copy of `value` that JSON-serialises like the original, with sensitive keys replaced by
 * '[redacted]' at any depth and `Bearer …` removed from strings; Errors become serialised errors.
 */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.replace(BEARER, `Bearer ${REDACTED}`);
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (value instanceof Error) return redact({ ...pino.stdSerializers.err(value) }, depth);
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return redact(toJSON.call(value), depth + 1);
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] = SENSITIVE_KEYS.has(key.toLowerCase()) ? REDACTED : redact(item, depth + 1);
  }
  return out;
}

/** pino to a file (async, reopenable) or stdout, with redaction applied to every line. */
export function createLogger(opts: LoggerOptions): BotlinkLogger {
  const toStdout = opts.pretty !== undefined || opts.file === '-';
  let unwritable: BotlinkError | undefined;
  let checked: number | undefined;
  if (!toStdout) {
    try {
      checked = openLogFile(opts.file);
    } catch (err) {
      if (!(opts.stderrIfUnwritable === true && err instanceof BotlinkError)) throw err;
      unwritable = err;
    }
  }
  const toFile = checked !== undefined;
  const dest = pino.destination(
    checked !== undefined ? { dest: samePath(opts.file, checked), sync: false } : { dest: unwritable ? 2 : 1, sync: true },
  );
  if (checked !== undefined) closeOnceOpened(dest, checked);

  // Bytes handed to the destination vs. bytes it reports written: flush() waits for them to meet.
  let queued = 0;
  let written = 0;
  let waiters: (() => void)[] = [];
  const settle = () => {
    if (written < queued) return;
    const ready = waiters;
    waiters = [];
    for (const wake of ready) wake();
  };
  dest.on('write', (n: number) => {
    written += n;
    settle();
  });
  let reported: unknown;
  dest.on('error', (err: Error) => {
    // pino re-emits the same error once; report it once, and never leave a flush() hanging.
    if (err !== reported) process.stderr.write(`botlink: log file ${opts.file}: ${err.message}\n`);
    reported = err;
    written = queued;
    settle();
  });

  // One redaction pass a call, no line parsed back: each part of a line is redacted where pino takes
  // it in — the logged object (formatters.log), objects interpolated into the message (logMethod),
  // the message as written (serializers.msg), and bindings once, when bound.
  const logger = pino(
    {
      level: opts.level,
      ...(opts.name === undefined ? {} : { name: opts.name }),
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: {
        // redact() has already serialised errors; pino's own pass would rename their type to 'Object'.
        err: (value: unknown) => value,
        // The message after interpolation (`Bearer %s`), or an Error's message pino took for it.
        msg: (value: unknown) => redact(value),
      },
      formatters: {
        level: (label) => ({ level: label }),
        // The root's own bindings (pid, name); a child's are redacted by child() below.
        bindings: (bindings) => redact(bindings) as Bindings,
        // Sees Errors at any depth before pino would flatten nested ones to {}.
        log: (object) => redact(object) as Record<string, unknown>,
      },
      hooks: {
        // Objects interpolated into the message (`%o`, `%j`) bypass formatters.log.
        logMethod(args, method, level) {
          const safe = args.map((arg, i) => (i > 0 && typeof arg === 'object' ? redact(arg) : arg));
          method.apply(this, safe as Parameters<LogFn>);
          // pino writes a fatal line with flushSync, which emits no 'write': count what it wrote.
          if (level >= pino.levels.values['fatal']!) {
            written = queued;
            settle();
          }
        },
        // The one place every line passes, already redacted: counted for flush(); the demo's read by a person.
        streamWrite: (line) => {
          const out = opts.pretty === undefined ? line : opts.pretty(JSON.parse(line) as Record<string, unknown>);
          queued += Buffer.byteLength(out);
          return out;
        },
      },
    },
    dest,
  );
  // pino serialises a child's bindings once, when bound, past every formatter: redact them there.
  // Set on the root, this child() is the one every descendant inherits.
  const bindChild = logger.child;
  logger.child = function <L extends string = never>(this: Logger, bindings: Bindings, options?: ChildLoggerOptions<L>) {
    return (bindChild<L>).call(this, redact(bindings) as Bindings, options);
  };

  if (unwritable) {
    logger.error(
      { code: unwritable.code, fix: unwritable.fix },
      `${unwritable.message}. Logging to stderr (journald) instead until botlink restarts`,
    );
  }

  let closed = false;
  return {
    logger,
    reopen() {
      if (!toFile || closed) return;
      let fd: number;
      try {
        fd = openLogFile(opts.file);
      } catch (err) {
        logger.error({ code: (err as BotlinkError).code, fix: fixOf(err) }, `${messageOf(err)}. Still writing to the file opened before`);
        return;
      }
      dest.reopen(samePath(opts.file, fd));
      closeOnceOpened(dest, fd);
    },
    flush() {
      if (written >= queued) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    close() {
      if (closed) return;
      closed = true;
      logger.level = 'silent';
      dest.end();
    },
  };
}

const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens the log file to append, creating it (and its folder) if missing, as the folder's owner when
 * run as root, so a root-run command never leaves a log the daemon cannot open; fails with the path
 * and the fix now instead of on the first asynchronous write. Only a regular file of the folder's
 * owner (or, not as root, our own) will do: the daemon's user owns the log folder, and a symlink,
 * a hard link or a FIFO it put there must not make a root-run command append elsewhere or hang
 * (O_NOFOLLOW, O_NONBLOCK, then fstat of what was opened). Returns the open descriptor.
 */
function openLogFile(file: string): number {
  let fd: number | undefined;
  try {
    makeFolders(dirname(file), 0o777);
    const folder = statSync(dirname(file));
    let created = true;
    try {
      fd = openSync(file, APPEND | constants.O_CREAT | constants.O_EXCL, 0o666);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      created = false;
      fd = openSync(file, APPEND);
    }
    const own = fstatSync(fd);
    if (!own.isFile()) throw new LogFileRefused(file, 'is not a regular file');
    const root = process.geteuid?.() === 0;
    if (created && root && (own.uid !== folder.uid || own.gid !== folder.gid)) fchownSync(fd, folder.uid, folder.gid);
    if (!created && own.uid !== folder.uid && (root || own.uid !== process.geteuid?.()))
      throw new LogFileRefused(file, `belongs to uid ${own.uid}, not to the log folder's owner (uid ${folder.uid})`);
    return fd;
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    if (err instanceof BotlinkError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    // ELOOP: a symlink (O_NOFOLLOW); ENXIO: a FIFO no one reads (O_NONBLOCK).
    if (code === 'ELOOP' || code === 'ENXIO') throw new LogFileRefused(file, `is ${kindOf(file)}`);
    throw new BotlinkError('ERR_LOG_FILE', `cannot write the log file ${file} (${code})`, 'needs-config', {
      cause: err,
      fix: "make it and its folder writable by the agent user, or set logFile to '-' for stdout",
    });
  }
}

/** A log file path that holds something else than the daemon's log: never written to. */
class LogFileRefused extends BotlinkError {
  constructor(file: string, why: string) {
    super('ERR_LOG_FILE', `refusing the log file ${file}: it ${why}`, 'needs-config', {
      fix: `remove ${file} (the daemon makes its log again), and look into who put it there: only the daemon's user writes its log folder`,
    });
  }
}

function kindOf(file: string): string {
  try {
    const st = lstatSync(file);
    return st.isSymbolicLink() ? 'a symbolic link' : st.isFIFO() ? 'a FIFO' : 'not a regular file';
  } catch {
    return 'gone';
  }
}

/**
 * A path that opens the very file `fd` holds, for sonic-boom, which opens (and reopens) by path:
 * /proc/self/fd/N on Linux, so nothing swapped in at the path after the checks is followed; where
 * there is no /proc, the path itself, checked a moment before.
 */
function samePath(file: string, fd: number): string {
  return existsSync('/proc/self/fd') ? `/proc/self/fd/${fd}` : file;
}

/** Closes the checked descriptor once sonic-boom has opened its own through samePath (or failed to). */
function closeOnceOpened(dest: ReturnType<typeof pino.destination>, fd: number): void {
  const done = (): void => {
    dest.off('ready', done);
    dest.off('error', done);
    closeSync(fd);
  };
  dest.once('ready', done);
  dest.once('error', done);
}
