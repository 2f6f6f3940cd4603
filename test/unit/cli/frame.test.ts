import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { RelayRefused, RoundLost } from '../../../src/cli/app/relay-errors.js';
import { type Command, defineCommand, runCommand } from '../../../src/cli/frame/command.js';
import { DaemonNotStarted, Exit, Failure, UsageError } from '../../../src/cli/frame/exit.js';
import { exitOf, failureText } from '../../../src/cli/frame/failures.js';
import type { Env } from '../../../src/cli/frame/io.js';
import { stoppingOn, untilSignal } from '../../../src/cli/frame/signals.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { capturedIo } from '../../helpers/captured-io.js';

afterEach(() => vi.restoreAllMocks());

const USAGE = 'usage: botlink thing [--json] [--timeout S] [--port P] BOTID [MORE…]';

type Seen = { name: string; flags: object; args: object };

/** A command that records what it was run with (its io aside). */
function thing(result: (ctx: Seen) => Promise<number | undefined> = async () => undefined) {
  const seen: Seen[] = [];
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
    async run({ name, flags, args }) {
      seen.push({ name, flags, args });
      return result({ name, flags, args });
    },
  });
  return { command, seen };
}

/** `command` run in-process: its exit code and what it wrote. */
async function run(command: Command, argv: readonly string[], name = 'thing', env: Env = {}) {
  const io = capturedIo(env);
  const code = await runCommand(name, command, argv, io);
  return { code, out: io.stdout.text, err: io.stderr.text };
}

describe('the command frame', () => {
  it('--help and -h print the usage and the help to stdout, exit 0, and run nothing', async () => {
    for (const flag of ['--help', '-h']) {
      const { command, seen } = thing();
      expect(await run(command, [flag])).toEqual({ code: Exit.OK, out: `${USAGE}\n\nMore words for --help only.\n`, err: '' });
      expect(seen).toEqual([]);
    }
  });

  it('hands run the flags and positionals, typed as declared', async () => {
    const { command, seen } = thing();
    expect((await run(command, ['--json', '-n', 'x', '--timeout', '2.5', '--port', '0', 'bot-1', 'a', 'b'])).code).toBe(Exit.OK);
    expect(seen).toEqual([
      { name: 'thing', flags: { json: true, name: 'x', timeout: 2.5, port: 0 }, args: { botId: 'bot-1', more: ['a', 'b'] } },
    ]);
    await run(command, ['bot-2']);
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
      const { code, out, err } = await run(command, argv);
      expect(code, argv.join(' ')).toBe(Exit.USAGE);
      const [first = '', ...rest] = err.split('\n');
      expect(first).toMatch(/^botlink thing: /);
      expect(first).toContain(message);
      expect(rest.slice(-2)).toEqual([USAGE, '']);
      expect(seen).toEqual([]);
      expect(out).toBe('');
    }
  });

  it('a command that declares no positionals takes none; one that declares one takes no second', async () => {
    const none = defineCommand({ usage: 'usage: botlink none', flags: {}, run: async () => undefined });
    const extra = await run(none, ['extra'], 'none');
    expect(extra.code).toBe(Exit.USAGE);
    expect(extra.err).toContain("botlink none: Unexpected argument 'extra'");
    const one = defineCommand({
      usage: 'usage: botlink one [FILE]',
      flags: {},
      positionals: [{ name: 'file' }],
      run: async () => undefined,
    });
    expect(await run(one, ['a', 'b'], 'one')).toEqual({
      code: Exit.USAGE,
      out: '',
      err: "botlink one: unexpected argument 'b'\nusage: botlink one [FILE]\n",
    });
    expect((await run(one, [], 'one')).code).toBe(Exit.OK);
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
      expect(await run(command, [...argv, 'bot-1'])).toEqual({ code: Exit.USAGE, out: '', err: `botlink thing: ${message}\n${USAGE}\n` });
    }
    const { command, seen } = thing();
    await run(command, ['--timeout', '0.001', '--port', '65535', 'bot-1']);
    expect(seen[0]?.flags).toEqual({ timeout: 0.001, port: 65535 });
  });

  it('what run throws is printed after the label and exits by the table; what it returns is the exit code', async () => {
    const fails = thing(async () => {
      throw new Failure('no daemon at /run/botlink.sock', { fix: 'start it', kind: 'unavailable' });
    });
    expect(await run(fails.command, ['bot-1'])).toEqual({
      code: Exit.UNAVAILABLE,
      out: '',
      err: 'botlink thing: no daemon at /run/botlink.sock\n  fix: start it\n',
    });
    const labelled = defineCommand({ usage: 'u', flags: {}, label: 'demo app', run: () => Promise.reject(new Error('gone')) });
    expect(await run(labelled, [], 'demo-app')).toEqual({ code: Exit.FAILURE, out: '', err: 'demo app: gone\n' });
    expect((await run(thing(async () => 1).command, ['bot-1'])).code).toBe(1);
  });

  it('a command that exits at once exits with its code when run ends, and when run throws', async () => {
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    const daemonish = (run: () => Promise<number | undefined>): Command =>
      defineCommand({ usage: 'usage: botlink d', flags: {}, exitAtOnce: true, run });
    await run(
      daemonish(async () => undefined),
      [],
      'd',
    );
    const failed = await run(
      daemonish(() => Promise.reject(new DaemonNotStarted(new BotlinkError('ERR_ALREADY_RUNNING', 'taken', 'fatal')))),
      [],
      'd',
    );
    expect(exit.mock.calls).toEqual([[Exit.OK], [Exit.UNAVAILABLE]]);
    expect(failed.err).toBe('botlink d: taken\n');
  });

  it('a subcommand runs as a command of its own, named after both, with the same io; an unknown one is a usage error', async () => {
    const code = thing();
    const parent = defineCommand({
      usage: 'usage: botlink broker [--config FILE]\n       botlink broker code …',
      flags: { config: { type: 'string' } },
      subcommands: { code: async () => code.command },
      run: async () => 7,
    });
    expect((await run(parent, ['code', '--json', 'bot-1'], 'broker')).code).toBe(Exit.OK);
    expect(code.seen[0]).toMatchObject({ name: 'broker code', flags: { json: true }, args: { botId: 'bot-1' } });
    expect((await run(parent, ['--config', 'f'], 'broker')).code).toBe(7);
    expect(await run(parent, ['--help'], 'broker')).toEqual({
      code: Exit.OK,
      out: 'usage: botlink broker [--config FILE]\n       botlink broker code …\n',
      err: '',
    });
    const unknown = await run(parent, ['frobnicate'], 'broker');
    expect(unknown.code).toBe(Exit.USAGE);
    expect(unknown.err).toMatch(/^botlink broker: unknown command 'frobnicate'\nusage: botlink broker/);
    expect((await run(parent, ['toString'], 'broker')).code).toBe(Exit.USAGE);
    expect(await run(parent, ['code'], 'broker')).toEqual({
      code: Exit.USAGE,
      out: '',
      err: `botlink broker code: BOTID is missing\n${USAGE}\n`,
    });
  });
});

