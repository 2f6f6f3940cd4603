/**
 * `botlink broker` (DESIGN §3.1, §3.7): the broker in the foreground, and the operator's commands
 * `code | devices | revoke | preauth`, which act on the broker's store directly, on its host.
 */
import { readFileSync } from 'node:fs';
import { startBroker } from '../../broker/broker.js';
import { BrokerConfigError, type BrokerConfig, configFileFor, loadBrokerConfig } from '../../broker/config.js';
import { brokerKeys, readTokenKey } from '../../broker/keys.js';
import {
  createCode,
  DEFAULT_CODE_TTL_S,
  DEFAULT_CODE_USES,
  listDevices,
  OperatorInputError,
  parsePreauth,
  preauthorize,
  revoke,
} from '../../broker/operator.js';
import { openStore } from '../../broker/store/open.js';
import type { BrokerStore, CodeKind } from '../../broker/store/types.js';
import { systemClock } from '../../clock.js';
import { createLogger } from '../../log.js';
import { messageOf } from '../../protocol/errors.js';
import { parseFlags } from './common.js';
import { Exit, UsageError } from '../frame/exit.js';
import { formatFailure, formatTime } from '../format.js';

const USAGE = `usage: botlink broker [--config FILE]
       botlink broker code    [--config FILE] --vendor-id V [--device-id SN] [--uses N] [--ttl S] [--adopt | --replace] [--json]
       botlink broker devices [--config FILE] [--json]
       botlink broker revoke  [--config FILE] BOTID
       botlink broker preauth [--config FILE] --vendor-id V FILE

The vendor's broker (DESIGN §3.7): it alone holds the account secret and signs on the devices'
behalf. The config is --config, else $BOTLINK_BROKER_CONFIG, else /etc/botlink-broker/config.json.
  code      a new enrollment code, alone on the last line (--json: {code, expiresAt, uses}); default
            ${DEFAULT_CODE_USES} use, ${DEFAULT_CODE_TTL_S / 3600} h. --adopt (a signing device keeps its botId) and --replace (a new key
            for a known device) need --device-id and are single-use
  devices   botId, deviceId, keyId, state and last seen of every device (--json: one array)
  revoke    the botId's key answers 403 revoked from the next request on
  preauth   lines deviceId,publicKey: those keys enroll without a code`;

type Sub = 'code' | 'devices' | 'revoke' | 'preauth';
const SUBS: readonly Sub[] = ['code', 'devices', 'revoke', 'preauth'];

export async function broker(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  const sub = SUBS.find((s) => s === first);
  if (sub === undefined && first !== undefined && !first.startsWith('-'))
    throw new UsageError(`unknown broker command '${first}'\n${USAGE}`);
  const args = sub === undefined ? argv : rest;
  const { values, positionals } = parseArgsWithPositionals(args);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  let config: BrokerConfig;
  try {
    config = loadBrokerConfig(configFileFor(values.config, process.env), process.env);
  } catch (err) {
    if (err instanceof BrokerConfigError) {
      process.stderr.write(formatFailure('botlink broker: configuration error', err));
      return Exit.CONFIG;
    }
    throw err;
  }
  try {
    if (sub === undefined) {
      if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'\n${USAGE}`);
      return await serveBroker(config);
    }
    return await operate(sub, config, values, positionals);
  } catch (err) {
    if (err instanceof BrokerConfigError) {
      process.stderr.write(formatFailure('botlink broker: configuration error', err));
      return Exit.CONFIG;
    }
    if (err instanceof OperatorInputError) {
      process.stderr.write(`botlink broker ${sub}: ${err.message}\n`);
      return Exit.DATAERR;
    }
    throw err;
  }
}

interface Flags {
  config?: string | undefined;
  json?: boolean | undefined;
  help?: boolean | undefined;
  'vendor-id'?: string | undefined;
  'device-id'?: string | undefined;
  uses?: string | undefined;
  ttl?: string | undefined;
  adopt?: boolean | undefined;
  replace?: boolean | undefined;
}

function parseArgsWithPositionals(args: string[]): { values: Flags; positionals: string[] } {
  const flagArgs: string[] = [];
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a.startsWith('-')) {
      flagArgs.push(a);
      if (['--config', '--vendor-id', '--device-id', '--uses', '--ttl'].includes(a) && i + 1 < args.length)
        flagArgs.push(args[++i] as string);
    } else positionals.push(a);
  }
  const { values } = parseFlags(
    flagArgs,
    {
      config: { type: 'string' },
      json: { type: 'boolean' },
      'vendor-id': { type: 'string' },
      'device-id': { type: 'string' },
      uses: { type: 'string' },
      ttl: { type: 'string' },
      adopt: { type: 'boolean' },
      replace: { type: 'boolean' },
    },
    USAGE,
  );
  return { values, positionals };
}

