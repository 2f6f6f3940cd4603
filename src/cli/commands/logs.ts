import { readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { defineCommand } from '../frame/command.js';
import { Exit, Failure, UsageError } from '../frame/exit.js';
import { messageOf } from '../../protocol/errors.js';
import { printable } from '../printable.js';
import { MAX_INFLATED, openToRead, readGzip, readPlain, Skipped, Tail } from './log-files.js';
import { generations, LEVELS, type LogFilter, parseSince, viewLine } from './log-view.js';

const USAGE = `usage: botlink logs [--config FILE] [-f] [--level L] [--since T] [--json]

The daemon's log in words a person reads, oldest first, the rotated files (.1, .2.gz, …) included:
local time, level, the part of the daemon, the message, then key=value.

  -f, --follow   keep printing lines as they are written, through a log rotation
  --level L      only L and worse: ${LEVELS.join(', ')} (default: everything)
  --since T      only lines after T: an ISO time (2026-11-25T10:00) or a span back (30m, 2h, 1d)
  --json         the log's own JSON lines, filtered, for jq and scripts
  --config FILE  agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE});
                 only logFile is read from it: the secret is not needed

Needs only read access to the log: on a device that is root (sudo botlink logs). A symlink, FIFO
or anything but a regular file among the log's files is skipped, saying so, and a compressed
generation is read up to ${MAX_INFLATED / 1024 / 1024} MiB of text.`;

/** How often -f looks at the file: a person watching does not tell 200 ms apart from at once. */
const FOLLOW_MS = 200;

/** `botlink logs` (DESIGN §3.1). */
export const logs = defineCommand({
  usage: USAGE,
  flags: {
    config: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
    level: { type: 'string', choices: LEVELS },
    since: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run({ flags, stdout, stderr, env }) {
    // A time or a span back from now: a value only logs reads, so its check is the command's.
    const since = flags.since === undefined ? undefined : parseSince(flags.since, Date.now());
    if (flags.since !== undefined && since === undefined) throw new UsageError(`--since: not a time or a span: '${flags.since}'`);
    const { logFile } = loadConfigValues({ ...(flags.config !== undefined && { file: flags.config }), env });
    if (logFile === '-')
      throw new Failure('logFile is "-": the daemon logs to stdout, so to the journal: journalctl -u botlink', { kind: 'config' });
    const filter: LogFilter = { level: flags.level ?? 'trace', since };
    const json = flags.json === true;
    const out = (raw: string): void => {
      const text = viewLine(raw, filter, json);
      if (text !== undefined) stdout.write(text);
    };
    // `botlink logs | head`: a reader that goes away is the end, not an error (a stream can break; a capture cannot).
    if (stdout instanceof Writable)
      stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? Exit.OK : Exit.FAILURE));

    let names: string[];
    try {
      names = readdirSync(dirname(logFile));
    } catch (err) {
      const why = `cannot read ${dirname(logFile)} (${(err as NodeJS.ErrnoException).code}): run it as root (sudo), who may read the log`;
      throw new Failure(why, { kind: 'unavailable' });
    }
    const say = (line: string): void => void stderr.write(`botlink logs: ${printable(line)}\n`);
    const skipping = (name: string, why: string): void =>
      say(`skipping ${name}: ${why} (only the daemon's user writes its log folder: look into who put it there)`);
    const files = generations(logFile, names);
    for (const { name, gz } of files.slice(0, -1)) {
      try {
        const fd = openToRead(join(dirname(logFile), name));
        if (!gz) readPlain(fd, out);
        else if ((await readGzip(fd, out)).cut)
          say(`stopped reading ${name} after ${MAX_INFLATED / 1024 / 1024} MiB of text: the rest of it is left out`);
      } catch (err) {
        if (err instanceof Skipped) skipping(name, err.message);
        else say(`skipping ${name}: ${messageOf(err)}`);
      }
    }
    const current = new Tail(logFile, out, (why) => skipping(basename(logFile), why));
    current.read();
    if (flags.follow !== true) {
      current.end();
      return;
    }
    // Followed until a signal ends the process.
    return new Promise<never>(() => setInterval(() => current.follow(), FOLLOW_MS));
  },
});
