/**
 * `botlink broker code | codes | cancel` (DESIGN §3.1, §3.7): enrollment codes made for a vendor the cloud
 * knows, listed and cancelled by their id. The code itself is printed once, by `code`, and never again.
 */
import { brokerKeys, readTokenKey } from '../../broker/keys.js';
import { cancelCode, isCodeShaped, listCodes, refuseUnknownVendor } from '../../broker/operator-codes.js';
import type { BrokerConfig } from '../../broker/config.js';
import { type CodeRequest, createCode, DEFAULT_CODE_TTL_S, DEFAULT_CODE_USES, type IssuedCode } from '../../broker/operator.js';
import type { CodeKind, CodeListing } from '../../broker/store/types.js';
import { systemClock } from '../../clock.js';
import { adminClientFor } from '../admin-client.js';
import { defineCommand } from '../frame/command.js';
import { UsageError } from '../frame/exit.js';
import { formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { asOperator, brokerConfig, withCloud, withStore } from './broker-operator.js';
import { remoteCancel, remoteCode, remoteCodes } from './broker-remote.js';

export const code = defineCommand({
  usage:
    'usage: botlink broker code [--config FILE | --admin URL] --vendor-id V (--device-id SN | --any-device) [--uses N] [--ttl S] [--adopt | --replace] [--json]',
  help: `A new enrollment code, alone on the last line (--json: {id, code, expiresAt, uses}); default ${DEFAULT_CODE_USES} use,
${DEFAULT_CODE_TTL_S / 3600} h; the line before says its id, vendor and binding. The cloud is asked for the vendor's token first:
a vendor it does not know is refused (65) and nothing is stored. --device-id binds it to that one device. --any-device lets
it enroll any serial of the vendor, a device that still signs included (registration returns its own botId): say it only
when that is meant. --adopt (a signing device keeps its botId) and --replace (a new key for a known device) need
--device-id and are single-use.`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
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
    const request = {
      vendorId,
      binding: deviceId === undefined ? ('any-device' as const) : { deviceId },
      uses: flags.uses ?? DEFAULT_CODE_USES,
      ttlS: flags.ttl ?? DEFAULT_CODE_TTL_S,
      kind,
    };
    const api = adminClientFor(flags, env);
    const issued = api ? await remoteCode(api, request) : await codeOnStore(brokerConfig(flags.config, env), request);
    if (flags.json) stdout.write(`${printableJson(issued)}\n`);
    else {
      stderr.write(
        `${printable(`${kind} code for vendor ${vendorId}, ${bindingOf(deviceId ?? null)}`)}: ${issued.uses} use(s), expires ${formatTime(issued.expiresAt)}; id ${printable(issued.id)}\n`,
      );
      stdout.write(`${printable(issued.code)}\n`);
    }
  },
});

/** The code made on the store: the cloud's word on the vendor first, so a refused vendor leaves nothing behind. */
async function codeOnStore(config: BrokerConfig, request: CodeRequest): Promise<IssuedCode> {
  const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  await withCloud(config, (cloud) =>
    refuseUnknownVendor(
      { get: async (v) => (await cloud.getToken({ kind: 'vendor', id: v }, systemClock.wallNow())).accessToken },
      request.vendorId,
    ),
  );
  return asOperator(config, (store, by) => createCode(store, keys, request, systemClock.wallNow(), by));
}

/** A code's binding in words: `for device SN`, or that it admits any device of its vendor. */
function bindingOf(deviceId: string | null): string {
  return deviceId === null ? 'for any device' : `for device ${deviceId}`;
}

export const codes = defineCommand({
  usage: 'usage: botlink broker codes [--config FILE | --admin URL] [--vendor-id V] [--json]',
  help: `The outstanding codes (a use left, not expired), soonest to expire first: id, vendor, binding, kind, uses left
and expiry (--json: one array of {id, vendorId, deviceId, kind, usesLeft, expiresAt}). Never a code: only its id,
which broker cancel takes.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' }, 'vendor-id': { type: 'string' }, json: { type: 'boolean' } },
  async run({ flags, stdout, env }) {
    const api = adminClientFor(flags, env);
    const list = api
      ? await remoteCodes(api, flags['vendor-id'])
      : await withStore(brokerConfig(flags.config, env), (store) => listCodes(store, systemClock.wallNow(), flags['vendor-id']));
    if (flags.json) {
      stdout.write(`${printableJson(list)}\n`);
      return;
    }
    stdout.write('id\tvendorId\tbinding\tkind\tusesLeft\texpires\n');
    for (const c of list) {
      const fields = [c.id, c.vendorId, c.deviceId === null ? 'any device' : `device ${c.deviceId}`, c.kind, String(c.usesLeft)];
      stdout.write(`${[...fields, formatTime(c.expiresAt)].map((f) => printable(f)).join('\t')}\n`);
    }
  },
});

export const cancel = defineCommand({
  usage: 'usage: botlink broker cancel [--config FILE | --admin URL] CODE_ID',
  help: `Ends the code with this id (as broker codes lists it): refused from then on, whatever uses it had left.
Given a code rather than its id, it refuses (64) and does nothing, not even log it.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' } },
  positionals: [{ name: 'code_id', required: true }],
  async run({ flags, args, stdout, env }) {
    // Before the config or the log is touched: a code typed here must leave no trace anywhere.
    if (isCodeShaped(args.code_id))
      throw new UsageError('that is an enrollment code, not a code id: cancel takes the id broker codes lists (nothing was done)');
    const api = adminClientFor(flags, env);
    const cancelled: CodeListing | { id: string; kind?: undefined } = api
      ? await remoteCancel(api, args.code_id)
      : await asOperator(brokerConfig(flags.config, env), (store, by) => cancelCode(store, args.code_id, by));
    if (cancelled.kind === undefined) {
      stdout.write(`${printable(`cancelled code ${cancelled.id}`)}: it was spent or expired already\n`);
      return;
    }
    const { id, vendorId, deviceId, kind, usesLeft } = cancelled;
    stdout.write(
      `${printable(`cancelled ${kind} code ${id} for vendor ${vendorId}, ${bindingOf(deviceId)}`)}: ${usesLeft} use(s) were left\n`,
    );
  },
});
