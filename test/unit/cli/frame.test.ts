import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RelayRefused, RoundLost } from '../../../src/cli/app/relay-errors.js';
import { type Command, defineCommand, runCommand } from '../../../src/cli/frame/command.js';
import { DaemonNotStarted, Exit, Failure, UsageError } from '../../../src/cli/frame/exit.js';
import { exitOf, failureText } from '../../../src/cli/frame/failures.js';
import { stoppingOn, untilSignal } from '../../../src/cli/frame/signals.js';
import { BotlinkError } from '../../../src/protocol/errors.js';

let out: string[];
let err: string[];

beforeEach(() => {
  out = [];
  err = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
});
afterEach(() => vi.restoreAllMocks());

const USAGE = 'usage: botlink thing [--json] [--timeout S] [--port P] BOTID [MORE…]';

/** A command that records what it was run with. */
function thing(result: (ctx: { name: string; flags: object; args: object }) => Promise<number | undefined> = async () => undefined) {
  const seen: { name: string; flags: object; args: object }[] = [];
  const command = defineCommand({
    usage: USAGE,
    help: 'More words for --help only.',
    flags: {
      json: { type: 'boolean' },
      name: { type: 'string', short: 'n' },
      timeout: { type: 'seconds' },
      port: { type: 'integer', min: 0, max: 65535 },
    },
    positionals: [
      { name: 'botId', required: true },
      { name: 'more', variadic: true },
    ],
    async run(ctx) {
      seen.push(ctx);
      return result(ctx);
    },
  });
  return { command, seen };
}

