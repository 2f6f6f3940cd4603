/**
 * `botlink broker` (DESIGN §3.1, §3.7): the broker in the foreground, and the operator's commands
 * `code | devices | revoke | preauth`, which act on the broker's store directly, on its host.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { AuditTrail } from '../../broker/audit/trail.js';
import { startBroker } from '../../broker/broker.js';
import { type BrokerConfig, configFileFor, loadBrokerConfig } from '../../broker/config.js';
import type { Displacement } from '../../broker/displace.js';
import { auditDisplacement } from '../../broker/displacements.js';
import { brokerKeys, readAccountSecret, readStorePassword, readTokenKey } from '../../broker/keys.js';
import {
  createCode,
  DEFAULT_CODE_TTL_S,
  DEFAULT_CODE_USES,
  displaceRevoked,
  listDevices,
  type Operator,
  OperatorInputError,
  parsePreauth,
  preauthorize,
  revoke,
} from '../../broker/operator.js';
import { openStore } from '../../broker/store/open.js';
import type { BrokerStore, CodeKind } from '../../broker/store/types.js';
import { CloudClient } from '../../cloud/client.js';
import { systemClock } from '../../clock.js';
import { createLogger } from '../../log.js';
import { voiceChatUrl } from '../../protocol/conversation.js';
import { messageOf } from '../../protocol/errors.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import type { Env, Output } from '../frame/io.js';
import { stoppingOn, untilSignal } from '../frame/signals.js';
import { formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { pendingCommands } from './broker-pending.js';

const USAGE = `usage: botlink broker [--config FILE]
       botlink broker code    [--config FILE] --vendor-id V (--device-id SN | --any-device) [--uses N] [--ttl S] [--adopt | --replace] [--json]
       botlink broker devices [--config FILE] [--json]
       botlink broker revoke  [--config FILE] [--displace] BOTID
       botlink broker preauth [--config FILE] --vendor-id V FILE
       botlink broker pending [--config FILE] [--vendor-id V] [--source CIDR] [--json]
       botlink broker accept  [--config FILE] KEYID --device-id SN
       botlink broker reject  [--config FILE] KEYID | --vendor-id V [--source CIDR] [--first-asked-before T]

The vendor's broker (DESIGN §3.7): it alone holds the account secret and signs on the devices'
behalf. The config is --config, else $BOTLINK_BROKER_CONFIG, else /etc/botlink-broker/config.json.
  code      a new enrollment code, alone on the last line (--json: {code, expiresAt, uses}); default
            ${DEFAULT_CODE_USES} use, ${DEFAULT_CODE_TTL_S / 3600} h; bound to --device-id SN, or to any serial of the vendor with
            --any-device. --adopt (a signing device keeps its botId) and --replace (a new key for a known
            device) need --device-id and are single-use
  devices   botId, deviceId, keyId, state and last seen of every device (--json: one array)
  revoke    the botId's key answers 403 revoked from the next request on; --displace also closes the
            socket the device holds, now and once its last token has expired
  preauth   lines deviceId,publicKey: those keys enroll without a code
  pending   the keys waiting for an operator (enrollment with no code); accept enrolls one (botId: <id>
            last), reject refuses one for good, or a vendor's flood in one transaction`;

/** The broker's config: --config, else $BOTLINK_BROKER_CONFIG, else the default file; a bad one throws what to fix (78). */
function brokerConfig(file: string | undefined, env: Env): BrokerConfig {
  return loadBrokerConfig(configFileFor(file, env), env);
}

async function withStore<T>(config: BrokerConfig, fn: (store: BrokerStore) => Promise<T>): Promise<T> {
  const password = readStorePassword(config.storePasswordFile);
  const store = await openStore(config.store, { clock: systemClock, ...(password !== undefined && { password }) });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * Runs `fn` on the broker's store as the operator: their actions audited beside the broker's own, in its
 * store and its logFile, every row written before the store closes.
 */
async function asOperator<T>(config: BrokerConfig, fn: (store: BrokerStore, by: Operator) => Promise<T>): Promise<T> {
  const logging = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink-broker' });
  try {
    return await withStore(config, async (store) => {
      const audit = new AuditTrail({ store, log: logging.logger, clock: systemClock });
      try {
        return await fn(store, { actor: operatorActor(), audit });
      } finally {
        await audit.close();
      }
    });
  } finally {
    await logging.flush();
    logging.close();
  }
}

/** `cli:<OS user>`: who ran the command, as the audit names them (a uid with no name: its number). */
function operatorActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return `cli:uid-${process.getuid?.() ?? 'unknown'}`;
  }
}