function whole(flag: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = /^-?\d{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max}, got '${raw}'\n${USAGE}`);
  return n;
}

async function serveBroker(config: BrokerConfig): Promise<number> {
  const { logger, flush, close } = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink-broker' });
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    const stop = (sig: NodeJS.Signals): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(sig);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  let running: Awaited<ReturnType<typeof startBroker>>;
  try {
    running = await startBroker({ config, clock: systemClock, log: logger });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
      process.stderr.write(`botlink broker: cannot listen on ${config.listen.host}:${config.listen.port}: ${messageOf(err)}\n`);
      return Exit.UNAVAILABLE;
    }
    throw err;
  }
  process.stdout.write(`listening on ${running.url}\n`);
  logger.info({ url: running.url, store: running.store.kind }, 'broker listening');
  const signal = await stopped;
  process.stderr.write(`botlink broker: ${signal}: closing\n`);
  await running.close();
  await flush();
  close();
  return Exit.OK;
}

async function withStore<T>(config: BrokerConfig, fn: (store: BrokerStore) => Promise<T>): Promise<T> {
  const store = await openStore(config.store, { clock: systemClock });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

async function operate(sub: Sub, config: BrokerConfig, values: Flags, positionals: string[]): Promise<number> {
  const now = systemClock.wallNow();
  const expectPositionals = (n: number, what: string): void => {
    if (positionals.length !== n) throw new UsageError(`broker ${sub} takes ${n === 0 ? 'no argument' : what}\n${USAGE}`);
  };
  switch (sub) {
    case 'code': {
      expectPositionals(0, '');
      const vendorId = values['vendor-id'];
      if (vendorId === undefined || vendorId === '') throw new UsageError(`broker code needs --vendor-id V\n${USAGE}`);
      if (values.adopt && values.replace) throw new UsageError(`--adopt and --replace exclude each other\n${USAGE}`);
      const kind: CodeKind = values.adopt ? 'adopt' : values.replace ? 'replace' : 'plain';
      const uses = whole('uses', values.uses, DEFAULT_CODE_USES, 1, 1_000_000);
      const ttlS = whole('ttl', values.ttl, DEFAULT_CODE_TTL_S, 60, 366 * 24 * 3600);
      const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
      const issued = await withStore(config, (store) =>
        createCode(store, keys, { vendorId, deviceId: values['device-id'], uses, ttlS, kind }, now),
      );
      if (values.json) process.stdout.write(`${JSON.stringify(issued)}\n`);
      else {
        process.stderr.write(`${kind} code for vendor ${vendorId}: ${issued.uses} use(s), expires ${formatTime(issued.expiresAt)}\n`);
        process.stdout.write(`${issued.code}\n`);
      }
      return Exit.OK;
    }
    case 'devices': {
      expectPositionals(0, '');
      const devices = await withStore(config, listDevices);
      if (values.json) process.stdout.write(`${JSON.stringify(devices)}\n`);
      else {
        process.stdout.write('botId\tdeviceId\tkeyId\tstate\tlastSeen\n');
        for (const d of devices) {
          process.stdout.write(
            `${d.botId}\t${d.deviceId}\t${d.keyId}\t${d.state}\t${d.lastSeenAt === null ? '-' : formatTime(d.lastSeenAt)}\n`,
          );
        }
      }
      return Exit.OK;
    }
    case 'revoke': {
      expectPositionals(1, 'one BOTID');
      const botId = positionals[0] as string;
      const n = await withStore(config, (store) => revoke(store, botId, now));
      process.stdout.write(`revoked ${n} key(s) of ${botId}; a token it already holds lives until it expires (2–8 h)\n`);
      return Exit.OK;
    }
    case 'preauth': {
      expectPositionals(1, 'one FILE');
      const vendorId = values['vendor-id'];
      if (vendorId === undefined || vendorId === '') throw new UsageError(`broker preauth needs --vendor-id V\n${USAGE}`);
      const file = positionals[0] as string;
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new OperatorInputError(`cannot read ${file} (${messageOf(err)})`);
      }
      const added = await withStore(config, (store) => preauthorize(store, parsePreauth(text, vendorId, now)));
      process.stdout.write(`pre-authorised ${added} device(s) for vendor ${vendorId}\n`);
      return Exit.OK;
    }
  }
}
