import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { parseFlags } from './common.js';
import { Exit, UsageError } from '../frame/exit.js';
import { formatFailure } from '../format.js';
import { generations, isLevel, LEVELS, type LogFilter, parseSince, splitLines, viewLine } from './log-view.js';

const USAGE = `usage: botlink logs [--config FILE] [-f] [--level L] [--since T] [--json]

The daemon's log in words a person reads, oldest first, the rotated files (.1, .2.gz, …) included:
local time, level, the part of the daemon, the message, then key=value.

  -f, --follow   keep printing lines as they are written, through a log rotation
  --level L      only L and worse: ${LEVELS.join(', ')} (default: everything)
  --since T      only lines after T: an ISO time (2026-11-25T10:00) or a span back (30m, 2h, 1d)
  --json         the log's own JSON lines, filtered, for jq and scripts
  --config FILE  agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE});
                 only logFile is read from it: the secret is not needed

Needs only read access to the log: on a device that is root (sudo botlink logs).`;

/** How often -f looks at the file: a person watching does not tell 200 ms apart from at once. */
const FOLLOW_MS = 200;
const CHUNK = 64 * 1024;

/** `botlink logs` (DESIGN §3.1). */
export async function logs(argv: string[]): Promise<number> {
  const { values } = parseFlags(
    argv,
    {
      config: { type: 'string' },
      follow: { type: 'boolean', short: 'f' },
      level: { type: 'string' },
      since: { type: 'string' },
      json: { type: 'boolean' },
    },
    USAGE,
  );
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  if (values.level !== undefined && !isLevel(values.level)) throw new UsageError(`--level must be one of ${LEVELS.join(', ')}\n${USAGE}`);
  const since = values.since === undefined ? undefined : parseSince(values.since, Date.now());
  if (values.since !== undefined && since === undefined) throw new UsageError(`--since: not a time or a span: '${values.since}'\n${USAGE}`);
  let logFile: string;
  try {
    logFile = loadConfigValues({ ...(values.config !== undefined && { file: values.config }), env: process.env }).logFile;
  } catch (err) {
    process.stderr.write(formatFailure('botlink logs: configuration error', err));
    return Exit.CONFIG;
  }
  if (logFile === '-') {
    process.stderr.write('botlink logs: logFile is "-": the daemon logs to stdout, so to the journal: journalctl -u botlink\n');
    return Exit.CONFIG;
  }
  const filter: LogFilter = { level: (values.level as LogFilter['level'] | undefined) ?? 'trace', since };
  const json = values.json === true;
  const out = (raw: string): void => {
    const text = viewLine(raw, filter, json);
    if (text !== undefined) process.stdout.write(text);
  };
  // `botlink logs | head`: a reader that goes away is the end, not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? Exit.OK : Exit.FAILURE));

  let names: string[];
  try {
    names = readdirSync(dirname(logFile));
  } catch (err) {
    process.stderr.write(
      `botlink logs: cannot read ${dirname(logFile)} (${(err as NodeJS.ErrnoException).code}): run it as root (sudo), who may read the log\n`,
    );
    return Exit.UNAVAILABLE;
  }
  const files = generations(logFile, names);
  for (const { name, gz } of files.slice(0, -1)) {
    try {
      const data = readFileSync(join(dirname(logFile), name));
      for (const line of (gz ? gunzipSync(data) : data).toString('utf8').split('\n')) out(line);
    } catch (err) {
      process.stderr.write(`botlink logs: skipping ${name}: ${(err as Error).message}\n`);
    }
  }
  const current = new Tail(logFile, out);
  current.read();
  if (values.follow !== true) {
    current.end();
    return Exit.OK;
  }
  await new Promise<never>(() => setInterval(() => current.follow(), FOLLOW_MS));
  return Exit.OK;
}

/** The current log file, read as it grows, and again from its start when logrotate replaces it. */
class Tail {
  readonly #path: string;
  readonly #out: (line: string) => void;
  #fd: number | undefined;
  #ino = -1;
  #pos = 0;
  #rest = '';

  constructor(path: string, out: (line: string) => void) {
    this.#path = path;
    this.#out = out;
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
      const { lines, rest } = splitLines(this.#rest, buf.toString('utf8', 0, n));
      this.#rest = rest;
      for (const line of lines) this.#out(line);
    }
  }

  /** Reads what is new; after a rotation, the old file to its end, then the new one from its start. */
  follow(): void {
    this.read();
    let st: { ino: number; size: number } | undefined;
    try {
      st = statSync(this.#path);
    } catch {
      // Renamed away and not created again yet: the daemon makes the new file at its SIGHUP.
      return;
    }
    if (this.#fd !== undefined && st.ino === this.#ino && st.size >= this.#pos) return;
    // Rotated (or truncated): what is left of the old file's last line is all it will ever hold.
    this.end();
    this.#open();
    this.read();
  }

  /** The unfinished last line, if any: a line torn by a crash is shown for what it is. */
  end(): void {
    if (this.#rest !== '') this.#out(this.#rest);
    this.#rest = '';
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  #open(): void {
    try {
      this.#fd = openSync(this.#path, 'r');
      this.#ino = fstatSync(this.#fd).ino;
      this.#pos = 0;
    } catch {
      this.#fd = undefined;
    }
  }
}
