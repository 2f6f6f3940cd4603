import { ConfigError, DEFAULT_CONFIG_FILE, type AgentConfig } from '../../agent/config/config.js';
import { runningDaemon } from '../../agent/store/instance.js';
import { provision as register, resolveIdentity, type ProvisionRequest } from '../../agent/daemon/provisioning.js';
import { openRuntime, type AgentRuntime } from '../../agent/daemon/runtime.js';
import { systemClock, systemRandom } from '../../clock.js';
import { readStatusFile } from '../../agent/daemon/status.js';
import { describeError, fixOf, messageOf } from '../../protocol/errors.js';
import { DEVICE_TYPES, type DeviceType } from '../../protocol/wire.js';
import { defineCommand } from '../frame/command.js';
import { UsageError } from '../frame/exit.js';
import type { Env } from '../frame/io.js';
import { printable } from '../printable.js';
import { agentConfig } from './agent-config.js';
import { explained, openCommandLog, withDeadline } from './agent-command.js';
import { provisionWithBroker } from './provision-broker.js';

const DEFAULT_TYPE: DeviceType = 'PHYSICAL_ROBOT';

const USAGE = `usage: botlink provision --vendor-id ID --device-id SN [--app-id ID] [--type T] [--name N] [--force] [--config FILE]
       botlink provision --broker URL --code CODE --device-id SN [--app-id ID] [--type T] [--name N] [--config FILE]
       botlink provision --broker URL --vendor-id V --device-id SN [--no-wait] [--app-id ID] [--type T] [--name N] [--config FILE]

Registers this device under a vendor and stores its botId; the last line is "botId: <id>".
Idempotent: a device already provisioned is not registered again unless --force is given.
With --broker (broker mode): makes this device's own key, enrolls it with the vendor's broker using
the code the vendor gave, and writes brokerUrl and botId to the config — no account secret on the
device. A signing device keeps its botId (the vendor gives it an --adopt code); a revoked or rejected
key is kept aside as <file>.revoked-<keyId> and a new one enrolled. With --vendor-id and no code: a
key the vendor pre-authorised enrolls at once; otherwise it prints the keyId and waits until the
vendor accepts it (exit 0) or rejects it (65); --no-wait exits 75 while it is pending.

  --vendor-id ID   vendor to register under (required without --broker; with it, instead of --code)
  --device-id SN   this device's serial (required)
  --app-id ID      application id (default: empty)
  --type T         ${DEVICE_TYPES.join(' or ')} (default: ${DEFAULT_TYPE})
  --name N         display name (default: the device id)
  --force          register again even when a botId is stored
  --broker URL     the vendor's broker (https, or http on loopback)
  --code CODE      the enrollment code from \`botlink broker code\`
  --no-wait        with --broker and no code: exit 75 while the key is pending
  --config FILE    agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})`;

/** Vendor token plus one registration; generous, but a field command must end. */
const DEADLINE_MS = 60_000;

