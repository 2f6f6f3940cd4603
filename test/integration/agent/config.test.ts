import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CONFIG_KEYS,
  ConfigError,
  DEFAULT_CONFIG_FILE,
  DEFAULTS,
  type AgentConfig,
  describeSource,
  envVarFor,
  loadConfig,
  loadConfigValues,
  type BrokerConfig,
  type SignConfig,
  TUNABLE_DEFAULTS,
} from '../../../src/agent/config/config.js';
import { settingsFrom, type AgentSettings } from '../../../src/agent/config/settings.js';
import { readSecretFile, Secret, SecretFileError } from '../../../src/agent/config/secret.js';
import { createDeviceKey, DeviceKeyError } from '../../../src/agent/config/device-key.js';
import { DEFAULT_TIMEOUT_MS } from '../../../src/cloud/client.js';
import { describeError } from '../../../src/protocol/errors.js';
import { LINK_DEFAULTS } from '../../../src/agent/link/options.js';
import { TOKEN_BACKOFF } from '../../../src/agent/token/backoff.js';
import { DEFAULT_POLICY } from '../../../src/agent/token/policy.js';

const SECRET = 'S3cr3t-value-7f9c';
let dir: string;
let secretPath: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-config-'));
  secretPath = join(dir, 'secret-key');
  writeFileSync(secretPath, `${SECRET}\n`, { mode: 0o600 });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const base = () => ({ baseUrl: 'https://api.example.com', accessKeyId: 'AK', secretKeyFile: secretPath, botId: 'bot-1' });

function writeConfig(body: unknown): string {
  const file = join(dir, 'config.json');
  writeFileSync(file, typeof body === 'string' ? body : JSON.stringify(body));
  return file;
}

function load(body: unknown, env: NodeJS.ProcessEnv = {}) {
  return loadConfig({ file: writeConfig(body), env });
}

/** A config loaded in signing mode, the only one with a SecretKey. */
function signing(c: AgentConfig): SignConfig {
  expect(c.mode).toBe('sign');
  return c as SignConfig;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const e = err as ConfigError;
    expect(e.code).toBe('ERR_CONFIG');
    expect(e.retry).toBe('needs-config');
    return e;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig: values and defaults', () => {
  it('fills every default and derives wsUrl from baseUrl', () => {
    const c = load(base());
    expect(c.baseUrl).toBe('https://api.example.com');
    expect(c.wsUrl).toBe('wss://api.example.com/soulmate/voiceChat/v1');
    expect(signing(c).secretKey.reveal()).toBe(SECRET);
    expect([c.botId, c.vendorId, c.deviceId]).toEqual(['bot-1', undefined, undefined]);
    for (const [key, value] of Object.entries(DEFAULTS)) expect(c[key as keyof typeof DEFAULTS]).toBe(value);
    expect(c.source).toEqual({ file: join(dir, 'config.json'), env: [], defaultFile: DEFAULT_CONFIG_FILE });
  });

  it('takes each tunable default from the module it tunes, so the two cannot drift apart', () => {
    expect(TUNABLE_DEFAULTS).toEqual({
      httpTimeoutMs: DEFAULT_TIMEOUT_MS,
      refreshMarginS: DEFAULT_POLICY.refreshMarginMs / 1000,
      resignMarginS: DEFAULT_POLICY.resignMarginMs / 1000,
      tokenBackoffBaseMs: TOKEN_BACKOFF.baseMs,
      tokenBackoffCapMs: TOKEN_BACKOFF.capMs,
      linkMarginS: LINK_DEFAULTS.tokenMarginMs / 1000,
      linkBackoffBaseMs: LINK_DEFAULTS.backoff.baseMs,
      linkBackoffCapMs: LINK_DEFAULTS.backoff.capMs,
      heartbeatIntervalMs: LINK_DEFAULTS.heartbeatIntervalMs,
      heartbeatTimeoutMs: LINK_DEFAULTS.heartbeatTimeoutMs,
      connectTimeoutMs: LINK_DEFAULTS.connectTimeoutMs,
      localConnectionsMax: 64,
    });
  });

  it.each([
    ['http://127.0.0.1:8080/', 'http://127.0.0.1:8080', 'ws://127.0.0.1:8080/soulmate/voiceChat/v1'],
    ['https://api.example.com/prefix/', 'https://api.example.com/prefix', 'wss://api.example.com/prefix/soulmate/voiceChat/v1'],
    ['http://localhost:1', 'http://localhost:1', 'ws://localhost:1/soulmate/voiceChat/v1'],
  ])('derives wsUrl from %s', (baseUrl, normalised, wsUrl) => {
    const c = load({ ...base(), baseUrl });
    expect([c.baseUrl, c.wsUrl]).toEqual([normalised, wsUrl]);
  });

  it.each([
    ['http://127.0.0.1:9', true],
    ['http://127.200.3.4', true],
    ['http://localhost', true],
    ['http://[::1]:8080', true],
    ['https://example.com', true],
    ['http://example.com', false],
    ['http://10.0.0.1', false],
    ['http://128.0.0.1', false],
  ])('baseUrl %s accepted: %s (https unless loopback)', (baseUrl, ok) => {
    if (ok) expect(load({ ...base(), baseUrl }).baseUrl).toBe(new URL(baseUrl).origin);
    else expect(configError(() => load({ ...base(), baseUrl })).message).toMatch(/baseUrl.*https:\/\//);
  });

  it('accepts an explicit wsUrl; ws:// only on loopback', () => {
    expect(load({ ...base(), wsUrl: 'wss://ws.example.com/v1' }).wsUrl).toBe('wss://ws.example.com/v1');
    expect(load({ ...base(), wsUrl: 'ws://[::1]:1/x' }).wsUrl).toBe('ws://[::1]:1/x');
    expect(configError(() => load({ ...base(), wsUrl: 'ws://example.com/x' })).key).toBe('wsUrl');
  });

  it('resolves relative paths against the config file folder', () => {
    writeFileSync(join(dir, 'sk'), SECRET, { mode: 0o600 });
    const c = load({ ...base(), secretKeyFile: 'sk', stateDir: 'state', logFile: '-' });
    expect([c.secretKeyFile, c.stateDir, c.logFile]).toEqual([join(dir, 'sk'), join(dir, 'state'), '-']);
  });

  it('accepts vendorId alone (the to-be-provisioned state) and keeps both when given', () => {
    const { botId: _, ...noBot } = base();
    expect(load({ ...noBot, vendorId: 'V1', deviceId: 'SN-1' })).toMatchObject({ botId: undefined, vendorId: 'V1', deviceId: 'SN-1' });
    expect(load({ ...base(), vendorId: 'V1' })).toMatchObject({ botId: 'bot-1', vendorId: 'V1' });
  });
});

