/**
 * `botlink broker` (DESIGN §3.1, §3.7): the broker in the foreground, and the operator's commands, which act
 * on the broker's store directly, on its host: `revoke` here, codes in broker-codes.ts, devices, preauth and
 * reset-limits in broker-devices.ts.
 */
import { startBroker } from '../../broker/broker.js';
import type { BrokerConfig } from '../../broker/config.js';
import type { Displacement } from '../../broker/displace.js';
import { auditDisplacement } from '../../broker/displacements.js';
import { readAccountSecret } from '../../broker/keys.js';
import { DEFAULT_CODE_TTL_S, DEFAULT_CODE_USES, displaceRevoked, type Operator, revoke } from '../../broker/operator.js';
import { CloudClient } from '../../cloud/client.js';
import { systemClock } from '../../clock.js';
import { createLogger } from '../../log.js';
import { voiceChatUrl } from '../../protocol/conversation.js';
import { messageOf } from '../../protocol/errors.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import type { Output } from '../frame/io.js';
import { stoppingOn, untilSignal } from '../frame/signals.js';
import { formatTime } from '../format.js';
import { printable } from '../printable.js';
import { adminClientFor } from '../admin-client.js';
import { adminToken } from './broker-admin-token.js';
import { cancel, code, codes } from './broker-codes.js';
import { devices, preauth, resetLimitsCommand } from './broker-devices.js';
import { asOperator, brokerConfig } from './broker-operator.js';
import { pendingCommands } from './broker-pending.js';
import { remoteRevoke } from './broker-remote.js';

const USAGE = `usage: botlink broker [--config FILE]
       botlink broker code    [--config FILE | --admin URL] --vendor-id V (--device-id SN | --any-device) [--uses N] [--ttl S] [--adopt | --replace] [--json]
       botlink broker codes   [--config FILE | --admin URL] [--vendor-id V] [--json]
       botlink broker cancel  [--config FILE | --admin URL] CODE_ID
       botlink broker devices [--config FILE | --admin URL] [--state S] [--vendor-id V] [--json]
       botlink broker revoke  [--config FILE | --admin URL] [--displace] BOTID
       botlink broker reset-limits [--config FILE | --admin URL] BOTID
       botlink broker preauth [--config FILE | --admin URL] --vendor-id V FILE | --remove --vendor-id V DEVICEID
       botlink broker pending [--config FILE | --admin URL] [--vendor-id V] [--source CIDR] [--json]
       botlink broker accept  [--config FILE | --admin URL] KEYID --device-id SN
       botlink broker reject  [--config FILE | --admin URL] KEYID | --vendor-id V [--source CIDR] [--first-asked-before T]
       botlink broker admin-token create [--config FILE] --name N --role viewer|operator [--ttl S] | list [--json] | revoke NAME
                                (on the store only: --admin is refused)

The vendor's broker (DESIGN §3.7): it alone holds the account secret and signs on the devices'
behalf. The config is --config, else $BOTLINK_BROKER_CONFIG, else /etc/botlink-broker/config.json.
The operator's commands act on the store (on the broker's host), or with --admin URL (else
$BOTLINK_BROKER_ADMIN_URL when --config is not given) through the admin API from any machine: the token in
$BOTLINK_BROKER_ADMIN_TOKEN (never on the command line), the URL https (CA: $BOTLINK_BROKER_ADMIN_CA_FILE,
else the system's) or http on loopback; no store, token key or config is needed then. Exit 77 when the token
is refused (401/403), 65 for 404/409 and other refusals, 69 for 429/5xx or no answer.
  code      a new enrollment code, alone on the last line (--json: {id, code, expiresAt, uses}); default
            ${DEFAULT_CODE_USES} use, ${DEFAULT_CODE_TTL_S / 3600} h; bound to --device-id SN, or to any serial of the vendor with
            --any-device; a vendor the cloud does not know is refused. --adopt (a signing device keeps its
            botId) and --replace (a new key for a known device) need --device-id and are single-use
  codes     the outstanding codes by id (never the code): vendor, binding, kind, uses left, expiry
  cancel    ends the code with that id; given a code instead of an id, refuses and does nothing
  devices   botId, deviceId, vendorId, keyId, state, last seen and agent version of every device
            (--json: one array); --state and --vendor-id filter
  revoke    the botId's key answers 403 revoked from the next request on; --displace also closes the
            socket the device holds, now and once its last token has expired
  reset-limits  clears the botId's hourly token counts (not its rotations)
  preauth   lines deviceId,publicKey: those keys enroll without a code; --remove drops one device's
  pending   the keys waiting for an operator (enrollment with no code); accept enrolls one (botId: <id>
            last), reject refuses one for good, or a vendor's flood in one transaction

  admin-token  the admin API's tokens: create (printed once, last line), list, revoke (ends its sessions);
               on the store only`;