describe('the command frame', () => {
  it('--help and -h print the usage and the help to stdout, exit 0, and run nothing', async () => {
    for (const flag of ['--help', '-h']) {
      const { command, seen } = thing();
      out = [];
      expect(await runCommand('thing', command, [flag])).toBe(Exit.OK);
      expect(out.join('')).toBe(`${USAGE}\n\nMore words for --help only.\n`);
      expect(seen).toEqual([]);
    }
    expect(err).toEqual([]);
  });

  it('hands run the flags and positionals, typed as declared', async () => {
    const { command, seen } = thing();
    expect(await runCommand('thing', command, ['--json', '-n', 'x', '--timeout', '2.5', '--port', '0', 'bot-1', 'a', 'b'])).toBe(Exit.OK);
    expect(seen).toEqual([
      { name: 'thing', flags: { json: true, name: 'x', timeout: 2.5, port: 0 }, args: { botId: 'bot-1', more: ['a', 'b'] } },
    ]);
    await runCommand('thing', command, ['bot-2']);
    expect(seen[1]).toEqual({ name: 'thing', flags: {}, args: { botId: 'bot-2', more: [] } });
  });

  it('a usage mistake exits 64 with `botlink <name>: …` and the usage (not the help) on stderr', async () => {
    const cases: [string[], string][] = [
      [['--nope', 'b'], "Unknown option '--nope'"],
      [[], 'BOTID is missing'],
      [['--json'], 'BOTID is missing'],
      [['--name'], "Option '-n, --name <value>' argument missing"],
    ];
    for (const [argv, message] of cases) {
      const { command, seen } = thing();
      err = [];
      expect(await runCommand('thing', command, argv), argv.join(' ')).toBe(Exit.USAGE);
      const [first = '', ...rest] = err.join('').split('\n');
      expect(first).toMatch(/^botlink thing: /);
      expect(first).toContain(message);
      expect(rest.slice(-2)).toEqual([USAGE, '']);
      expect(seen).toEqual([]);
    }
    expect(out).toEqual([]);
  });

  it('a command that declares no positionals takes none; one that declares one takes no second', async () => {
    const none = defineCommand({ usage: 'usage: botlink none', flags: {}, run: async () => undefined });
    expect(await runCommand('none', none, ['extra'])).toBe(Exit.USAGE);
    expect(err.join('')).toContain("botlink none: Unexpected argument 'extra'");
    const one = defineCommand({
      usage: 'usage: botlink one [FILE]',
      flags: {},
      positionals: [{ name: 'file' }],
      run: async () => undefined,
    });
    err = [];
    expect(await runCommand('one', one, ['a', 'b'])).toBe(Exit.USAGE);
    expect(err.join('')).toBe("botlink one: unexpected argument 'b'\nusage: botlink one [FILE]\n");
    expect(await runCommand('one', one, [])).toBe(Exit.OK);
  });

  it('number flags: seconds are a positive number, integers lie within their bounds', async () => {
    const rejected: [string[], string][] = [
      [['--timeout', '0'], "--timeout must be a positive number of seconds, got '0'"],
      [['--timeout=-1'], "--timeout must be a positive number of seconds, got '-1'"],
      [['--timeout', 'abc'], "--timeout must be a positive number of seconds, got 'abc'"],
      [['--timeout', 'Infinity'], "--timeout must be a positive number of seconds, got 'Infinity'"],
      [['--port', '65536'], "--port must be an integer from 0 to 65535, got '65536'"],
      [['--port=-1'], "--port must be an integer from 0 to 65535, got '-1'"],
      [['--port', '1e3'], "--port must be an integer from 0 to 65535, got '1e3'"],
      [['--port', ''], "--port must be an integer from 0 to 65535, got ''"],
    ];
    for (const [argv, message] of rejected) {
      const { command } = thing();
      err = [];
      expect(await runCommand('thing', command, [...argv, 'bot-1'])).toBe(Exit.USAGE);
      expect(err[0]).toBe(`botlink thing: ${message}\n${USAGE}\n`);
    }
    const { command, seen } = thing();
    await runCommand('thing', command, ['--timeout', '0.001', '--port', '65535', 'bot-1']);
    expect(seen[0]?.flags).toEqual({ timeout: 0.001, port: 65535 });
  });

  it('what run throws is printed after the label and exits by the table; what it returns is the exit code', async () => {
    const fails = thing(async () => {
      throw new Failure('no daemon at /run/botlink.sock', { fix: 'start it', kind: 'unavailable' });
    });
    expect(await runCommand('thing', fails.command, ['bot-1'])).toBe(Exit.UNAVAILABLE);
    expect(err.join('')).toBe('botlink thing: no daemon at /run/botlink.sock\n  fix: start it\n');
    const labelled = defineCommand({ usage: 'u', flags: {}, label: 'demo app', run: () => Promise.reject(new Error('gone')) });
    err = [];
    expect(await runCommand('demo-app', labelled, [])).toBe(Exit.FAILURE);
    expect(err.join('')).toBe('demo app: gone\n');
    expect(await runCommand('thing', thing(async () => 1).command, ['bot-1'])).toBe(1);
  });

  it('a command that exits at once exits with its code when run ends, and when run throws', async () => {
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    const daemonish = (run: () => Promise<number | undefined>): Command =>
      defineCommand({ usage: 'usage: botlink d', flags: {}, exitAtOnce: true, run });
    await runCommand(
      'd',
      daemonish(async () => undefined),
      [],
    );
    await runCommand(
      'd',
      daemonish(() => Promise.reject(new DaemonNotStarted(new BotlinkError('ERR_ALREADY_RUNNING', 'taken', 'fatal')))),
      [],
    );
    expect(exit.mock.calls).toEqual([[Exit.OK], [Exit.UNAVAILABLE]]);
  });

  it('a subcommand runs as a command of its own, named after both; an unknown one is a usage error', async () => {
    const code = thing();
    const parent = defineCommand({
      usage: 'usage: botlink broker [--config FILE]\n       botlink broker code …',
      flags: { config: { type: 'string' } },
      subcommands: { code: async () => code.command },
      run: async () => 7,
    });
    expect(await runCommand('broker', parent, ['code', '--json', 'bot-1'])).toBe(Exit.OK);
    expect(code.seen[0]).toMatchObject({ name: 'broker code', flags: { json: true }, args: { botId: 'bot-1' } });
    expect(await runCommand('broker', parent, ['--config', 'f'])).toBe(7);
    expect(await runCommand('broker', parent, ['--help'])).toBe(Exit.OK);
    expect(out.join('')).toBe('usage: botlink broker [--config FILE]\n       botlink broker code …\n');
    expect(await runCommand('broker', parent, ['frobnicate'])).toBe(Exit.USAGE);
    expect(err.join('')).toMatch(/^botlink broker: unknown command 'frobnicate'\nusage: botlink broker/);
    expect(await runCommand('broker', parent, ['toString'])).toBe(Exit.USAGE);
    err = [];
    expect(await runCommand('broker', parent, ['code'])).toBe(Exit.USAGE);
    expect(err.join('')).toBe(`botlink broker code: BOTID is missing\n${USAGE}\n`);
  });
});

