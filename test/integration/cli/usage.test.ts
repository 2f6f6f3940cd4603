import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Exit } from '../../../src/cli/frame/exit.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { writeBrokerConfig } from '../../helpers/broker-files.js';
import { vendorSeed } from '../../helpers/broker-rig.js';
import { botlinkInProcess } from '../../helpers/in-process.js';
import { freePort } from '../../helpers/ports.js';

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
    [['broker', 'preauth', '--vendor-id', 'V1'], 'botlink broker preauth: INPUT is missing'],
    [['broker', 'preauth', '--remove', 'SN-1'], 'botlink broker preauth: --vendor-id is required'],
    [['broker', 'cancel'], 'botlink broker cancel: CODE_ID is missing'],
    [['broker', 'reset-limits'], 'botlink broker reset-limits: BOTID is missing'],
    [
      ['broker', 'devices', '--state', 'gone'],
      "botlink broker devices: --state must be one of active, revoked, preauthorized, pending, rejected, got 'gone'",
    ],
    [['broker', 'revoke'], 'botlink broker revoke: BOTID is missing'],
    [['broker', 'accept', 'k'], 'botlink broker accept: --device-id is required'],
    [['broker', 'reject'], 'botlink broker reject: KEYID or --vendor-id is required'],
    [['broker', 'reject', '--source', '10.0.0.0/8'], 'botlink broker reject: KEYID or --vendor-id is required'],
    [
      ['broker', 'reject', '--vendor-id', 'V1', '--first-asked-before', 'soon'],
      "botlink broker reject: --first-asked-before: not a time or a span: 'soon'",
    ],
    [
      ['broker', 'devices', '--admin', 'https://b.example', '--config', 'c.json'],
      'botlink broker devices: --admin and --config exclude each other',
    ],
    [
      ['broker', 'revoke', '--admin', 'http://192.0.2.7:8443', 'bot-1'],
      'botlink broker revoke: --admin http://192.0.2.7:8443: plain http only to loopback',
    ],
    [['broker', 'codes', '--admin', 'ftp://b.example'], 'botlink broker codes: --admin: the admin URL is https://'],
    [['broker', 'pending', '--admin', 'https://ops:pw@b.example'], 'botlink broker pending: --admin: no user or password in the URL'],
    [
      ['broker', 'reset-limits', '--admin', 'http://[::1]:9', 'bot-1'],
      'botlink broker reset-limits: BOTLINK_BROKER_ADMIN_TOKEN is not set',
    ],
    [
      ['broker', 'admin-token', 'create', '--admin', 'https://b.example', '--name', 'n', '--role', 'viewer'],
      "botlink broker admin-token create: admin-token works on the broker's store only",
    ],
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
    [['broker', 'code', '--help'], 'usage: botlink broker code [--config FILE | --admin URL] --vendor-id V'],
    [['chat', '-h'], 'usage: botlink chat'],
  ])('botlink %j', async (argv, usage) => {
    const run = await botlinkInProcess(argv);
    expect(run).toMatchObject({ code: Exit.OK, stderr: '' });
    expect(run.stdout).toContain(usage);
  });
});