describe('the io the frame hands a command', () => {
  const echo = defineCommand({
    usage: 'usage: botlink echo',
    flags: {},
    async run({ stdout, stderr, env }) {
      stdout.write(`out ${env.WHO ?? 'nobody'}\n`);
      stderr.write('err\n');
      return undefined;
    },
  });

  it("is the caller's when given: what the command writes is captured, the environment is the one given", async () => {
    expect(await run(echo, [], 'echo', { WHO: 'test' })).toEqual({ code: Exit.OK, out: 'out test\n', err: 'err\n' });
    expect(await run(echo, [], 'echo')).toEqual({ code: Exit.OK, out: 'out nobody\n', err: 'err\n' });
  });

  it("is the process's when none is given", async () => {
    const out: string[] = [];
    const err: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
    expect(await runCommand('echo', echo, [])).toBe(Exit.OK);
    expect({ out, err }).toEqual({ out: [`out ${process.env.WHO ?? 'nobody'}\n`], err: ['err\n'] });
  });
});

describe('declared flags and rules', () => {
  const RULED =
    'usage: botlink ruled --vendor V [--kind K] [--adopt | --replace] [--config F | --socket P | --url U] (TEXT | --audio F [--save O])';
  const ruled = () => {
    const seen: Seen[] = [];
    const command = defineCommand({
      usage: RULED,
      flags: {
        vendor: { type: 'string', required: true },
        kind: { type: 'string', choices: ['plain', 'adopt'] },
        wait: { type: 'seconds', required: true },
        adopt: { type: 'boolean' },
        replace: { type: 'boolean' },
        config: { type: 'string' },
        socket: { type: 'string' },
        url: { type: 'string' },
        audio: { type: 'string' },
        save: { type: 'string' },
      },
      positionals: [{ name: 'text', variadic: true }],
      exclusive: [
        ['--adopt', '--replace'],
        ['--config', '--socket', '--url'],
      ],
      oneOf: [['TEXT', '--audio']],
      needs: [['--save', '--audio']],
      async run({ name, flags, args }) {
        seen.push({ name, flags, args });
        return undefined;
      },
    });
    return { command, seen };
  };
  const base = ['--vendor', 'V', '--wait', '1'];

  it.each<[string, string[], string]>([
    ['a required string flag absent', ['--wait', '1', 'hi'], '--vendor is required'],
    ['a required string flag empty', ['--vendor', '', '--wait', '1', 'hi'], '--vendor is required'],
    ['a required number flag absent', ['--vendor', 'V', 'hi'], '--wait is required'],
    ['a value not among the choices', [...base, '--kind', 'other', 'hi'], "--kind must be one of plain, adopt, got 'other'"],
    ['two of an exclusive pair', [...base, '--adopt', '--replace', 'hi'], '--adopt and --replace exclude each other'],
    ['two of an exclusive three', [...base, '--url', 'u', '--config', 'c', 'hi'], '--config and --url exclude each other'],
    [
      'all of an exclusive three',
      [...base, '--url', 'u', '--socket', 's', '--config', 'c', 'hi'],
      '--config, --socket and --url exclude each other',
    ],
    ['none of a one-of', base, 'TEXT or --audio is required'],
    ['a one-of whose positional is blank', [...base, ' ', ''], 'TEXT or --audio is required'],
    ['both of a one-of', [...base, '--audio', 'a.wav', 'hi'], 'TEXT and --audio exclude each other'],
    ['a flag without the one it needs', [...base, '--save', 'o.wav', 'hi'], '--save needs --audio'],
  ])('%s is a usage error naming the flags, before run', async (_what, argv, message) => {
    const { command, seen } = ruled();
    expect(await run(command, argv, 'ruled')).toEqual({ code: Exit.USAGE, out: '', err: `botlink ruled: ${message}\n${RULED}\n` });
    expect(seen).toEqual([]);
  });

  it.each<[string, string[], object, object]>([
    ['the required flags and TEXT', [...base, 'hi', 'there'], { vendor: 'V', wait: 1 }, { text: ['hi', 'there'] }],
    ['a choice', [...base, '--kind', 'adopt', 'hi'], { vendor: 'V', wait: 1, kind: 'adopt' }, { text: ['hi'] }],
    [
      'one of each exclusive group',
      [...base, '--replace', '--socket', 's', 'hi'],
      { vendor: 'V', wait: 1, replace: true, socket: 's' },
      { text: ['hi'] },
    ],
    [
      '--audio for TEXT, with what it allows',
      [...base, '--audio', 'a.wav', '--save', 'o.wav'],
      { vendor: 'V', wait: 1, audio: 'a.wav', save: 'o.wav' },
      { text: [] },
    ],
  ])('%s: run gets them as given', async (_what, argv, flags, args) => {
    const { command, seen } = ruled();
    expect(await run(command, argv, 'ruled')).toEqual({ code: Exit.OK, out: '', err: '' });
    expect(seen).toEqual([{ name: 'ruled', flags, args }]);
  });

  it('--help answers even when what the rules require is missing', async () => {
    const { command, seen } = ruled();
    expect(await run(command, ['--help'], 'ruled')).toEqual({ code: Exit.OK, out: `${RULED}\n`, err: '' });
    expect(seen).toEqual([]);
  });

  it('the flags are typed as declared: required ones present, choices their union, rules narrowing the rest', () => {
    defineCommand({
      usage: 'u',
      flags: {
        'vendor-id': { type: 'string' },
        'device-id': { type: 'string', required: true },
        type: { type: 'string', choices: ['ROBOT', 'APP'] },
        broker: { type: 'string' },
        code: { type: 'string' },
        force: { type: 'boolean' },
        wait: { type: 'seconds' },
      },
      oneOf: [['--vendor-id', '--broker']],
      exclusive: [['--broker', '--force']],
      needs: [['--broker', '--code']],
      async run({ flags }) {
        expectTypeOf(flags['device-id']).toEqualTypeOf<string>();
        expectTypeOf(flags.type).toEqualTypeOf<'ROBOT' | 'APP' | undefined>();
        expectTypeOf(flags.wait).toEqualTypeOf<number | undefined>();
        if (flags.broker !== undefined) {
          // --broker given: --code with it (needs), no --vendor-id (one of), no --force (exclusive).
          expectTypeOf(flags.code).toEqualTypeOf<string>();
          expectTypeOf(flags['vendor-id']).toEqualTypeOf<undefined>();
          expectTypeOf(flags.force).toEqualTypeOf<undefined>();
        } else {
          expectTypeOf(flags['vendor-id']).toEqualTypeOf<string>();
          expectTypeOf(flags.code).toEqualTypeOf<string | undefined>();
        }
        return undefined;
      },
    });
    defineCommand({
      usage: 'u',
      flags: { a: { type: 'string' } },
      positionals: [{ name: 'file' }],
      // @ts-expect-error a rule names only declared flags and positionals
      exclusive: [['--a', '--b']],
      run: async () => undefined,
    });
    defineCommand({
      usage: 'u',
      flags: { a: { type: 'string' } },
      positionals: [{ name: 'file' }],
      // @ts-expect-error a positional is named in capitals, as the usage shows it
      oneOf: [['--a', 'file']],
      run: async () => undefined,
    });
    defineCommand({
      usage: 'u',
      // @ts-expect-error a boolean flag is present or not: it cannot be required
      flags: { a: { type: 'boolean', required: true } },
      run: async () => undefined,
    });
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