describe('loadConfig: bad values name the key', () => {
  const table: [string, unknown][] = [
    ['baseUrl', 'not a url'],
    ['baseUrl', 'ftp://example.com'],
    ['baseUrl', 'https://u:p@example.com'],
    ['baseUrl', 'https://example.com/?botId=1'],
    ['baseUrl', 42],
    ['baseUrl', ''],
    ['wsUrl', 'https://example.com'],
    ['wsUrl', 'wss://example.com/#x'],
    ['wsUrl', null],
    ['accessKeyId', ''],
    ['accessKeyId', 'A K'],
    ['accessKeyId', 5],
    ['secretKeyFile', ''],
    ['secretKeyFile', 'a\0b'],
    ['secretKeyFile', ['x']],
    ['botId', 'x'.repeat(257)],
    ['botId', 'a\tb'],
    ['vendorId', 'v\n1'],
    ['deviceId', {}],
    ['stateDir', 7],
    ['runtimeDir', false],
    ['logFile', ''],
    ['logLevel', 'verbose'],
    ['logLevel', 'INFO'],
    ['httpParserTier', 'turbofan'],
    ['httpParserTier', ''],
    ...Object.keys(TUNABLE_DEFAULTS).flatMap((k): [string, unknown][] => [
      [k, 0],
      [k, -5],
      [k, '100'],
      [k, 1e13],
      [k, null],
    ]),
  ];
  it.each(table)('%s = %j', (key, value) => {
    const e = configError(() => load({ ...base(), [key]: value }));
    expect(e.key).toBe(key);
    expect(e.message).toContain(`"${key}" in ${join(dir, 'config.json')}`);
    expect(e.fix).toMatch(/^fix it in /);
  });

  it.each([
    ['linkBackoffBaseMs', { linkBackoffBaseMs: 70_000 }],
    ['tokenBackoffCapMs', { tokenBackoffCapMs: 500 }],
    ['heartbeatTimeoutMs', { heartbeatTimeoutMs: 30_000 }],
  ])('range between keys: %s', (key, extra) => {
    const e = configError(() => load({ ...base(), ...extra }));
    expect(e.key).toBe(key);
    expect(e.message).toMatch(/no larger than/);
  });

  it.each([
    ['baseUrl', /baseUrl is required.*BOTLINK_BASE_URL/],
    ['accessKeyId', /accessKeyId is required.*BOTLINK_ACCESS_KEY_ID/],
    ['secretKeyFile', /secretKeyFile is required.*LoadCredential=secret-key/],
    ['botId', /botId or vendorId is required/],
  ])('missing %s', (key, message) => {
    const body: Record<string, unknown> = base();
    delete body[key];
    const e = configError(() => load(body));
    expect(e.key).toBe(key);
    expect(describeError(e)).toMatch(message);
  });

  it('names an unknown key and suggests the closest known one', () => {
    const e = configError(() => load({ ...base(), baseURL: 'x' }));
    expect(e.key).toBe('baseURL');
    expect(e.message).toContain('is not a botlink setting');
    expect(e.fix).toBe('did you mean "baseUrl"?');
    const far = configError(() => load({ ...base(), colour: 'blue' }));
    expect(far.key).toBe('colour');
    expect(far.fix).toContain('known setting: baseUrl, wsUrl');
  });
});

