import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Exit } from '../../../src/cli/frame/exit.js';
import { writeBrokerConfig } from '../../helpers/broker-files.js';
import { botlinkInProcess } from '../../helpers/in-process.js';

// Every command's command line as the frame checks it, in-process (main with a captured io): what each
// declares (required, choices, exclusive, one of, needs) and the checks a command keeps on a value.

describe('usage mistakes exit 64 with `botlink <command>: <what>`, then the usage, and nothing on stdout', () => {
  it.each<[string[], string]>([
    [['broker', 'code', '--config', 'c.json'], 'botlink broker code: --vendor-id is required'],
    [['broker', 'code', '--vendor-id', '', '--any-device'], 'botlink broker code: --vendor-id is required'],
    [['broker', 'code', '--vendor-id', 'V1'], 'botlink broker code: --device-id or --any-device is required'],
    [
      ['broker', 'code', '--vendor-id', 'V1', '--device-id', 'SN', '--any-device'],
      'botlink broker code: --device-id and --any-device exclude each other',
    ],
    [
      ['broker', 'code', '--vendor-id', 'V1', '--adopt', '--replace', '--device-id', 'x'],
      'botlink broker code: --adopt and --replace exclude each other',
    ],
    [
      ['broker', 'code', '--vendor-id', 'V1', '--any-device', '--uses', '0'],
      "botlink broker code: --uses must be an integer from 1 to 1000000, got '0'",
    ],
    [['broker', 'preauth', 'devices.csv'], 'botlink broker preauth: --vendor-id is required'],
    [['broker', 'preauth', '--vendor-id', 'V1'], 'botlink broker preauth: FILE is missing'],
    [['broker', 'revoke'], 'botlink broker revoke: BOTID is missing'],
    [['broker', 'frobnicate'], "botlink broker: unknown command 'frobnicate'"],
    [['provision', '--vendor-id', 'V1'], 'botlink provision: --device-id is required'],
    [['provision', '--device-id', 'SN'], 'botlink provision: --vendor-id or --code is required'],
    [
      ['provision', '--vendor-id', 'V1', '--device-id', 'SN', '--type', 'TOASTER'],
      "botlink provision: --type must be one of PHYSICAL_ROBOT, APP_ROBOT, got 'TOASTER'",
    ],
    [
      ['provision', '--vendor-id', 'V 1', '--device-id', 'SN'],
      'botlink provision: --vendor-id must be 1 to 256 characters without spaces or control characters',
    ],
    [['provision', '--broker', 'https://b', '--device-id', 'SN'], 'botlink provision: --vendor-id or --code is required'],
    [['provision', '--code', 'C', '--device-id', 'SN'], 'botlink provision: --code needs --broker'],
    [['provision', '--vendor-id', 'V1', '--no-wait', '--device-id', 'SN'], 'botlink provision: --no-wait needs --broker'],
    [
      ['provision', '--broker', 'https://b', '--code', 'C', '--vendor-id', 'V1', '--device-id', 'SN'],
      'botlink provision: --vendor-id and --code exclude each other',
    ],
    [
      ['provision', '--broker', 'https://b', '--code', 'C', '--no-wait', '--device-id', 'SN'],
      'botlink provision: --code and --no-wait exclude each other',
    ],
    [
      ['provision', '--broker', 'https://b', '--code', 'C', '--force', '--device-id', 'SN'],
      'botlink provision: --broker and --force exclude each other',
    ],
    [['chat'], 'botlink chat: TEXT or --audio is required'],
    [['chat', '--json', ' '], 'botlink chat: TEXT or --audio is required'],
    [['chat', '--audio', 'x.wav', 'hi'], 'botlink chat: TEXT and --audio exclude each other'],
    [['chat', '--save-reply', 'out.wav', 'hi'], 'botlink chat: --save-reply needs --audio'],
    [['chat', '--config', 'c.json', '--socket', '/x', 'hi'], 'botlink chat: --config and --socket exclude each other'],
    [['chat', '--timeout', 'soon', 'hi'], "botlink chat: --timeout must be a positive number of seconds, got 'soon'"],
    [['chat', '--nope', 'hi'], "botlink chat: Unknown option '--nope'"],
    [['watch', '--config', 'c.json', '--socket', '/x'], 'botlink watch: --config and --socket exclude each other'],
    [['logs', '--level', 'loud'], "botlink logs: --level must be one of trace, debug, info, warn, error, fatal, got 'loud'"],
    [['logs', '--since', 'a while ago'], "botlink logs: --since: not a time or a span: 'a while ago'"],
    [['serve', '--displacement-marker', 'frame'], "botlink serve: --displacement-marker must be one of code400, event, got 'frame'"],
    [['serve', '--host', ''], 'botlink serve: --host must not be empty'],
    [['serve', '--host', '0.0.0.0'], 'botlink serve: --host 0.0.0.0 is not a loopback address'],
    [['token', '--refresh'], "botlink token: Unknown option '--refresh'"],
    [['token', '--timeout', '0'], "botlink token: --timeout must be a positive number of seconds, got '0'"],
    [['demo', '--duration', '0'], "botlink demo: --duration must be a positive number of seconds, got '0'"],
    [['demo-app', '--every', '3'], 'botlink demo-app: --socket is required'],
    [['status', 'extra'], "botlink status: Unexpected argument 'extra'"],
  ])('botlink %j', async (argv, message) => {
    const run = await botlinkInProcess(argv);
    expect(run.code, run.stderr).toBe(Exit.USAGE);
    expect(run.stdout).toBe('');
    const [first, ...rest] = run.stderr.split('\n');
    expect(first?.startsWith(message), first).toBe(true);
    const command = argv[0] === 'broker' && argv[1] !== 'frobnicate' ? `${argv[0]} ${argv[1]}` : argv[0];
    expect(rest.join('\n')).toContain(`usage: botlink ${command}`);
  });

  it('botlink with an unknown command, or none, prints the list of commands', async () => {
    const unknown = await botlinkInProcess(['frobnicate']);
    expect(unknown.code).toBe(Exit.USAGE);
    expect(unknown.stderr).toMatch(/^botlink: unknown command 'frobnicate'\nusage: botlink <command> \[options\]/);
    const none = await botlinkInProcess([]);
    expect(none).toMatchObject({ code: Exit.USAGE, stderr: '' });
    expect(none.stdout).toContain('botlink <command> --help for its options');
  });
});

