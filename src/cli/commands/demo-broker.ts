/**
 * The demo's broker mode (DESIGN §3.7), the way a fleet should run: the vendor's broker holds the
 * account secret, its operator makes an enrollment code, and the device enrolls a key of its own with
 * it — the device's folder never holds the secret, and the demo checks that it does not.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { createAdminToken } from '../../broker/admin/admin-tokens.js';
import { startBroker, type RunningBroker } from '../../broker/broker.js';
import { parseBrokerConfig } from '../../broker/config.js';
import { brokerKeys } from '../../broker/keys.js';
import { createCode } from '../../broker/operator.js';
import { systemClock } from '../../clock.js';
import { AdminClient } from '../admin-client.js';
import { remoteAccept } from './broker-remote.js';
import { provisionWithBroker } from './provision-broker.js';

export interface DemoAccount {
  accessKeyId: string;
  secret: string;
  vendorId: string;
  deviceId: string;
}

/** The demo vendor's serials: demo-device-0001 enrolls with a code, demo-device-0002 zero-touch. */
const DEMO_SERIALS = 'demo-device-[0-9]{4}';
export const ZERO_TOUCH_SERIAL = 'demo-device-0002';
/**
 * The Retry-After the demo's broker gives a waiting board (a fleet's broker: 60 s). A person watching sees the
 * accepted board connect within seconds, and the board shows what a fleet's does, only sooner: it asks as told,
 * twice per that many seconds at most (the broker's limit follows it), never refused for its pace.
 */
const DEMO_PENDING_RETRY_AFTER_S = 10;

export interface BrokerDevice {
  broker: RunningBroker;
  /** The operator, at their own laptop: the admin API (DESIGN §3.8) with an operator's admin token. */
  operator: AdminClient;
  /** The device's config.json, in broker mode. */
  configFile: string;
  /** Files in the device's folder, and how many of them hold the account secret (0, or the demo failed its point). */
  secretCheck(): { files: number; holding: number };
}

/** The vendor's side in `dir`/vendor, the device's in `dir`/device, the device enrolled and configured. */
export async function brokerDevice(
  dir: string,
  cloudUrl: string,
  account: DemoAccount,
  device: object,
  log: Logger,
): Promise<BrokerDevice> {
  const vendorDir = join(dir, 'vendor');
  const deviceDir = join(dir, 'device');
  mkdirSync(vendorDir, { mode: 0o700 });
  mkdirSync(deviceDir, { mode: 0o700 });
  writeFileSync(join(vendorDir, 'secret-key'), `${account.secret}\n`, { mode: 0o600 });
  const tokenKey = randomBytes(32);
  writeFileSync(join(vendorDir, 'token-key'), tokenKey, { mode: 0o600 });
  const config = parseBrokerConfig(
    {
      listen: '127.0.0.1:0',
      baseUrl: cloudUrl,
      accessKeyId: account.accessKeyId,
      secretKeyFile: join(vendorDir, 'secret-key'),
      tokenKeyFile: join(vendorDir, 'token-key'),
      store: `sqlite:${join(vendorDir, 'state', 'broker.db')}`,
      // The vendor's boards may wait for an operator: serials of the demo's pattern, which never signed.
      pendingEnrollment: { [account.vendorId]: { devicePattern: DEMO_SERIALS } },
      // The demo's tokens live seconds, so its devices ask far more often than a real fleet's 12 an hour.
      deviceTokensPerHour: 3600,
      pendingRetryAfterS: DEMO_PENDING_RETRY_AFTER_S,
      // The operator's console and API (§3.8), on loopback: plain http is allowed there.
      adminListen: '127.0.0.1:0',
    },
    {},
  );
  const broker = await startBroker({ config, clock: systemClock, log: log.child({ part: 'broker' }) });
  log.info({ url: broker.url, store: broker.store.kind }, "demo: the vendor's broker listening; it alone holds the account secret");
  try {
    const operator = await demoOperator(broker, tokenKey, vendorDir, log);
    const issued = await createCode(
      broker.store,
      brokerKeys(tokenKey),
      { vendorId: account.vendorId, binding: { deviceId: account.deviceId }, uses: 1, ttlS: 600, kind: 'plain' },
      systemClock.wallNow(),
      { actor: 'demo', audit: broker.audit },
    );
    log.info(`demo: the operator made a one-use enrollment code for ${account.deviceId} (botlink broker code)`);
    const configFile = join(deviceDir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ baseUrl: cloudUrl, ...device }), { mode: 0o600 });
    const done = await provisionWithBroker(
      {
        brokerUrl: broker.url,
        admission: { code: issued.code },
        deviceId: account.deviceId,
        appId: undefined,
        type: undefined,
        name: undefined,
        configFlag: configFile,
        // As the demo's daemon reads its config: the shell's BOTLINK_* variables are not the demo's.
        env: {},
      },
      (line) => log.info(`demo: provision --broker: ${line}`),
    );
    log.info(`demo: the device enrolled its own key: botId ${done.botId}`);
    return { broker, operator, configFile, secretCheck: () => secretCheck(deviceDir, account.secret) };
  } catch (err) {
    await broker.close();
    throw err;
  }
}