describe('loadConfig: environment', () => {
  it('maps every key to BOTLINK_<UPPER_SNAKE>', () => {
    expect(CONFIG_KEYS.map(envVarFor)).toContain('BOTLINK_SECRET_KEY_FILE');
    expect(envVarFor('heartbeatIntervalMs')).toBe('BOTLINK_HEARTBEAT_INTERVAL_MS');
    expect(envVarFor('accessKeyId')).toBe('BOTLINK_ACCESS_KEY_ID');
  });

  it('overrides file values, parses numbers and records the variables used', () => {
    const c = load(base(), {
      BOTLINK_BASE_URL: 'http://127.0.0.1:4000',
      BOTLINK_BOT_ID: 'bot-env',
      BOTLINK_HTTP_TIMEOUT_MS: '2500',
      BOTLINK_REFRESH_MARGIN_S: '0.5',
      BOTLINK_CONFIG: 'ignored because --config wins',
      PATH: '/usr/bin',
    });
    expect([c.baseUrl, c.botId, c.httpTimeoutMs, c.refreshMarginS]).toEqual(['http://127.0.0.1:4000', 'bot-env', 2500, 0.5]);
    expect(c.source.env).toEqual(['BOTLINK_BASE_URL', 'BOTLINK_BOT_ID', 'BOTLINK_HTTP_TIMEOUT_MS', 'BOTLINK_REFRESH_MARGIN_S']);
    expect(describeSource(c.source)).toBe(`${join(dir, 'config.json')}, overridden by ${c.source.env.join(', ')}`);
  });

  it.each(['10s', '1e3', '', '0', ' 5', '-1', '0x10', 'Infinity'])('numbers are parsed strictly: %j', (value) => {
    const e = configError(() => load(base(), { BOTLINK_CONNECT_TIMEOUT_MS: value }));
    expect(e.key).toBe('connectTimeoutMs');
    expect(e.message).toContain('BOTLINK_CONNECT_TIMEOUT_MS (connectTimeoutMs)');
    expect(e.fix).toBe('fix or unset BOTLINK_CONNECT_TIMEOUT_MS');
  });

  it('refuses an unknown BOTLINK_ variable with a suggestion', () => {
    const e = configError(() => load(base(), { BOTLINK_BASEURL: 'x' }));
    expect(e.key).toBe('BOTLINK_BASEURL');
    expect(e.fix).toBe('did you mean "BOTLINK_BASE_URL"?');
  });

  it('reads the file named by BOTLINK_CONFIG', () => {
    const file = writeConfig(base());
    expect(loadConfig({ env: { BOTLINK_CONFIG: file } }).source.file).toBe(file);
  });

  it('without any file, runs from the environment alone', () => {
    const absent = join(dir, 'etc-botlink-config.json');
    const c = loadConfig({
      defaultFile: absent,
      env: {
        BOTLINK_BASE_URL: 'https://a.example',
        BOTLINK_ACCESS_KEY_ID: 'AK',
        BOTLINK_SECRET_KEY_FILE: secretPath,
        BOTLINK_VENDOR_ID: 'V',
      },
    });
    expect(c.source.file).toBeNull();
    expect(describeSource(c.source)).toBe(
      `environment only (BOTLINK_ACCESS_KEY_ID, BOTLINK_BASE_URL, BOTLINK_SECRET_KEY_FILE, BOTLINK_VENDOR_ID); no file at ${absent}`,
    );
  });
});