describe('the one table of failures', () => {
  const botlink = (
    retry: ConstructorParameters<typeof BotlinkError>[2],
    code: ConstructorParameters<typeof BotlinkError>[0] = 'ERR_NETWORK',
  ) => new BotlinkError(code, 'it failed', retry, { fix: 'do this' });

  it('gives every failure its exit code', () => {
    const table: [unknown, number][] = [
      [new UsageError('bad flag'), Exit.USAGE],
      [new Failure('unreadable', { kind: 'data' }), Exit.DATAERR],
      [new Failure('off', { kind: 'config' }), Exit.CONFIG],
      [new Failure('no reply', { kind: 'failed' }), Exit.FAILURE],
      [new Failure('explained', { cause: botlink('needs-provisioning') }), Exit.CONFIG],
      [new Failure('explained', { cause: new Error('plain') }), Exit.FAILURE],
      [new DaemonNotStarted(botlink('needs-config', 'ERR_CONFIG')), Exit.CONFIG],
      [new DaemonNotStarted(botlink('fatal', 'ERR_ALREADY_RUNNING')), Exit.UNAVAILABLE],
      [new DaemonNotStarted(botlink('needs-config', 'ERR_STORE_ACCESS')), Exit.FAILURE],
      [new RelayRefused('no socket', 'start the daemon'), Exit.UNAVAILABLE],
      [new RoundLost('the link went backoff'), Exit.FAILURE],
      [botlink('needs-config', 'ERR_SECRET_FILE'), Exit.CONFIG],
      [botlink('needs-provisioning', 'ERR_NO_IDENTITY'), Exit.CONFIG],
      [botlink('fatal', 'ERR_SEED'), Exit.DATAERR],
      [botlink('retry-backoff'), Exit.UNAVAILABLE],
      [botlink('retry-soon', 'ERR_DEADLINE'), Exit.UNAVAILABLE],
      [botlink('needs-clock', 'ERR_CLOCK_UNTRUSTED'), Exit.UNAVAILABLE],
      [new Error('unforeseen'), Exit.FAILURE],
      ['a string', Exit.FAILURE],
    ];
    for (const [failure, code] of table) expect(exitOf(failure), String(failure)).toBe(code);
  });

  it('prints the cause after the label, and the fix on a line of its own', () => {
    expect(failureText(new Failure('no botId yet', { kind: 'config' }), 'botlink token')).toBe('botlink token: no botId yet\n');
    expect(failureText(new RelayRefused('no socket', 'start it'), 'botlink chat')).toBe('botlink chat: no socket\n  fix: start it\n');
    expect(failureText(botlink('needs-config', 'ERR_CONFIG'), 'botlink status')).toBe(
      'botlink status: configuration error: it failed\n  fix: do this\n',
    );
    expect(failureText(new DaemonNotStarted(botlink('needs-config', 'ERR_CONFIG')), 'botlink')).toBe(
      'botlink: it failed\n  fix: do this\n',
    );
    expect(failureText(botlink('retry-backoff'), 'botlink token')).toBe('botlink token: it failed\n  fix: do this\n');
    expect(failureText(new Error('unforeseen'), 'botlink serve')).toBe('botlink serve: unforeseen\n');
  });
});

describe('untilSignal', () => {
  it('resolves with the first SIGINT or SIGTERM and gives both back; cancel gives them back unused', async () => {
    const before = { int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') };
    const wait = untilSignal();
    expect(process.listenerCount('SIGTERM')).toBe(before.term + 1);
    process.emit('SIGTERM', 'SIGTERM');
    expect(await wait.received).toBe('SIGTERM');
    expect({ int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') }).toEqual(before);
    untilSignal().cancel();
    expect({ int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') }).toEqual(before);
    expect(stoppingOn('SIGINT')).toBe('SIGINT: closing');
  });
});