const code = defineCommand({
  usage:
    'usage: botlink broker code [--config FILE] --vendor-id V (--device-id SN | --any-device) [--uses N] [--ttl S] [--adopt | --replace] [--json]',
  help: `A new enrollment code, alone on the last line (--json: {code, expiresAt, uses}); default ${DEFAULT_CODE_USES} use,
${DEFAULT_CODE_TTL_S / 3600} h. --device-id binds it to that one device. --any-device lets it enroll any serial of the vendor,
a device that still signs included (registration returns its own botId): say it only when that is meant.
--adopt (a signing device keeps its botId) and --replace (a new key for a known device) need --device-id and are single-use.`,
  flags: {
    config: { type: 'string' },
    'vendor-id': { type: 'string', required: true },
    'device-id': { type: 'string' },
    'any-device': { type: 'boolean' },
    uses: { type: 'integer', min: 1, max: 1_000_000 },
    ttl: { type: 'integer', min: 60, max: 366 * 24 * 3600 },
    adopt: { type: 'boolean' },
    replace: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  exclusive: [['--adopt', '--replace']],
  oneOf: [['--device-id', '--any-device']],
  async run({ flags, stdout, stderr, env }) {
    const vendorId = flags['vendor-id'];
    const deviceId = flags['device-id'];
    const kind: CodeKind = flags.adopt ? 'adopt' : flags.replace ? 'replace' : 'plain';
    const config = brokerConfig(flags.config, env);
    const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
    const request = {
      vendorId,
      binding: deviceId === undefined ? ('any-device' as const) : { deviceId },
      uses: flags.uses ?? DEFAULT_CODE_USES,
      ttlS: flags.ttl ?? DEFAULT_CODE_TTL_S,
      kind,
    };
    const issued = await asOperator(config, (store, by) => createCode(store, keys, request, systemClock.wallNow(), by));
    if (flags.json) stdout.write(`${printableJson(issued)}\n`);
    else {
      const binding = deviceId === undefined ? 'for any device' : `for device ${deviceId}`;
      stderr.write(
        `${printable(`${kind} code for vendor ${vendorId}, ${binding}`)}: ${issued.uses} use(s), expires ${formatTime(issued.expiresAt)}\n`,
      );
      stdout.write(`${issued.code}\n`);
    }
  },
});

const devices = defineCommand({
  usage: 'usage: botlink broker devices [--config FILE] [--json]',
  help: 'botId, deviceId, keyId, state and last seen of every device (--json: one array).',
  flags: { config: { type: 'string' }, json: { type: 'boolean' } },
  async run({ flags, stdout, env }) {
    const list = await withStore(brokerConfig(flags.config, env), listDevices);
    if (flags.json) {
      stdout.write(`${printableJson(list)}\n`);
      return;
    }
    stdout.write('botId\tdeviceId\tkeyId\tstate\tlastSeen\n');
    // A deviceId is what a device sent over the network: every field printable, a tab in one escaped.
    for (const d of list) {
      const fields = [String(d.botId), d.deviceId, d.keyId, d.state, d.lastSeenAt === null ? '-' : formatTime(d.lastSeenAt)];
      stdout.write(`${fields.map((f) => printable(f)).join('\t')}\n`);
    }
  },
});

const revokeBot = defineCommand({
  usage: 'usage: botlink broker revoke [--config FILE] [--displace] BOTID',
  help: `The botId's key answers 403 revoked from the next request on. A token it already holds lives until it
expires (2–8 h), and a socket open with it stays open: --displace opens one socket for the botId right
after the revoke, and the broker another once that token has expired, so the cloud closes the device's.`,
  flags: { config: { type: 'string' }, displace: { type: 'boolean' } },
  positionals: [{ name: 'botId', required: true }],
  async run({ flags, args, stdout, stderr, env }) {
    const { botId } = args;
    const config = brokerConfig(flags.config, env);
    const displace = flags.displace === true;
    // The displacement runs as the operator too: its audit row is written before the store closes.
    await asOperator(config, async (store, by) => {
      const result = await revoke(store, botId, systemClock.wallNow(), by, { displace });
      stdout.write(
        `${printable(`revoked ${result.revoked} key(s) of ${botId}`)}; a token it already holds lives until it expires (2–8 h)
`,
      );
      if (displace) await displaceNow(config, botId, result.displaceAt, by, stdout, stderr);
    });
  },
});

/**
 * revoke --displace once the revoke committed: the cloud closes whatever socket holds the botId. A failure
 * is told (stderr) and leaves the exit status alone: the revoke stands, and so does the later displacement.
 */
async function displaceNow(
  config: BrokerConfig,
  botId: string,
  displaceAt: number | null,
  by: Operator,
  stdout: Output,
  stderr: Output,
): Promise<void> {
  let result: Displacement;
  let cloud: CloudClient | undefined;
  try {
    const secret = readAccountSecret(config.secretKeyFile);
    cloud = new CloudClient({
      baseUrl: config.baseUrl,
      accessKeyId: config.accessKeyId,
      secretKey: { reveal: () => secret },
      clock: systemClock,
    });
    result = await displaceRevoked({ cloud, wsUrl: voiceChatUrl(config.baseUrl), clock: systemClock }, botId, by);
  } catch (err) {
    // The account secret unreadable: no displacement was even tried, and that too is audited.
    result = { outcome: 'failed', reason: messageOf(err) };
    auditDisplacement(by.audit, by.actor, botId, result);
  } finally {
    await cloud?.close();
  }
  if (result.outcome === 'displaced') stdout.write(`${printable(`displaced ${botId}: the cloud closed any socket it held`)}\n`);
  else stderr.write(`${printable(`could not displace ${botId} now: ${result.reason}`)}; the revoke stands\n`);
  stdout.write(
    displaceAt === null
      ? 'no token of it was cached: no later displacement is due\n'
      : `the broker displaces it again at ${formatTime(displaceAt)}, once its last token has expired\n`,
  );
}

const preauth = defineCommand({
  usage: 'usage: botlink broker preauth [--config FILE] --vendor-id V FILE',
  help: 'FILE holds lines deviceId,publicKey: those keys enroll without a code.',
  flags: { config: { type: 'string' }, 'vendor-id': { type: 'string', required: true } },
  positionals: [{ name: 'file', required: true }],
  async run({ flags, args, stdout, env }) {
    const vendorId = flags['vendor-id'];
    const config = brokerConfig(flags.config, env);
    let text: string;
    try {
      text = readFileSync(args.file, 'utf8');
    } catch (err) {
      throw new OperatorInputError(`cannot read ${args.file} (${messageOf(err)})`);
    }
    const rows = parsePreauth(text, vendorId, systemClock.wallNow());
    const added = await asOperator(config, (store, by) => preauthorize(store, rows, by));
    stdout.write(`${printable(`pre-authorised ${added} device(s) for vendor ${vendorId}`)}\n`);
  },
});

/** `botlink broker`: the broker in the foreground until SIGTERM or SIGINT; its operator commands act on its store. */
export const broker = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' } },
  subcommands: {
    code: async () => code,
    devices: async () => devices,
    revoke: async () => revokeBot,
    preauth: async () => preauth,
    ...pendingCommands({ config: brokerConfig, withStore, asOperator }),
  },
  async run({ flags, stdout, stderr, env }) {
    const config = brokerConfig(flags.config, env);
    const { logger, flush, close } = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink-broker' });
    const stop = untilSignal();
    let running: Awaited<ReturnType<typeof startBroker>>;
    try {
      running = await startBroker({ config, clock: systemClock, log: logger });
    } catch (err) {
      const errno = (err as NodeJS.ErrnoException).code;
      if (errno === 'EADDRINUSE' || errno === 'EADDRNOTAVAIL' || errno === 'EACCES') {
        throw new Failure(`cannot listen on ${config.listen.host}:${config.listen.port}: ${messageOf(err)}`, { kind: 'unavailable' });
      }
      throw err;
    }
    stdout.write(`listening on ${running.url}\n`);
    logger.info({ url: running.url, store: running.store.kind }, 'broker listening');
    stderr.write(`botlink broker: ${stoppingOn(await stop.received)}\n`);
    await running.close();
    await flush();
    close();
  },
});