describe('loadConfig: the config file', () => {
  it.each([
    ['--config', () => loadConfig({ file: join(dir, 'nope.json'), env: {} })],
    ['BOTLINK_CONFIG', () => loadConfig({ env: { BOTLINK_CONFIG: join(dir, 'nope.json') } })],
  ])('a missing file named by %s is an error', (by, fn) => {
    const e = configError(fn);
    expect(e.key).toBe('config');
    expect(e.message).toContain(`${join(dir, 'nope.json')} does not exist (named by ${by})`);
  });

  it.each([
    ['{"baseUrl": }', 'line 1, column 13 (position 12): unexpected character'],
    ['{\n  "botId": "b",\n}', 'line 3, column 1 (position 18): expected a property name in double quotes'],
    [`{"secretKey": "${SECRET}" "x": 1}`, "line 1, column 35 (position 34): expected ',' or '}'"],
    ['{"a": 1', 'line 1, column 8 (position 7): unexpected end'],
    // Where JSON.parse stops too ('}' is the unexpected token), not at the start of the literal.
    ['{"a": tru}', 'line 1, column 10 (position 9): unexpected character'],
    [`{"secretKey": "${SECRET}\\q"}`, 'line 1, column 34 (position 33): bad escape in a string'],
  ])('bad JSON %j names the file, the position and the problem, never quoting it', (body, where) => {
    const e = configError(() => load(body));
    expect(e.key).toBe('config');
    expect(e.message).toContain(`${join(dir, 'config.json')} is not valid JSON: syntax error at ${where}`);
    expect(e.message).not.toContain(SECRET);
    expect(e.cause).toBeUndefined();
  });

  it.each(['[]', 'null', '"x"', '3'])('must hold an object, not %s', (body) => {
    expect(configError(() => load(body)).message).toContain('must hold a JSON object');
  });

  it('accepts a byte order mark', () => {
    expect(load(`\uFEFF${JSON.stringify(base())}`).botId).toBe('bot-1');
  });
});

describe('loadConfig: the secret', () => {
  it('reads it from $CREDENTIALS_DIRECTORY/secret-key by default', () => {
    const { secretKeyFile: _, ...rest } = base();
    const c = load(rest, { CREDENTIALS_DIRECTORY: dir });
    expect(c.secretKeyFile).toBe(secretPath);
    expect(signing(c).secretKey.reveal()).toBe(SECRET);
    expect(c.source.env).toEqual(['CREDENTIALS_DIRECTORY']);
    expect(load({ ...base(), secretKeyFile: secretPath }, { CREDENTIALS_DIRECTORY: '/nowhere' }).secretKeyFile).toBe(secretPath);
  });

  it.each([0o600, 0o400])('accepts mode %o', (mode) => {
    chmodSync(secretPath, mode);
    expect(signing(load(base())).secretKey.reveal()).toBe(SECRET);
  });

  it.each([0o640, 0o604, 0o644, 0o660])('refuses mode %o with chmod 600', (mode) => {
    chmodSync(secretPath, mode);
    const e = configError(() => load(base()));
    expect(e.key).toBe('secretKeyFile');
    expect(e.fix).toBe(`run \`chmod 600 ${secretPath}\``);
    expect(e.cause).toBeInstanceOf(SecretFileError);
  });

  it('names the path and the fix when the file is missing, empty, or a folder', () => {
    const missing = join(dir, 'missing');
    expect(describeError(configError(() => load({ ...base(), secretKeyFile: missing })))).toMatch(
      new RegExp(`${missing} does not exist — fix: create it .*chmod 600 ${missing}`),
    );
    writeFileSync(secretPath, '\n\n', { mode: 0o600 });
    expect(configError(() => load(base())).message).toContain('is empty');
    mkdirSync(join(dir, 'folder'), { mode: 0o700 });
    expect(configError(() => load({ ...base(), secretKeyFile: join(dir, 'folder') })).message).toContain('not a regular file');
  });

  it('trims trailing newlines only', () => {
    writeFileSync(secretPath, ' a b\r\n\n', { mode: 0o600 });
    expect(readSecretFile(secretPath).reveal()).toBe(' a b');
  });

  it('is never accepted from the config file or the environment', () => {
    const inFile = configError(() => load({ ...base(), secretKey: SECRET }));
    expect(inFile.key).toBe('secretKey');
    expect(describeError(inFile)).toMatch(/never read from the config file.*secretKeyFile.*LoadCredential/);
    expect(inFile.message).not.toContain(SECRET);
    const inEnv = configError(() => load(base(), { BOTLINK_SECRET_KEY: SECRET }));
    expect(describeError(inEnv)).toMatch(/BOTLINK_SECRET_KEY: the secret is never read from the environment.*LoadCredential/);
    expect(inEnv.message).not.toContain(SECRET);
  });
});

