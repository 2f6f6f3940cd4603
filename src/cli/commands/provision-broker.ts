/**
 * `botlink provision --broker URL --code CODE --device-id SN` (DESIGN §3.1, §3.7): the device makes its
 * own key, enrolls it with the vendor's broker, and its config becomes a broker-mode one — no account
 * secret in it. A signing device keeps its botId (an --adopt code) and is told when its secret can go.
 */
import { chmodSync, closeSync, constants, fsyncSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { enrollDevice } from '../../agent/broker/enroll.js';
import type { EnrollRequest } from '../../agent/broker/answers.js';
import { ConfigError, DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { ensureDeviceKey } from '../../agent/config/device-key.js';
import { readConfigFile } from '../../agent/config/file.js';
import { systemClock } from '../../clock.js';
import type { DeviceType } from '../../protocol/wire.js';
import { Failure } from '../frame/exit.js';
import type { Env } from '../frame/io.js';

/** Keys of signing mode: a broker-mode config must not hold them (DESIGN §3.2). */
const ACCOUNT_KEYS = ['accessKeyId', 'secretKeyFile'] as const;
/** Enrollment is one cloud registration behind the broker: generous, but a field command must end. */
const CALL_TIMEOUT_MS = 30_000;

export interface BrokerProvisionRequest {
  brokerUrl: string;
  code: string;
  deviceId: string;
  appId: string | undefined;
  type: DeviceType | undefined;
  name: string | undefined;
  configFlag: string | undefined;
  /** The environment the config is read with: the command's, or none for the demo, which writes its own config. */
  env: Env;
}

export interface BrokerProvisioned {
  botId: string;
  /** What the technician must still do, one line each. */
  notes: string[];
}

/** The config file provisioning rewrites: --config, else $BOTLINK_CONFIG, else the default. */
function configPath(flag: string | undefined, env: Env): { path: string; by: string | null } {
  if (flag !== undefined) return { path: flag, by: '--config' };
  const named = env.BOTLINK_CONFIG;
  return named !== undefined ? { path: named, by: 'BOTLINK_CONFIG' } : { path: DEFAULT_CONFIG_FILE, by: null };
}

export async function provisionWithBroker(req: BrokerProvisionRequest, say: (line: string) => void): Promise<BrokerProvisioned> {
  const { env } = req;
  const { path, by } = configPath(req.configFlag, env);
  const raw = readConfigFile(path, by === null ? 'the default path' : by);
  if (raw === null) throw new ConfigError('config', `no config file at ${path}`, { fix: `create ${path} with at least {"baseUrl": "…"}` });
  const signing = signingSecret(path, env);
  const adoptBotId = signing !== undefined && typeof raw['botId'] === 'string' ? raw['botId'] : undefined;

  const candidate: Record<string, unknown> = { ...raw, brokerUrl: req.brokerUrl, botId: adoptBotId ?? 'pending-enrollment' };
  for (const key of ACCOUNT_KEYS) delete candidate[key];
  // The broker-mode config as it will be, checked (every key, the environment's too) before anything is made or sent.
  const values = withFileBeside(path, candidate, (file) => loadConfigValues({ file, env }));
  if (values.mode !== 'broker') throw new Failure('the config would not be in broker mode', { kind: 'config' });

  const { key, created } = ensureDeviceKey(values.deviceKeyFile);
  say(`device key: ${created ? 'made' : 'using'} ${values.deviceKeyFile} (keyId ${key.keyId})`);
  const request: EnrollRequest = {
    code: req.code,
    deviceId: req.deviceId,
    ...(req.appId !== undefined && { appId: req.appId }),
    ...(req.type !== undefined && { type: req.type }),
    ...(req.name !== undefined && { name: req.name }),
    ...(adoptBotId !== undefined && { botId: adoptBotId }),
  };
  say(`enroll: asking ${req.brokerUrl} for deviceId ${req.deviceId}${adoptBotId === undefined ? '' : ` to keep botId ${adoptBotId}`}`);
  const ca = values.brokerCaFile === null ? null : readFileSync(values.brokerCaFile, 'utf8');
  const enrolled = await enrollDevice({ brokerUrl: req.brokerUrl, ca, key, clock: systemClock, request, timeoutMs: CALL_TIMEOUT_MS });
  say(`enroll: botId ${enrolled.botId} under vendorId ${enrolled.vendorId}`);

  // Named in the config when only this run's defaults chose the place: a daemon under the unit has a
  // $CREDENTIALS_DIRECTORY, which would otherwise send it to look for the key there.
  const keyNamed = raw['deviceKeyFile'] !== undefined || env.BOTLINK_DEVICE_KEY_FILE !== undefined || Boolean(env.CREDENTIALS_DIRECTORY);
  writeConfig(path, { ...candidate, botId: enrolled.botId, ...(keyNamed ? {} : { deviceKeyFile: values.deviceKeyFile }) });
  say(`stored: brokerUrl and botId in ${path}${signing === undefined ? '' : ` (accessKeyId and secretKeyFile removed)`}`);
  const notes: string[] = [];
  if (signing !== undefined) {
    notes.push(
      `this device no longer uses the account secret: delete ${signing} (shred -u ${signing}) and stop loading it into the unit; ` +
        'the exposure ends only once the vendor rotates the account secret for the whole fleet',
    );
  }
  notes.push('restart the daemon (systemctl restart botlink) to run in broker mode');
  return { botId: enrolled.botId, notes };
}

/** The secret file of the config as it is, when it is a signing-mode one; undefined otherwise. */
function signingSecret(path: string, env: Env): string | undefined {
  try {
    const values = loadConfigValues({ file: path, env });
    return values.mode === 'sign' ? values.secretKeyFile : undefined;
  } catch {
    // A config that does not load yet (a template without a secret) is no signing device.
    return undefined;
  }
}

/** Runs `use` on `content` written to a private file beside `path`, so that relative paths in it resolve as in `path`. */
function withFileBeside<T>(path: string, content: Record<string, unknown>, use: (file: string) => T): T {
  const file = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.check`);
  writeFileExclusive(file, `${JSON.stringify(content, null, 2)}\n`, 0o600);
  try {
    return use(file);
  } finally {
    unlinkSync(file);
  }
}

/** Replaces the config atomically and durably, keeping its mode (0600 when it had none to keep). */
function writeConfig(path: string, content: Record<string, unknown>): void {
  let mode = 0o600;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    // no file yet: the default stands
  }
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  writeFileExclusive(tmp, `${JSON.stringify(content, null, 2)}\n`, mode);
  try {
    chmodSync(tmp, mode);
    renameSync(tmp, path);
  } catch (err) {
    unlinkSync(tmp);
    throw err;
  }
}

function writeFileExclusive(path: string, text: string, mode: number): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
