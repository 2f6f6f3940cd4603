/**
 * `botlink broker devices | preauth | reset-limits` (DESIGN §3.1, §3.7): the devices as the store knows them,
 * their pre-authorisations added and removed, and a botId's hourly counts cleared.
 */
import { readFileSync } from 'node:fs';
import { listDevices, OperatorInputError, parsePreauth, preauthorize, removePreauth, resetLimits } from '../../broker/operator.js';
import { systemClock } from '../../clock.js';
import { messageOf } from '../../protocol/errors.js';
import { adminClientFor } from '../admin-client.js';
import { defineCommand } from '../frame/command.js';
import { formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { asOperator, brokerConfig, withStore } from './broker-operator.js';
import { remoteDevices, remotePreauth, remoteRemovePreauth, remoteResetLimits } from './broker-remote.js';

/** The states `broker devices` lists (DESIGN §3.7). */
const DEVICE_STATES = ['active', 'revoked', 'preauthorized', 'pending', 'rejected'] as const;

export const devices = defineCommand({
  usage: 'usage: botlink broker devices [--config FILE | --admin URL] [--state S] [--vendor-id V] [--json]',
  help: `botId, deviceId, vendorId, keyId, state, last seen and the agent version last reported, of every device and
pre-authorised key (--json: one array); --state (${DEVICE_STATES.join(', ')}) and --vendor-id keep those alone.`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
    state: { type: 'string', choices: DEVICE_STATES },
    'vendor-id': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run({ flags, stdout, env }) {
    const filter = { state: flags.state, vendorId: flags['vendor-id'] };
    const api = adminClientFor(flags, env);
    const list = api
      ? await remoteDevices(api, filter)
      : await withStore(brokerConfig(flags.config, env), (store) => listDevices(store, filter));
    if (flags.json) {
      stdout.write(`${printableJson(list)}\n`);
      return;
    }
    stdout.write('botId\tdeviceId\tvendorId\tkeyId\tstate\tlastSeen\tagentVersion\n');
    // A deviceId is what a device sent over the network: every field printable, a tab in one escaped.
    for (const d of list) {
      const seen = d.lastSeenAt === null ? '-' : formatTime(d.lastSeenAt);
      const fields = [String(d.botId), d.deviceId, d.vendorId, d.keyId, d.state, seen, d.agentVersion ?? '-'];
      stdout.write(`${fields.map((f) => printable(f)).join('\t')}\n`);
    }
  },
});

export const preauth = defineCommand({
  usage: 'usage: botlink broker preauth [--config FILE | --admin URL] --vendor-id V FILE | --remove --vendor-id V DEVICEID',
  help: `FILE holds lines deviceId,publicKey: those keys enroll without a code (one audit event per line).
--remove drops the pre-authorisation of the device DEVICEID instead (65 when it has none). On the store a file is
added whole or not at all; with --admin it goes in requests of at most 10,000 lines, and a line the broker refuses
(its device or key known already) is named after the others were added (65).`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
    'vendor-id': { type: 'string', required: true },
    remove: { type: 'boolean' },
  },
  positionals: [{ name: 'input', required: true }],
  async run({ flags, args, stdout, env }) {
    const vendorId = flags['vendor-id'];
    const api = adminClientFor(flags, env);
    if (flags.remove) {
      const removed = api
        ? await remoteRemovePreauth(api, vendorId, args.input)
        : await asOperator(brokerConfig(flags.config, env), (store, by) => removePreauth(store, vendorId, args.input, by));
      const key = removed === undefined ? '' : ` (key ${removed.keyId})`;
      stdout.write(`${printable(`removed the pre-authorisation of device ${args.input} for vendor ${vendorId}${key}`)}\n`);
      return;
    }
    let text: string;
    try {
      text = readFileSync(args.input, 'utf8');
    } catch (err) {
      throw new OperatorInputError(`cannot read ${args.input} (${messageOf(err)})`);
    }
    const rows = parsePreauth(text, vendorId, systemClock.wallNow());
    const added = api
      ? await remotePreauth(api, vendorId, rows)
      : await asOperator(brokerConfig(flags.config, env), (store, by) => preauthorize(store, rows, by));
    stdout.write(`${printable(`pre-authorised ${added} device(s) for vendor ${vendorId}`)}\n`);
  },
});

export const resetLimitsCommand = defineCommand({
  usage: 'usage: botlink broker reset-limits [--config FILE | --admin URL] BOTID',
  help: `Clears the botId's hourly counts: its token requests count from zero again (deviceTokensPerHour). Its rotations
(rotatePerDay) are not reset.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' } },
  positionals: [{ name: 'botId', required: true }],
  async run({ flags, args, stdout, env }) {
    const api = adminClientFor(flags, env);
    const cleared = api
      ? await remoteResetLimits(api, args.botId)
      : await asOperator(brokerConfig(flags.config, env), (store, by) => resetLimits(store, args.botId, by));
    const windows = cleared === undefined ? '' : ` (${cleared} count window(s) cleared)`;
    stdout.write(`${printable(`reset the hourly limits of ${args.botId}`)}${windows}; rotatePerDay is kept\n`);
  },
});