describe('the loaded config', () => {
  it('is deeply frozen', () => {
    const c = load(base()) as unknown as Record<string, unknown> & { source: { env: string[] } };
    expect(() => {
      c.baseUrl = 'https://evil.example';
    }).toThrow(TypeError);
    expect(() => {
      c.secretKey = new Secret('x');
    }).toThrow(TypeError);
    expect(() => {
      c.source.env.push('X');
    }).toThrow(TypeError);
    expect(() => {
      delete c.botId;
    }).toThrow(TypeError);
    expect(Object.isFrozen(c.secretKey)).toBe(true);
  });

  it("httpParserTier: 'baseline' unless the config or BOTLINK_HTTP_PARSER_TIER turns the measure off", () => {
    expect(load(base()).httpParserTier).toBe('baseline');
    expect(load({ ...base(), httpParserTier: 'optimizing' }).httpParserTier).toBe('optimizing');
    expect(load(base(), { BOTLINK_HTTP_PARSER_TIER: 'optimizing' }).httpParserTier).toBe('optimizing');
  });

  it('never serialises the secret, whichever way it is printed', () => {
    const c = signing(load(base(), { BOTLINK_LOG_LEVEL: 'debug' }));
    const renderings = [
      JSON.stringify(c),
      JSON.stringify({ nested: { c } }),
      inspect(c, { depth: Infinity, showHidden: true }),
      inspect(c.secretKey, { showHidden: true }),
      String(c.secretKey),
      `${c.secretKey}`,
      JSON.stringify(c.secretKey),
      JSON.stringify(Object.entries(c)),
      Object.values(c).map(String).join(),
    ];
    for (const text of renderings) expect(text).not.toContain(SECRET);
    expect(JSON.parse(JSON.stringify(c))).not.toHaveProperty('secretKey');
    expect(JSON.parse(JSON.stringify(c))).toMatchObject({ botId: 'bot-1', logLevel: 'debug' });
    expect(inspect(c)).toContain('secretKey: [redacted]');
  });
});