/**
 * The operator's admin token (`botlink broker admin-token create --role operator`), kept in a file of the vendor's
 * folder, never logged: with it the operator signs in to the console, or runs `botlink broker … --admin URL`.
 */
async function demoOperator(broker: RunningBroker, tokenKey: Buffer, vendorDir: string, log: Logger): Promise<AdminClient> {
  const made = await createAdminToken(
    broker.store,
    brokerKeys(tokenKey),
    { name: DEMO_OPERATOR, role: 'operator', ttlS: 3600 },
    systemClock.wallNow(),
    { actor: 'demo', audit: broker.audit },
  );
  const tokenFile = join(vendorDir, 'admin-token');
  writeFileSync(tokenFile, `${made.token}\n`, { mode: 0o600 });
  const origin = broker.adminUrl ?? '';
  log.info(
    `demo: the operator's console is ${origin}/admin/ while the demo runs: sign in with the admin token in ${tokenFile} (botlink broker admin-token create --name ${DEMO_OPERATOR} --role operator)`,
  );
  return new AdminClient(new URL(`${origin}/`), made.token, undefined);
}

/** The name of the demo operator's admin token: the audit's actor of what they do through the admin API. */
export const DEMO_OPERATOR = 'demo-operator';

function secretCheck(root: string, secret: string): { files: number; holding: number } {
  const files = readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  const holding = files.filter((e) => readFileSync(join(e.parentPath, e.name), 'latin1').includes(secret)).length;
  return { files: files.length, holding };
}

/**
 * A second board as a fleet's image ships it: baseUrl, brokerUrl and vendorId, no code and no botId. Its
 * daemon makes its key and waits, pending; the operator accepts the keyId it shows (`botlink broker accept
 * KEYID --device-id SN`); the daemon gets its botId on its next ask and connects.
 */
export function zeroTouchDevice(dir: string, cloudUrl: string, broker: RunningBroker, vendorId: string, device: object): string {
  mkdirSync(dir, { mode: 0o700 });
  const configFile = join(dir, 'config.json');
  const config = { baseUrl: cloudUrl, brokerUrl: broker.url, vendorId, deviceId: ZERO_TOUCH_SERIAL, ...device };
  writeFileSync(configFile, JSON.stringify(config), { mode: 0o600 });
  return configFile;
}

/**
 * The operator's step, from their laptop: once `pendingKeyId()` names the key the board shows as pending, they
 * accept it for its serial through the admin API (`botlink broker accept KEYID --device-id SN --admin URL`).
 */
export async function acceptWhenPending(
  operator: AdminClient,
  pendingKeyId: () => string | undefined,
  stopped: () => boolean,
  log: Logger,
): Promise<string | undefined> {
  let keyId = pendingKeyId();
  while (keyId === undefined) {
    if (stopped()) return undefined;
    await new Promise((resolve) => setTimeout(resolve, PENDING_LOOK_MS));
    keyId = pendingKeyId();
  }
  log.info(`demo: ${ZERO_TOUCH_SERIAL} waits, pending, showing keyId ${keyId}; the operator finds it in the console's Pending view`);
  const { botId } = await remoteAccept(operator, keyId, ZERO_TOUCH_SERIAL);
  log.info(
    `demo: the operator accepted keyId ${keyId} for ${ZERO_TOUCH_SERIAL} through the admin API (botlink broker accept KEYID --device-id SN --admin URL): botId ${botId}; the board learns it on its next ask, within ${DEMO_PENDING_RETRY_AFTER_S * 1.2} s (the broker's Retry-After, ${DEMO_PENDING_RETRY_AFTER_S} s, plus up to 20 %)`,
  );
  return botId;
}

/** How often the demo's operator looks at the board's status while it has not asked yet. */
const PENDING_LOOK_MS = 200;