const TOKEN_LIVES = 'a token it already holds lives until it expires (2–8 h)';

const revokeBot = defineCommand({
  usage: 'usage: botlink broker revoke [--config FILE | --admin URL] [--displace] BOTID',
  help: `The botId's key answers 403 revoked from the next request on. A token it already holds lives until it
expires (2–8 h), and a socket open with it stays open: --displace opens one socket for the botId right
after the revoke, and the broker another once that token has expired, so the cloud closes the device's.
With --admin the broker does both (the admin API is told displace: false without --displace); its audit tells how
the displacement went.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' }, displace: { type: 'boolean' } },
  positionals: [{ name: 'botId', required: true }],
  async run({ flags, args, stdout, stderr, env }) {
    const { botId } = args;
    const displace = flags.displace === true;
    const api = adminClientFor(flags, env);
    if (api) {
      // The broker displaced it before it answered, and says how that went: the store path's lines, from its answer.
      const { revoked, displaceAt, displacement } = await remoteRevoke(api, botId, displace);
      stdout.write(`${printable(`revoked ${revoked} key(s) of ${botId}`)}; ${TOKEN_LIVES}\n`);
      if (displacement) tellDisplacement(botId, displacement, displaceAt, stdout, stderr);
      return;
    }
    const config = brokerConfig(flags.config, env);
    // The displacement runs as the operator too: its audit row is written before the store closes.
    await asOperator(config, async (store, by) => {
      const result = await revoke(store, botId, systemClock.wallNow(), by, { displace });
      stdout.write(`${printable(`revoked ${result.revoked} key(s) of ${botId}`)}; ${TOKEN_LIVES}\n`);
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
  tellDisplacement(botId, result, displaceAt, stdout, stderr);
}

/** How a displacement went and when the next is due, alike from the store path and from the admin API's answer. */
function tellDisplacement(botId: string, result: Displacement, displaceAt: number | null, stdout: Output, stderr: Output): void {
  if (result.outcome === 'displaced') stdout.write(`${printable(`displaced ${botId}: the cloud closed any socket it held`)}\n`);
  else stderr.write(`${printable(`could not displace ${botId} now: ${result.reason}`)}; the revoke stands\n`);
  stdout.write(
    displaceAt === null
      ? 'no token of it was cached: no later displacement is due\n'
      : `the broker displaces it again at ${formatTime(displaceAt)}, once its last token has expired\n`,
  );
}

/** `botlink broker`: the broker in the foreground until SIGTERM or SIGINT; its operator commands act on its store. */
export const broker = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' } },
  subcommands: {
    code: async () => code,
    codes: async () => codes,
    cancel: async () => cancel,
    devices: async () => devices,
    revoke: async () => revokeBot,
    'reset-limits': async () => resetLimitsCommand,
    preauth: async () => preauth,
    ...pendingCommands(),
    'admin-token': async () => adminToken,
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
    if (running.adminUrl !== undefined) stdout.write(`admin on ${running.adminUrl}\n`);
    logger.info({ url: running.url, adminUrl: running.adminUrl, store: running.store.kind }, 'broker listening');
    stderr.write(`botlink broker: ${stoppingOn(await stop.received)}\n`);
    await running.close();
    await flush();
    close();
  },
});