describe('the broker operator commands, in-process on a store of their own', () => {
  const SECRET = 'SK-usage-test';
  let dir: string;
  let config: string;
  let cloud: TestService;
  const auditLines = (): Record<string, unknown>[] =>
    readFileSync(join(dir, 'broker.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'botlink-usage-broker-'));
    // `broker code` asks the cloud for the vendor's token: its seed knows V1 alone.
    cloud = await createTestService({ seed: vendorSeed(SECRET) });
    config = writeBrokerConfig(dir, { cloudUrl: cloud.url, secret: SECRET });
  });
  afterAll(async () => {
    await cloud?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('code prints the code alone on stdout and what it is (binding, id) on stderr; devices lists none yet; --json is one object', async () => {
    const code = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--any-device', '--uses', '2']);
    expect(code.code, code.stderr).toBe(Exit.OK);
    expect(code.stdout).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}\n$/);
    expect(code.stderr).toMatch(
      /^plain code for vendor V1, for any device: 2 use\(s\), expires \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ?; id [0-9a-f]{20}\n$/,
    );
    const bound = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--device-id', 'SN-7']);
    expect(bound.stderr).toMatch(/^plain code for vendor V1, for device SN-7: 1 use\(s\), /);
    const ids = [code, bound].map((r) => /; id ([0-9a-f]{20})\n$/.exec(r.stderr)?.[1]);
    const audit = auditLines();
    expect(audit.map((a) => [a['audit'], a['deviceId'], a['codeId'], a['anyDevice'], a['uses']])).toEqual([
      ['code', null, ids[0], true, 2],
      ['code', 'SN-7', ids[1], false, 1],
    ]);
    expect(JSON.stringify(audit)).not.toContain(code.stdout.trim());
    const json = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--any-device', '--json']);
    expect(json).toMatchObject({ code: Exit.OK, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{20}$/),
      code: expect.any(String),
      expiresAt: expect.any(Number),
      uses: 1,
    });
    const devices = await botlinkInProcess(['broker', 'devices', '--config', config]);
    expect(devices).toEqual({ code: Exit.OK, stdout: 'botId\tdeviceId\tvendorId\tkeyId\tstate\tlastSeen\tagentVersion\n', stderr: '' });
  });

  it('code refuses a vendor the cloud does not know (65) and stores nothing; the cloud away is 69', async () => {
    const before = (await botlinkInProcess(['broker', 'codes', '--config', config, '--json'])).stdout;
    const unknown = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V9', '--device-id', 'SN-1']);
    expect([unknown.code, unknown.stdout]).toEqual([Exit.DATAERR, '']);
    expect(unknown.stderr).toContain('the cloud knows no vendor V9');
    expect((await botlinkInProcess(['broker', 'codes', '--config', config, '--json'])).stdout).toBe(before);
    expect(auditLines().filter((a) => a['vendorId'] === 'V9')).toEqual([]);
    const away = writeBrokerConfig(dir, { cloudUrl: `http://127.0.0.1:${await freePort()}`, secret: SECRET }, 'away.json');
    const unreachable = await botlinkInProcess(['broker', 'code', '--config', away, '--vendor-id', 'V1', '--any-device']);
    expect([unreachable.code, unreachable.stdout]).toEqual([Exit.UNAVAILABLE, '']);
  });

  it('codes lists the outstanding codes by id and never a code; cancel ends one by its id, refuses a code itself (64) and logs nothing of it', async () => {
    const made = await botlinkInProcess(['broker', 'code', '--config', config, '--vendor-id', 'V1', '--device-id', 'SN-C1', '--json']);
    const { id, code } = JSON.parse(made.stdout) as { id: string; code: string };
    const listed = await botlinkInProcess(['broker', 'codes', '--config', config, '--json']);
    expect(listed.code, listed.stderr).toBe(Exit.OK);
    expect(JSON.parse(listed.stdout)).toContainEqual({
      id,
      vendorId: 'V1',
      deviceId: 'SN-C1',
      kind: 'plain',
      usesLeft: 1,
      expiresAt: expect.any(Number),
    });
    const words = await botlinkInProcess(['broker', 'codes', '--config', config, '--vendor-id', 'V1']);
    expect(words.stdout.split('\n')[0]).toBe('id\tvendorId\tbinding\tkind\tusesLeft\texpires');
    expect(words.stdout).toMatch(new RegExp(`^${id}\\tV1\\tdevice SN-C1\\tplain\\t1\\t\\d{4}-`, 'm'));
    expect(words.stdout).toMatch(/\tany device\t/);
    expect((await botlinkInProcess(['broker', 'codes', '--config', config, '--vendor-id', 'V2', '--json'])).stdout).toBe('[]\n');
    for (const out of [listed.stdout, words.stdout]) expect(out).not.toContain(code);

    // The code itself, as typed or pasted: refused before the config or the log is touched.
    const logBefore = readFileSync(join(dir, 'broker.log'), 'utf8');
    for (const typed of [code, code.replaceAll('-', '').toLowerCase()]) {
      const refused = await botlinkInProcess(['broker', 'cancel', '--config', config, typed]);
      expect([refused.code, refused.stdout]).toEqual([Exit.USAGE, '']);
      expect(refused.stderr).toContain('not a code id');
      expect(refused.stderr).not.toContain(typed);
    }
    expect(readFileSync(join(dir, 'broker.log'), 'utf8')).toBe(logBefore);
    expect(JSON.parse((await botlinkInProcess(['broker', 'codes', '--config', config, '--json'])).stdout)).toContainEqual(
      expect.objectContaining({ id }),
    );

    const cancelled = await botlinkInProcess(['broker', 'cancel', '--config', config, id]);
    expect(cancelled).toEqual({
      code: Exit.OK,
      stdout: `cancelled plain code ${id} for vendor V1, for device SN-C1: 1 use(s) were left\n`,
      stderr: '',
    });
    expect(JSON.parse((await botlinkInProcess(['broker', 'codes', '--config', config, '--json'])).stdout)).not.toContainEqual(
      expect.objectContaining({ id }),
    );
    expect(
      auditLines()
        .filter((a) => a['codeId'] === id)
        .map((a) => [a['audit'], a['outcome']]),
    ).toEqual([
      ['code', 'made plain uses=1 device'],
      ['code', 'cancelled'],
    ]);
    const again = await botlinkInProcess(['broker', 'cancel', '--config', config, id]);
    expect([again.code, again.stdout]).toEqual([Exit.DATAERR, '']);
    expect(again.stderr).toContain(`no code has the id ${id}`);
    expect((await botlinkInProcess(['broker', 'cancel', '--config', config, 'not-an-id'])).code).toBe(Exit.DATAERR);
  });

  it('preauth --remove drops one device’s pre-authorisation, audited; none is 65; reset-limits of an unknown botId is 65', async () => {
    const file = join(dir, 'preauth.csv');
    const key = new TestDevice();
    writeFileSync(file, `SN-R1,${key.publicKey}\n`);
    expect((await botlinkInProcess(['broker', 'preauth', '--config', config, '--vendor-id', 'V1', file])).code).toBe(Exit.OK);
    const preauthorized = await botlinkInProcess(['broker', 'devices', '--config', config, '--state', 'preauthorized', '--json']);
    expect(JSON.parse(preauthorized.stdout)).toEqual([
      { botId: null, deviceId: 'SN-R1', vendorId: 'V1', keyId: key.keyId, state: 'preauthorized', lastSeenAt: null, agentVersion: null },
    ]);
    const removed = await botlinkInProcess(['broker', 'preauth', '--config', config, '--remove', '--vendor-id', 'V1', 'SN-R1']);
    expect(removed).toEqual({
      code: Exit.OK,
      stdout: `removed the pre-authorisation of device SN-R1 for vendor V1 (key ${key.keyId})\n`,
      stderr: '',
    });
    expect((await botlinkInProcess(['broker', 'devices', '--config', config, '--json'])).stdout).toBe('[]\n');
    const none = await botlinkInProcess(['broker', 'preauth', '--config', config, '--remove', '--vendor-id', 'V1', 'SN-R1']);
    expect([none.code, none.stdout]).toEqual([Exit.DATAERR, '']);
    expect(none.stderr).toContain('no pre-authorisation of device SN-R1 for vendor V1');
    expect(
      auditLines()
        .filter((a) => a['audit'] === 'preauth')
        .map((a) => [a['deviceId'], a['keyId'], a['outcome']]),
    ).toEqual([
      ['SN-R1', key.keyId, 'added'],
      ['SN-R1', key.keyId, 'removed'],
    ]);
    const unknown = await botlinkInProcess(['broker', 'reset-limits', '--config', config, 'bot-nobody']);
    expect([unknown.code, unknown.stdout]).toEqual([Exit.DATAERR, '']);
    expect(unknown.stderr).toContain('no device with botId bot-nobody');
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
