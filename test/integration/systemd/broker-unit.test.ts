import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { DEFAULT_CONFIG_FILE, DEFAULT_STORE, loadBrokerConfig } from '../../../src/broker/config.js';
import { Exit } from '../../../src/cli/frame/exit.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { parseExecStart } from '../../../scripts/lib/exec-start.js';
import { useHarness } from '../../helpers/harness.js';
import { listening, startListener } from '../../helpers/serve-proc.js';
import { exposureOf, parseUnit, required, seconds, verifyUnit } from '../../helpers/unit-file.js';

// systemd/botlink-broker.service: the vendor's broker (DESIGN §3.7) as the package ships it, disabled.
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const UNIT_FILE = join(ROOT, 'systemd', 'botlink-broker.service');
const EXAMPLE = join(ROOT, 'systemd', 'broker-config.example.json');
const TEXT = readFileSync(UNIT_FILE, 'utf8');
const unit = parseUnit(TEXT);
const service = (key: string): string => required(unit, 'Service', key);
const CREDENTIALS = '/run/credentials/botlink-broker.service';

const { cleanups, service: cloudService, tempDir } = useHarness();

describe('systemd/botlink-broker.service', () => {
  it('runs the bundle on node with its config as a credential, and hands it the secret and the token key only as credentials', () => {
    expect(service('Type')).toBe('exec');
    expect(service('ExecStart')).toBe(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${} specifier, not a template.
      '/usr/bin/node --max-semi-space-size=8 /opt/botlink/dist/botlink.mjs broker --config ${CREDENTIALS_DIRECTORY}/config.json',
    );
    const configDir = dirname(DEFAULT_CONFIG_FILE);
    expect(unit.get('Service')!.get('LoadCredential')).toEqual([
      `config.json:${DEFAULT_CONFIG_FILE}`,
      `secret-key:${configDir}/secret-key`,
      `token-key:${configDir}/token-key`,
    ]);
  });

  it('is hardened: a dynamic user, private state and log folders, no capabilities, a read-only system', () => {
    expect(service('DynamicUser')).toBe('yes');
    expect(service('User')).toBe('botlink-broker');
    expect(`sqlite:/var/lib/${service('StateDirectory')}/broker.db`).toBe(DEFAULT_STORE);
    expect(service('StateDirectoryMode')).toBe('0700');
    expect(service('LogsDirectoryMode')).toBe('0700');
    expect(service('UMask')).toBe('0077');
    expect(service('CapabilityBoundingSet')).toBe('');
    expect(service('NoNewPrivileges')).toBe('yes');
    expect(service('ProtectSystem')).toBe('strict');
    expect(service('PrivateDevices')).toBe('yes');
    expect(service('RestrictAddressFamilies').split(/\s+/).sort()).toEqual(['AF_INET', 'AF_INET6', 'AF_UNIX']);
    // V8's JIT needs writable and executable memory.
    expect(unit.get('Service')!.get('MemoryDenyWriteExecute') ?? ['no']).toEqual(['no']);
  });

  it('restarts after any exit except a usage error, never reaching its start limit, and can be enabled by the operator', () => {
    expect(service('Restart')).toBe('always');
    expect(service('RestartPreventExitStatus').split(/\s+/).map(Number)).toEqual([Exit.USAGE]);
    const burst = Number(required(unit, 'Unit', 'StartLimitBurst'));
    expect(Math.floor(seconds(required(unit, 'Unit', 'StartLimitIntervalSec')) / seconds(service('RestartSec'))) + 1).toBeLessThanOrEqual(
      burst,
    );
    expect(required(unit, 'Unit', 'After').split(/\s+/)).toEqual(expect.arrayContaining(['network-online.target', 'time-sync.target']));
    // `systemctl enable botlink-broker` needs an [Install] section; the package never runs it (scripts/package/build.sh).
    expect(required(unit, 'Install', 'WantedBy')).toBe('multi-user.target');
  });

  it('passes systemd-analyze verify with no message, and its exposure is 1.5 or lower', () => {
    expect(verifyUnit('botlink-broker.service', TEXT)).toEqual({ status: 0, output: '' });
    const { status, exposure, output } = exposureOf('botlink-broker.service', TEXT);
    expect(exposure, output).toBeDefined();
    expect(exposure!, output).toBeLessThanOrEqual(1.5);
    expect(status, output).toBe(0);
    // The check can fail: a misspelt directive is reported.
    expect(verifyUnit('botlink-broker.service', TEXT.replace('ProtectClock=yes', 'ProtectClok=yes')).output).toMatch(
      /Unknown key 'ProtectClok'/,
    );
  });

  it("its example config, as the unit's credential, uses the unit's folders and finds both keys among the credentials", () => {
    const config = loadBrokerConfig(EXAMPLE, { CREDENTIALS_DIRECTORY: CREDENTIALS });
    expect(config.secretKeyFile).toBe(`${CREDENTIALS}/secret-key`);
    expect(config.tokenKeyFile).toBe(`${CREDENTIALS}/token-key`);
    expect(config.store).toBe(DEFAULT_STORE);
    expect(dirname(config.logFile)).toBe(`/var/log/${service('LogsDirectory')}`);
    // Plain http only on loopback: the example starts behind a TLS proxy, or with tlsCertFile/tlsKeyFile.
    expect(config.listen.host).toBe('127.0.0.1');
    expect(config.tls).toBeNull();
  });

  it('ExecStart, run as systemd runs it with the credentials, serves, and stops cleanly on SIGTERM', async () => {
    const cloud = await cloudService();
    const dir = tempDir('botlink-broker-unit-');
    // What LoadCredential= makes: private copies in $CREDENTIALS_DIRECTORY.
    const credentials = join(dir, 'credentials');
    mkdirSync(credentials, { mode: 0o700 });
    writeFileSync(join(credentials, 'config.json'), readFileSync(EXAMPLE), { mode: 0o400 });
    writeFileSync(join(credentials, 'secret-key'), 'SK-broker-unit\n', { mode: 0o400 });
    writeFileSync(join(credentials, 'token-key'), Buffer.alloc(32, 7), { mode: 0o400 });
    const { program, nodeFlags, script, args } = parseExecStart(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${} specifier, not a template.
      service('ExecStart').replaceAll('${CREDENTIALS_DIRECTORY}', credentials),
    );
    expect([program, script, nodeFlags]).toEqual(['/usr/bin/node', '/opt/botlink/dist/botlink.mjs', ['--max-semi-space-size=8']]);
    // The example's settings, pointed at this test's cloud, a free port and its own folders.
    const env = cleanEnv({
      CREDENTIALS_DIRECTORY: credentials,
      BOTLINK_BROKER_LISTEN: '127.0.0.1:0',
      BOTLINK_BROKER_BASE_URL: cloud.url,
      BOTLINK_BROKER_STORE: `sqlite:${join(dir, 'state', 'broker.db')}`,
      BOTLINK_BROKER_LOG_FILE: join(dir, 'log', 'broker.log'),
    });
    for (const sub of ['state', 'log']) mkdirSync(join(dir, sub));
    const run = startListener(BUNDLE, args, env as Record<string, string>);
    cleanups.push(() => run.child.kill('SIGKILL'));
    const url = await listening(run);
    const health = await fetch(`${url}/v1/health`);
    expect(health.status, run.stderr()).toBe(200);
    run.child.kill('SIGTERM');
    const started = performance.now();
    expect((await run.exit).code, run.stderr()).toBe(0);
    expect((performance.now() - started) / 1000).toBeLessThan(seconds(service('TimeoutStopSec')));
  });
});
