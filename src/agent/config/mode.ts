import { join } from 'node:path';
import { ENROLL_COMMAND } from './device-key.js';
import { ConfigError } from './error.js';
import { type ConfigKey, envVarFor, type TextKey } from './keys.js';
import { closest } from './suggest.js';
import type { Raw } from './values.js';

/** How the device gets its tokens: it signs with the account secret, or asks the vendor's broker (DESIGN §3.7). */
export type IdentityMode = 'sign' | 'broker';

/** Signing mode: this device signs getToken with the vendor's account secret (DESIGN §1.1). */
export interface SignModeValues {
  readonly mode: 'sign';
  readonly accessKeyId: string;
  readonly secretKeyFile: string;
  readonly brokerUrl: null;
  readonly brokerCaFile: null;
  readonly deviceKeyFile: null;
}

/** Broker mode: no account secret here; the device's own key asks brokerUrl for tokens. */
export interface BrokerModeValues {
  readonly mode: 'broker';
  /** Absent (DESIGN §3.2): '' is never a valid access key, and marks the token cache's pairs as the broker's. */
  readonly accessKeyId: '';
  /** Absent (DESIGN §3.2). */
  readonly secretKeyFile: '';
  readonly brokerUrl: string;
  /** PEM file of the private CA the broker's certificate chains to; null: the system CAs. */
  readonly brokerCaFile: string | null;
  readonly deviceKeyFile: string;
}

export type ModeValues = SignModeValues | BrokerModeValues;

/** What mode.ts needs of the settings being read. */
export interface ModeInput {
  raw: ReadonlyMap<ConfigKey, Raw>;
  text: (key: TextKey) => string | undefined;
  /** `set "key" in FILE or VARIABLE`. */
  setHint: (key: ConfigKey) => string;
  credentials: string | undefined;
  stateDir: string;
  /** Variables that made the configuration; CREDENTIALS_DIRECTORY joins them when a default comes from it. */
  used: string[];
}

const ACCOUNT_KEYS = ['accessKeyId', 'secretKeyFile'] as const;
const BROKER_ONLY_KEYS = ['brokerCaFile', 'deviceKeyFile'] as const;

/** The mode's settings (DESIGN §3.2): brokerUrl chooses broker mode, which refuses the account's keys. */
export function modeValues(input: ModeInput): ModeValues {
  const brokerUrl = input.text('brokerUrl');
  return brokerUrl === undefined ? signValues(input) : brokerValues(input, brokerUrl);
}

function signValues({ raw, text, setHint, credentials, used }: ModeInput): SignModeValues {
  for (const key of BROKER_ONLY_KEYS) {
    const r = raw.get(key);
    if (r !== undefined) {
      throw new ConfigError(key, `${r.where} applies only in broker mode, and brokerUrl is not set`, {
        fix: `${setHint('brokerUrl')}, or remove ${key}`,
      });
    }
  }
  const accessKeyId = text('accessKeyId');
  if (accessKeyId === undefined) throw new ConfigError('accessKeyId', 'accessKeyId is required', { fix: setHint('accessKeyId') });
  let secretKeyFile = text('secretKeyFile');
  if (secretKeyFile === undefined && credentials) {
    secretKeyFile = join(credentials, 'secret-key');
    used.push('CREDENTIALS_DIRECTORY');
  }
  if (secretKeyFile === undefined) {
    throw new ConfigError('secretKeyFile', 'secretKeyFile is required', {
      fix: `${setHint('secretKeyFile')}, or run under systemd with LoadCredential=secret-key`,
    });
  }
  return { mode: 'sign', accessKeyId, secretKeyFile, brokerUrl: null, brokerCaFile: null, deviceKeyFile: null };
}

function brokerValues({ raw, text, setHint, credentials, stateDir, used }: ModeInput, brokerUrl: string): BrokerModeValues {
  for (const key of ACCOUNT_KEYS) {
    const r = raw.get(key);
    if (r === undefined) continue;
    throw new ConfigError(key, `${r.where} conflicts with brokerUrl: in broker mode the account's credentials stay off the device`, {
      fix: `remove ${key} (${r.fix}; then delete the secret file itself), or remove brokerUrl to sign on this device`,
    });
  }
  // No botId with a vendorId is zero-touch enrollment (DESIGN §3.2): the daemon enrolls itself with no code.
  if (text('botId') === undefined && text('vendorId') === undefined) {
    throw new ConfigError('botId', 'broker mode needs botId, or vendorId for zero-touch enrollment', {
      fix: `run \`${ENROLL_COMMAND}\`, which writes botId, or ${setHint('vendorId')} so the daemon enrolls itself`,
    });
  }
  let deviceKeyFile = text('deviceKeyFile');
  if (deviceKeyFile === undefined && credentials) {
    deviceKeyFile = join(credentials, 'device-key');
    used.push('CREDENTIALS_DIRECTORY');
  }
  return {
    mode: 'broker',
    accessKeyId: '',
    secretKeyFile: '',
    brokerUrl,
    brokerCaFile: text('brokerCaFile') ?? null,
    deviceKeyFile: deviceKeyFile ?? join(stateDir, 'device-key.pem'),
  };
}

/** The agent's own variables under the broker's prefix (DESIGN §3.2). */
const AGENT_BROKER_VARS = [envVarFor('brokerUrl'), envVarFor('brokerCaFile')];
const BROKER_PREFIX = 'BOTLINK_BROKER_';

/** The broker's own variables (BOTLINK_BROKER_CONFIG, BOTLINK_BROKER_<KEY>) are not the agent's: it passes over them. */
export function isBrokerVariable(name: string): boolean {
  // A near miss of the agent's own (BOTLINK_BROKER_URI) is a typo to report, not the broker's.
  return name.startsWith(BROKER_PREFIX) && !AGENT_BROKER_VARS.includes(name) && closest(name, AGENT_BROKER_VARS) === undefined;
}