describe('loadConfig: the local API keys (DESIGN §3.2, §3.5)', () => {
  it('puts the socket in runtimeDir and leaves the group to the daemon by default', () => {
    const c = load({ ...base(), runtimeDir: '/run/x' });
    expect([c.localSocket, c.localGroup]).toEqual(['/run/x/botlink.sock', null]);
    expect(load(base()).localSocket).toBe('/run/botlink/botlink.sock');
  });

  it('writes no metricsFile by default or with "", and resolves a relative one against the config file', () => {
    expect(load(base()).metricsFile).toBeNull();
    expect(load({ ...base(), metricsFile: '' }).metricsFile).toBeNull();
    expect(load({ ...base(), metricsFile: 'm/botlink.prom' }).metricsFile).toBe(join(dir, 'm', 'botlink.prom'));
  });

  it('turns the local API off with "" and resolves a relative socket against the config file', () => {
    expect(load({ ...base(), localSocket: '' }).localSocket).toBeNull();
    expect(load(base(), { BOTLINK_LOCAL_SOCKET: '' }).localSocket).toBeNull();
    expect(load({ ...base(), localSocket: 'api.sock' }).localSocket).toBe(join(dir, 'api.sock'));
  });

  it('takes a gid, or a group name from /etc/group, in the file and the environment', () => {
    expect(load({ ...base(), localGroup: 4243 }).localGroup).toBe(4243);
    expect(load(base(), { BOTLINK_LOCAL_GROUP: '4243' }).localGroup).toBe(4243);
    expect(load({ ...base(), localGroup: 'root' }).localGroup).toBe(0);
    expect(load(base(), { BOTLINK_LOCAL_GROUP: 'root' }).localGroup).toBe(0);
  });

  it.each([
    [{ localSocket: 7 }, 'localSocket', /"localSocket" in .* must be a path, or "" to turn the local API off/],
    [{ localSocket: `/${'s'.repeat(120)}` }, 'localSocket', /is over 107 bytes/],
    // 102 bytes itself, but bound first as .bl<pid> beside it: up to 109.
    [{ localSocket: `/${'d'.repeat(98)}/s` }, 'localSocket', /bound first as \/d+\/\.bl4194304, which is over 107 bytes/],
    // The default socket: runtimeDir is the key to blame.
    [{ runtimeDir: `/${'r'.repeat(96)}` }, 'runtimeDir', /"runtimeDir" in .* is too long for the local API socket in it/],
    [{ metricsFile: 'botlink.txt' }, 'metricsFile', /must end in \.prom \(node_exporter's textfile collector reads no other name\)/],
    [{ metricsFile: 7 }, 'metricsFile', /must be a path ending in \.prom, or "" for none/],
    [{ localGroup: -1 }, 'localGroup', /must be a group name or a gid/],
    [{ localGroup: 1.5 }, 'localGroup', /must be a group name or a gid/],
    [{ localGroup: 'bad group' }, 'localGroup', /must be a group name or a gid; got "bad group"/],
    [{ localGroup: 'no-such-group-x' }, 'localGroup', /names group "no-such-group-x", which is not in \/etc\/group/],
  ])('refuses %j naming the key', (extra, key, message) => {
    const e = configError(() => load({ ...base(), ...extra }));
    expect(e.key).toBe(key);
    expect(e.message).toMatch(message);
  });

  it('says how to fix a group that does not exist', () => {
    const e = configError(() => load(base(), { BOTLINK_LOCAL_GROUP: 'no-such-group-x' }));
    expect(e.message).toContain('BOTLINK_LOCAL_GROUP (localGroup)');
    expect(e.fix).toMatch(/addgroup --system no-such-group-x.*numeric gid/);
  });
});

describe('settingsFrom: what each part takes from the config, in ms', () => {
  it("with no tunable set, every part gets its own module's defaults back (the config's seconds round-trip)", () => {
    const s = settingsFrom(load(base()));
    expect(s.policy).toEqual(DEFAULT_POLICY);
    expect(s.tokenBackoff).toEqual(TOKEN_BACKOFF);
    expect(s.link).toEqual({
      tokenMarginMs: LINK_DEFAULTS.tokenMarginMs,
      backoff: LINK_DEFAULTS.backoff,
      heartbeatIntervalMs: LINK_DEFAULTS.heartbeatIntervalMs,
      heartbeatTimeoutMs: LINK_DEFAULTS.heartbeatTimeoutMs,
      connectTimeoutMs: LINK_DEFAULTS.connectTimeoutMs,
    });
    expect(s.cloud).toEqual({
      connectTimeoutMs: DEFAULT_TIMEOUT_MS,
      headersTimeoutMs: DEFAULT_TIMEOUT_MS,
      bodyTimeoutMs: DEFAULT_TIMEOUT_MS,
      parserTier: 'baseline',
    });
    expect(s.local).toEqual({ maxConnections: 64 });
  });

  it.each([
    ['refreshMarginS', 90, (s: AgentSettings) => s.policy.refreshMarginMs, 90_000],
    ['resignMarginS', 3600, (s: AgentSettings) => s.policy.resignMarginMs, 3_600_000],
    ['linkMarginS', 12, (s: AgentSettings) => s.link.tokenMarginMs, 12_000],
    ['tokenBackoffCapMs', 7000, (s: AgentSettings) => s.tokenBackoff.capMs, 7000],
    ['linkBackoffBaseMs', 250, (s: AgentSettings) => s.link.backoff?.baseMs, 250],
    ['httpTimeoutMs', 2500, (s: AgentSettings) => s.cloud.headersTimeoutMs, 2500],
    ['localConnectionsMax', 8.7, (s: AgentSettings) => s.local.maxConnections, 8],
  ] as const)('%s %s → %s', (key, value, read, want) => {
    expect(read(settingsFrom(load({ ...base(), [key]: value })))).toBe(want);
  });
});

describe('loadConfig: broker mode (DESIGN §3.2, §3.7)', () => {
  const brokerBase = () => ({ baseUrl: 'https://api.example.com', brokerUrl: 'https://broker.example.com', botId: 'bot-1', stateDir: dir });
  let keyId: string;
  beforeEach(() => {
    keyId = createDeviceKey(join(dir, 'device-key.pem')).keyId;
  });

  function broker(c: AgentConfig): BrokerConfig {
    expect(c.mode).toBe('broker');
    return c as BrokerConfig;
  }

  it('reads the device key from <stateDir>/device-key.pem and no secret; the WebSocket still derives from baseUrl', () => {
    const c = broker(load(brokerBase()));
    expect(c).toMatchObject({
      mode: 'broker',
      brokerUrl: 'https://broker.example.com',
      brokerCaFile: null,
      brokerCa: null,
      deviceKeyFile: join(dir, 'device-key.pem'),
      accessKeyId: '',
      secretKeyFile: '',
      wsUrl: 'wss://api.example.com/soulmate/voiceChat/v1',
    });
    expect(c.deviceKey.keyId).toBe(keyId);
    expect(c).not.toHaveProperty('secretKey');
  });

  it('takes the key from $CREDENTIALS_DIRECTORY/device-key when set, and an explicit deviceKeyFile over both', () => {
    const creds = join(dir, 'creds');
    const credKey = createDeviceKey(join(creds, 'device-key'));
    const c = broker(load(brokerBase(), { CREDENTIALS_DIRECTORY: creds }));
    expect([c.deviceKeyFile, c.deviceKey.keyId, c.source.env]).toEqual([
      join(creds, 'device-key'),
      credKey.keyId,
      ['CREDENTIALS_DIRECTORY'],
    ]);
    const named = broker(load({ ...brokerBase(), deviceKeyFile: 'device-key.pem' }, { CREDENTIALS_DIRECTORY: creds }));
    expect([named.deviceKeyFile, named.deviceKey.keyId]).toEqual([join(dir, 'device-key.pem'), keyId]);
  });

  it('takes every broker key from the environment', () => {
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const { brokerUrl: _, ...rest } = brokerBase();
    const c = broker(
      load(rest, {
        BOTLINK_BROKER_URL: 'https://b2.example.com/prefix/',
        BOTLINK_BROKER_CA_FILE: ca,
        BOTLINK_DEVICE_KEY_FILE: join(dir, 'device-key.pem'),
      }),
    );
    expect([c.brokerUrl, c.brokerCaFile, c.deviceKeyFile]).toEqual(['https://b2.example.com/prefix', ca, join(dir, 'device-key.pem')]);
    expect(c.brokerCa).toContain('BEGIN CERTIFICATE');
    expect(c.source.env).toEqual(['BOTLINK_BROKER_CA_FILE', 'BOTLINK_BROKER_URL', 'BOTLINK_DEVICE_KEY_FILE']);
  });

  it.each([
    ['http://127.0.0.1:7000', true],
    ['http://[::1]:7000', true],
    ['https://broker.example.com', true],
    ['http://broker.example.com', false],
    ['http://10.0.0.2:7000', false],
    ['ftp://broker.example.com', false],
    ['https://u:p@broker.example.com', false],
  ])('brokerUrl %s accepted: %s (https unless loopback, as baseUrl)', (brokerUrl, ok) => {
    if (ok) expect(broker(load({ ...brokerBase(), brokerUrl })).brokerUrl).toBe(new URL(brokerUrl).origin);
    else expect(configError(() => load({ ...brokerBase(), brokerUrl })).key).toBe('brokerUrl');
  });

  it.each([
    ['accessKeyId in the file', { accessKeyId: 'AK' }, {}, 'accessKeyId', /^"accessKeyId" in .* conflicts with brokerUrl/],
    ['secretKeyFile in the file', { secretKeyFile: 'secret-key' }, {}, 'secretKeyFile', /^"secretKeyFile" in .* conflicts with brokerUrl/],
    [
      'accessKeyId from the environment',
      {},
      { BOTLINK_ACCESS_KEY_ID: 'AK' },
      'accessKeyId',
      /^BOTLINK_ACCESS_KEY_ID \(accessKeyId\) conflicts/,
    ],
    [
      'secretKeyFile from the environment',
      {},
      { BOTLINK_SECRET_KEY_FILE: '/etc/botlink/secret-key' },
      'secretKeyFile',
      /^BOTLINK_SECRET_KEY_FILE .* conflicts/,
    ],
  ])('refuses %s: the error names brokerUrl and the key in conflict (exit 78)', (_, extra, env, key, message) => {
    const e = configError(() => load({ ...brokerBase(), ...extra }, env));
    expect(e.key).toBe(key);
    expect(e.message).toMatch(message);
    expect(e.message).toContain('brokerUrl');
    expect(e.fix).toMatch(new RegExp(`^remove ${key} .*delete the secret file.*or remove brokerUrl`));
  });

  it('leaves a secret-key in $CREDENTIALS_DIRECTORY alone: only keys the configuration names conflict', () => {
    expect(broker(load(brokerBase(), { CREDENTIALS_DIRECTORY: dir, BOTLINK_DEVICE_KEY_FILE: join(dir, 'device-key.pem') })).mode).toBe(
      'broker',
    );
  });

  it('needs botId, or vendorId for zero-touch enrollment', () => {
    const { botId: _, ...rest } = brokerBase();
    const e = configError(() => load(rest));
    expect(e.key).toBe('botId');
    expect(e.message).toBe('broker mode needs botId, or vendorId for zero-touch enrollment');
    expect(e.fix).toMatch(/^run `botlink provision --broker URL --code CODE --device-id SN`, which writes botId, or set "vendorId"/);
  });

  it('zero-touch: brokerUrl and vendorId with no botId is broker mode; baseUrl stays required', () => {
    const { botId: _, ...rest } = brokerBase();
    const c = broker(load({ ...rest, vendorId: 'V1' }));
    expect([c.botId, c.vendorId, c.deviceKey.keyId]).toEqual([undefined, 'V1', keyId]);
    const { baseUrl: __, ...noBase } = rest;
    expect(configError(() => load({ ...noBase, vendorId: 'V1' })).key).toBe('baseUrl');
  });

  it('makeDeviceKey makes a zero-touch device its key (0600) when there is none, and only a zero-touch one', () => {
    rmSync(join(dir, 'device-key.pem'));
    const { botId: _, ...rest } = brokerBase();
    const file = writeConfig({ ...rest, vendorId: 'V1' });
    expect(configError(() => loadConfig({ file, env: {} })).key).toBe('deviceKeyFile');
    const made = broker(loadConfig({ file, env: {}, makeDeviceKey: true }));
    expect(statSync(join(dir, 'device-key.pem')).mode & 0o777).toBe(0o600);
    // Made once: the next load finds the same key.
    expect(broker(loadConfig({ file, env: {}, makeDeviceKey: true })).deviceKey.keyId).toBe(made.deviceKey.keyId);
    // A device with a botId has an enrolled key somewhere: a new one would be unknown to the broker.
    rmSync(join(dir, 'device-key.pem'));
    const enrolled = writeConfig(brokerBase());
    expect(configError(() => loadConfig({ file: enrolled, env: {}, makeDeviceKey: true })).key).toBe('deviceKeyFile');
  });

  it('shownAs names the file in messages instead of the copy it was read from', () => {
    const file = writeConfig({ brokerUrl: 'https://broker.example.com', botId: 'bot-1' });
    let e = configError(() => loadConfigValues({ file, env: {}, shownAs: '/etc/botlink/config.json' }));
    expect([e.key, e.fix]).toEqual([
      'baseUrl',
      'set "baseUrl" in /etc/botlink/config.json or BOTLINK_BASE_URL (e.g. "https://api.example.com")',
    ]);
    writeConfig({ ...brokerBase(), frobnicate: 1 });
    e = configError(() => loadConfigValues({ file, env: {}, shownAs: '/etc/botlink/config.json' }));
    expect(e.message).toBe('"frobnicate" in /etc/botlink/config.json is not a botlink setting');
  });

  it.each(['brokerCaFile', 'deviceKeyFile'])('refuses %s without brokerUrl (signing mode has no use for it)', (key) => {
    const e = configError(() => load({ ...base(), [key]: 'x.pem' }));
    expect(e.key).toBe(key);
    expect(e.message).toMatch(/applies only in broker mode, and brokerUrl is not set$/);
  });

  it('refuses a device key it must not use, naming deviceKeyFile with the key file error as the cause', () => {
    chmodSync(join(dir, 'device-key.pem'), 0o644);
    const open = configError(() => load(brokerBase()));
    expect([open.key, open.cause]).toEqual(['deviceKeyFile', expect.any(DeviceKeyError)]);
    expect(open.fix).toMatch(/^run `chmod 600 .*revoke/);
    const missing = configError(() => load({ ...brokerBase(), deviceKeyFile: 'nope.pem' }));
    expect(missing.key).toBe('deviceKeyFile');
    expect(missing.message).toBe(`device key file ${join(dir, 'nope.pem')} does not exist`);
  });

  it('refuses a brokerCaFile that is missing or holds no certificate', () => {
    expect(configError(() => load({ ...brokerBase(), brokerCaFile: 'none.pem' })).message).toMatch(
      /^brokerCaFile .* cannot be read \(ENOENT\)$/,
    );
    writeFileSync(join(dir, 'ca.pem'), 'not a certificate');
    const e = configError(() => load({ ...brokerBase(), brokerCaFile: 'ca.pem' }));
    expect([e.key, e.message]).toEqual(['brokerCaFile', `brokerCaFile ${join(dir, 'ca.pem')} holds no PEM certificate`]);
  });

  it("passes over the broker's own variables, in either mode, but not a near miss of the agent's own", () => {
    const brokers = {
      BOTLINK_BROKER_CONFIG: '/etc/botlink-broker/config.json',
      BOTLINK_BROKER_STORE: 'postgres://db/broker',
      BOTLINK_BROKER_ACCESS_KEY_ID: 'AK',
      BOTLINK_BROKER_SECRET_KEY_FILE: '/run/credentials/botlink-broker/secret-key',
      BOTLINK_BROKER_LISTEN: '0.0.0.0:8443',
      BOTLINK_BROKER_LOG_FILE: '/var/log/botlink-broker.log',
    };
    expect(load(brokerBase(), brokers).source.env).toEqual([]);
    expect(load(base(), brokers).mode).toBe('sign');
    const typo = configError(() => load(brokerBase(), { BOTLINK_BROKER_URI: 'https://b.example.com' }));
    expect([typo.key, typo.fix]).toEqual(['BOTLINK_BROKER_URI', 'did you mean "BOTLINK_BROKER_URL"?']);
  });

  it('never serialises the key', () => {
    const c = broker(load(brokerBase()));
    const pemLine = readFileSync(join(dir, 'device-key.pem'), 'utf8').split('\n')[1]!;
    for (const text of [JSON.stringify(c), inspect(c, { depth: Infinity, showHidden: true }), String(c.deviceKey)]) {
      expect(text).not.toContain(pemLine);
    }
    expect(JSON.parse(JSON.stringify(c))).not.toHaveProperty('deviceKey');
    expect(inspect(c)).toContain(`deviceKey: DeviceKey(${keyId})`);
  });
});
