/**
 * `botlink provision --broker URL (--code CODE | --vendor-id V) --device-id SN` (DESIGN §3.1, §3.7): the
 * device makes its own key, enrolls it with the vendor's broker — with a code, or with none and waiting
 * for the vendor to accept it — and its config becomes a broker-mode one, no account secret in it. A
 * signing device keeps its botId (an --adopt code) and is told when its secret can go; a revoked or
 * rejected key is set aside for a new one.
 */
import { chmodSync, closeSync, constants, fsyncSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { enrollDevice } from '../../agent/broker/enroll.js';
import type { EnrollAnswer, EnrollRequest, Pending } from '../../agent/broker/answers.js';
import { pendingWaitMs, replaceCodeFix } from '../../agent/broker/enrollment.js';
import { BrokerError } from '../../agent/broker/errors.js';
import { retireDeviceKey, storedBotId } from '../../agent/broker/recovery.js';
import { ConfigError, type ConfigValues, DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { type DeviceKey, ensureDeviceKey } from '../../agent/config/device-key.js';
import { readConfigFile } from '../../agent/config/file.js';
import { systemClock, systemRandom } from '../../clock.js';
import { BotlinkError, messageOf } from '../../protocol/errors.js';
import type { DeviceType } from '../../protocol/wire.js';
import { Failure } from '../frame/exit.js';
import type { Env } from '../frame/io.js';

type SignConfigValues = Extract<ConfigValues, { mode: 'sign' }>;

/** Keys of signing mode: a broker-mode config must not hold them (DESIGN §3.2). */
const ACCOUNT_KEYS = ['accessKeyId', 'secretKeyFile'] as const;
/** Enrollment is one cloud registration behind the broker: generous, but a field command must end. */
const CALL_TIMEOUT_MS = 30_000;

/** What admits the key: a code from the vendor, or (no code) the vendor whose broker may pre-authorise it or hold it pending. */
export type Admission = { code: string } | { vendorId: string; wait: boolean };

export interface BrokerProvisionRequest {
  brokerUrl: string;
  admission: Admission;
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
  const signing = signingConfig(path, env);
  const adoptBotId = signing !== undefined && 'code' in req.admission ? adoptableBotId(signing, req.deviceId) : undefined;

  const candidate: Record<string, unknown> = { ...raw, brokerUrl: req.brokerUrl, botId: adoptBotId ?? 'pending-enrollment' };
  for (const key of ACCOUNT_KEYS) delete candidate[key];
  // The broker-mode config as it will be, checked (every key, the environment's too) before anything is made or sent.
  const values = withFileBeside(path, candidate, (file) => loadConfigValues({ file, env, shownAs: path }));
  if (values.mode !== 'broker') throw new Failure('the config would not be in broker mode', { kind: 'config' });

  const ca = values.brokerCaFile === null ? null : readFileSync(values.brokerCaFile, 'utf8');
  const { admission } = req;
  const request: EnrollRequest = {
    ...('code' in admission ? { code: admission.code } : { vendorId: admission.vendorId }),
    deviceId: req.deviceId,
    ...(req.appId !== undefined && { appId: req.appId }),
    ...(req.type !== undefined && { type: req.type }),
    ...(req.name !== undefined && { name: req.name }),
    ...(adoptBotId !== undefined && { botId: adoptBotId }),
  };
  const vendorHint = 'code' in admission ? (typeof raw['vendorId'] === 'string' ? raw['vendorId'] : undefined) : admission.vendorId;
  const enroll = (key: DeviceKey): Promise<EnrollAnswer> =>
    enrollDevice({ brokerUrl: req.brokerUrl, ca, key, clock: systemClock, request, timeoutMs: CALL_TIMEOUT_MS });
  let { key, created } = ensureDeviceKey(values.deviceKeyFile);
  say(`device key: ${created ? 'made' : 'using'} ${values.deviceKeyFile} (keyId ${key.keyId})`);
  say(`enroll: asking ${req.brokerUrl} for deviceId ${req.deviceId}${adoptBotId === undefined ? '' : ` to keep botId ${adoptBotId}`}`);
  let answer: EnrollAnswer;
  try {
    answer = await enroll(key);
  } catch (err) {
    // A code after a revoke or a reject: that key is spent for good, so a new one is made and enrolled.
    if (!('code' in admission) || !isSpentKey(err)) throw enrollFailure(err, vendorHint, req.deviceId);
    const aside = retireDeviceKey(values.deviceKeyFile, key.keyId);
    say(`device key: keyId ${key.keyId} was ${refusalOf(err)}; kept as ${aside}`);
    ({ key, created } = ensureDeviceKey(values.deviceKeyFile));
    say(`device key: made ${values.deviceKeyFile} (keyId ${key.keyId})`);
    answer = await enroll(key).catch((again: unknown) => {
      throw enrollFailure(again, vendorHint, req.deviceId);
    });
  }
  if (answer.state === 'pending') {
    if ('code' in admission || !admission.wait) throw pendingFailure(answer.keyId, req.deviceId);
    answer = await waitForAcceptance(answer, () => enroll(key), say, vendorHint, req.deviceId);
  }
  say(`enroll: botId ${answer.botId} under vendorId ${answer.vendorId}`);

  // Named in the config when only this run's defaults chose the place: a daemon under the unit has a
  // $CREDENTIALS_DIRECTORY, which would otherwise send it to look for the key there.
  const keyNamed = raw['deviceKeyFile'] !== undefined || env.BOTLINK_DEVICE_KEY_FILE !== undefined || Boolean(env.CREDENTIALS_DIRECTORY);
  writeConfig(path, { ...candidate, botId: answer.botId, ...(keyNamed ? {} : { deviceKeyFile: values.deviceKeyFile }) });
  say(`stored: brokerUrl and botId in ${path}${signing === undefined ? '' : ` (accessKeyId and secretKeyFile removed)`}`);
  const notes: string[] = [];
  if (signing !== undefined) {
    notes.push(
      `this device no longer uses the account secret: delete ${signing.secretKeyFile} (shred -u ${signing.secretKeyFile}) and stop loading it into the unit; ` +
        'the exposure ends only once the vendor rotates the account secret for the whole fleet',
    );
  }
  notes.push('restart the daemon (systemctl restart botlink) to run in broker mode');
  return { botId: answer.botId, notes };
}

/** Asks again, as Retry-After says (else every 60 s ±20 %), until an operator accepts the key (or rejects it: 65). */
async function waitForAcceptance(
  first: Pending,
  ask: () => Promise<EnrollAnswer>,
  say: (line: string) => void,
  vendorId: string | undefined,
  deviceId: string,
): Promise<Extract<EnrollAnswer, { state: 'active' }>> {
  let retryAfterMs = first.retryAfterMs;
  say(`pending: keyId ${first.keyId} waits for the vendor to accept it (\`botlink broker accept ${first.keyId} --device-id ${deviceId}\`)`);
  for (;;) {
    const waitMs = pendingWaitMs(retryAfterMs, systemRandom());
    say(`pending: asking again in ${Math.round(waitMs / 1000)} s`);
    await systemClock.sleep(waitMs);
    try {
      const answer = await ask();
      if (answer.state === 'active') return answer;
      retryAfterMs = answer.retryAfterMs;
    } catch (err) {
      // The network or the broker failing now and then is no answer: the wait goes on; a refusal ends it.
      if (!(err instanceof BotlinkError) || !TRANSIENT.has(err.retry)) throw enrollFailure(err, vendorId, deviceId);
      say(`pending: ${messageOf(err)}; asking again later`);
      retryAfterMs = err instanceof BrokerError ? err.retryAfterMs : undefined;
    }
  }
}

/** Failures a retry may mend: the broker, the cloud or the network, not a refusal of this key. */
const TRANSIENT: ReadonlySet<string> = new Set(['retry-soon', 'retry-backoff', 'needs-clock']);

/** The broker's refusal of this key for good: a code then enrolls a new key in its place. */
function isSpentKey(err: unknown): err is BrokerError {
  return err instanceof BrokerError && (err.code === 'ERR_BROKER_REVOKED' || err.code === 'ERR_BROKER_REJECTED');
}

function refusalOf(err: BrokerError): string {
  return err.code === 'ERR_BROKER_REJECTED' ? 'rejected' : 'revoked';
}

/** Exit by cause (DESIGN §3.1): the broker's refusal 65; unreachable, 5xx or 429 69; the config (ConfigError) 78. */
function enrollFailure(err: unknown, vendorId: string | undefined, deviceId: string): unknown {
  if (!(err instanceof BotlinkError) || err instanceof ConfigError || err.code === 'ERR_DEVICE_KEY') return err;
  const fix = err.code === 'ERR_BROKER_DEVICE_EXISTS' ? replaceCodeFix(vendorId, deviceId) : err.fix;
  return new Failure(messageOf(err), { fix, kind: TRANSIENT.has(err.retry) ? 'unavailable' : 'data', cause: err });
}

function pendingFailure(keyId: string, deviceId: string): Failure {
  return new Failure(`the broker holds keyId ${keyId} pending: it waits for the vendor to accept it`, {
    fix: `read keyId ${keyId} to the vendor (\`botlink broker accept ${keyId} --device-id ${deviceId}\`), then run this again`,
    kind: 'later',
  });
}

/** A signing device's botId for an --adopt code: the config's, else the one it registered itself with (its store). */
function adoptableBotId(signing: SignConfigValues, deviceId: string): string | undefined {
  if (signing.botId !== undefined) return signing.botId;
  if (signing.vendorId === undefined) return undefined;
  const key = { baseUrl: signing.baseUrl, accessKeyId: signing.accessKeyId, vendorId: signing.vendorId, deviceId };
  return storedBotId(signing.stateDir, key);
}

/** The config as it is, when it is a signing-mode one; undefined otherwise. */
function signingConfig(path: string, env: Env): SignConfigValues | undefined {
  try {
    const values = loadConfigValues({ file: path, env });
    return values.mode === 'sign' ? values : undefined;
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