describe('--help prints the usage on stdout and exits 0, whatever else the command line lacks', () => {
  it.each<[string[], string]>([
    [['status', '--help'], 'usage: botlink status [--config FILE] [--json]'],
    [['token', '--help'], 'usage: botlink token'],
    [['provision', '--help'], '--vendor-id ID'],
    [['broker', 'code', '--help'], 'usage: botlink broker code [--config FILE] --vendor-id V'],
    [['chat', '-h'], 'usage: botlink chat'],
  ])('botlink %j', async (argv, usage) => {
    const run = await botlinkInProcess(argv);
    expect(run).toMatchObject({ code: Exit.OK, stderr: '' });
    expect(run.stdout).toContain(usage);
  });
});

describe('the broker operator commands, in-process on a store of their own', () => {
  let dir: string;
  let config: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'botlink-usage-broker-'));
    // The operator commands act on the store: no cloud is asked.
    config = writeBrokerConfig(dir, { cloudUrl: 'http://127.0.0.1:9', secret: 'SK-usage-test' });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('code prints the code alone on stdout and what it is on stderr; devices lists none yet; --json is one object', async () => {
    const code = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--any-device', '--uses', '2']);
    expect(code.code, code.stderr).toBe(Exit.OK);
    expect(code.stdout).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}\n$/);
    expect(code.stderr).toMatch(/^plain code for vendor V1, for any device: 2 use\(s\), expires \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ?\n$/);
    const bound = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--device-id', 'SN-7']);
    expect(bound.stderr).toMatch(/^plain code for vendor V1, for device SN-7: 1 use\(s\), /);
    const audit = readFileSync(join(dir, 'broker.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(audit.map((a) => [a['audit'], a['deviceId'], a['anyDevice'], a['uses']])).toEqual([
      ['code', null, true, 2],
      ['code', 'SN-7', false, 1],
    ]);
    expect(JSON.stringify(audit)).not.toContain(code.stdout.trim());
    const json = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--any-device', '--json']);
    expect(json).toMatchObject({ code: Exit.OK, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({ code: expect.any(String), expiresAt: expect.any(Number), uses: 1 });
    const devices = await botlinkInProcess(['broker', 'devices', '--config', config]);
    expect(devices).toEqual({ code: Exit.OK, stdout: 'botId\tdeviceId\tkeyId\tstate\tlastSeen\n', stderr: '' });
  });

  it('reads its config from the environment it is given, and says what to fix when there is none', async () => {
    const given = await botlinkInProcess(['broker', 'devices', '--json'], { BOTLINK_BROKER_CONFIG: config });
    expect(given).toEqual({ code: Exit.OK, stdout: '[]\n', stderr: '' });
    const missing = await botlinkInProcess(['broker', 'devices'], { BOTLINK_BROKER_CONFIG: join(dir, 'absent.json') });
    expect(missing.code).toBe(Exit.CONFIG);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('absent.json');
  });
});
