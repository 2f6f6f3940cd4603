import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { defineCommand } from '../frame/command.js';
import { Exit, Failure, UsageError } from '../frame/exit.js';
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
export const logs = defineCommand({
  usage: USAGE,
  flags: {
    config: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
    level: { type: 'string' },
    since: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run({ flags }) {
    const { level } = flags;
    if (level !== undefined && !isLevel(level)) throw new UsageError(`--level must be one of ${LEVELS.join(', ')}`);
    const since = flags.since === undefined ? undefined : parseSince(flags.since, Date.now());
    if (flags.since !== undefined && since === undefined) throw new UsageError(`--since: not a time or a span: '${flags.since}'`);
    const { logFile } = loadConfigValues({ ...(flags.config !== undefined && { file: flags.config }), env: process.env });
    if (logFile === '-')
      throw new Failure('logFile is "-": the daemon logs to stdout, so to the journal: journalctl -u botlink', { kind: 'config' });
    const filter: LogFilter = { level: level ?? 'trace', since };
    const json = flags.json === true;
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
      const why = `cannot read ${dirname(logFile)} (${(err as NodeJS.ErrnoException).code}): run it as root (sudo), who may read the log`;
      throw new Failure(why, { kind: 'unavailable' });
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
    if (flags.follow !== true) {
      current.end();
      return;
    }
    // Followed until a signal ends the process.
    return new Promise<never>(() => setInterval(() => current.follow(), FOLLOW_MS));
  },
});

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