/** `botlink provision`: each step on its own line, then the botId; failures name the cause and the fix. */
export const provision = defineCommand({
  usage: USAGE,
  flags: {
    'vendor-id': { type: 'string' },
    'device-id': { type: 'string', required: true },
    'app-id': { type: 'string' },
    type: { type: 'string', choices: DEVICE_TYPES },
    name: { type: 'string' },
    force: { type: 'boolean' },
    config: { type: 'string' },
    broker: { type: 'string' },
    code: { type: 'string' },
    'no-wait': { type: 'boolean' },
  },
  // Signing mode names the vendor; in broker mode the code names it, or the vendor does (no code); --force
  // (register again) means nothing to the broker, and only a code-less enrollment waits.
  oneOf: [['--vendor-id', '--code']],
  exclusive: [
    ['--broker', '--force'],
    ['--code', '--no-wait'],
  ],
  needs: [
    ['--code', '--broker'],
    ['--no-wait', '--broker'],
  ],
  async run({ flags, stdout, stderr, env }) {
    // One line on stdout, printable: the cloud's and the broker's answers (a botId, a detail) are in it.
    const say = (line: string): void => void stdout.write(`${printable(line)}\n`);
    const deviceId = checkedId('device-id', flags['device-id']);
    if (flags.broker !== undefined) {
      const done = await provisionWithBroker(
        {
          brokerUrl: flags.broker,
          admission:
            flags.code !== undefined
              ? { code: flags.code }
              : { vendorId: checkedId('vendor-id', flags['vendor-id']), wait: flags['no-wait'] !== true },
          deviceId,
          appId: flags['app-id'],
          type: flags.type,
          name: flags.name,
          configFlag: flags.config,
          env,
        },
        say,
      );
      for (const note of done.notes) say(`note: ${note}`);
      say(`botId: ${done.botId}`);
      return;
    }
    const vendorId = checkedId('vendor-id', flags['vendor-id']);
    const { config, injected } = configFor(flags.config, vendorId, env);

    const logging = openCommandLog(config, 'provision', stderr);
    let rt: AgentRuntime | undefined;
    try {
      rt = openRuntime(config, { log: logging.logger, clock: systemClock, random: systemRandom });
      const req: ProvisionRequest = {
        vendorId,
        deviceId,
        type: flags.type ?? DEFAULT_TYPE,
        force: flags.force ?? false,
        ...(flags['app-id'] !== undefined && { appId: flags['app-id'] }),
        ...(flags.name !== undefined && { name: flags.name }),
        onStep: (step, detail) => {
          say(`${STEP_LABELS[step]}: ${detail}`);
          logging.logger.info({ step }, detail);
        },
      };
      say(`provisioning deviceId ${deviceId} under vendorId ${vendorId} at ${config.baseUrl}`);
      const { botId, already } = await withDeadline(rt, DEADLINE_MS, 'botId', (r, signal) => register(r, { ...req, signal }));
      if (already) say(`already provisioned: deviceId ${deviceId} under vendorId ${vendorId} (--force registers again)`);
      for (const note of await notesAfter(rt, botId, vendorId, deviceId, injected)) say(`note: ${note}`);
      say(`botId: ${botId}`);
    } catch (err) {
      logging.logger.error({ vendorId, deviceId, fix: fixOf(err) }, `provisioning failed: ${messageOf(err)}`);
      throw explained(err, config, { kind: 'vendor', id: vendorId });
    } finally {
      await rt?.close();
      await logging.flush();
      logging.close();
    }
  },
});

const STEP_LABELS: Record<Parameters<NonNullable<ProvisionRequest['onStep']>>[0], string> = {
  'vendor-token': 'vendor token',
  register: 'register',
  stored: 'stored',
};

/** The same rule the config applies to ids, checked here so the message names the flag. */
function checkedId(flag: string, value: string): string {
  if (value.length > 256 || !/^[^\s\p{Cc}]+$/u.test(value)) {
    throw new UsageError(`--${flag} must be 1 to 256 characters without spaces or control characters`);
  }
  return value;
}

/**
 * The agent config; one naming neither botId nor vendorId is normal before provisioning, so the
 * vendor from the flag stands in (reported as `injected`) instead of the config being refused.
 */
function configFor(file: string | undefined, vendorId: string, env: Env): { config: AgentConfig; injected: boolean } {
  try {
    return { config: agentConfig(file, env), injected: false };
  } catch (err) {
    if (!(err instanceof ConfigError && err.key === 'botId' && env.BOTLINK_VENDOR_ID === undefined)) throw err;
  }
  return { config: agentConfig(file, { ...env, BOTLINK_VENDOR_ID: vendorId }), injected: true };
}

/** What the technician must still do for `botlink run` to use this botId. */
async function notesAfter(rt: AgentRuntime, botId: string, vendorId: string, deviceId: string, injected: boolean): Promise<string[]> {
  const notes: string[] = [];
  const where = rt.config.source.file ?? 'the config';
  const hint = `set "vendorId": "${vendorId}" and "deviceId": "${deviceId}" (and no "botId") in ${where} so botlink run uses it`;
  if (injected) {
    notes.push(`the config names no botId or vendorId: ${hint}`);
  } else {
    let uses: string | undefined;
    try {
      const daemonWould = resolveIdentity(rt);
      if (daemonWould.kind === 'vendor') uses = `a registration of its own deviceId ${daemonWould.deviceId}`;
      else if (daemonWould.id !== botId) uses = `botId ${daemonWould.id}`;
    } catch (err) {
      uses = `no identity (${describeError(err)})`;
    }
    if (uses !== undefined) notes.push(`with this config the daemon uses ${uses}, not ${botId}: ${hint}`);
  }
  const daemon = await runningDaemon(rt.store);
  if (daemon) {
    const doc = readStatusFile(rt.config.runtimeDir);
    const runsAs = doc?.pid === daemon.pid ? doc.identity : undefined;
    if (runsAs?.kind !== 'bot' || runsAs.id !== botId) {
      const as = runsAs ? ` as ${runsAs.kind} ${runsAs.id}` : '';
      notes.push(`the daemon (pid ${daemon.pid}) runs${as}: restart it (systemctl restart botlink) to use botId ${botId}`);
    }
  }
  return notes;
}
