/**
 * `botlink broker pending | accept | reject` (DESIGN §3.1, §3.7 "Enrollment with no code"): the keys that
 * wait for an operator, on the broker's store (broker-operator.ts opens it).
 */
import { acceptPending, listPending, type RejectWhich, rejectPending } from '../../broker/pending-operator.js';
import { operatorRegistrar } from '../../broker/registrar.js';
import { systemClock } from '../../clock.js';
import type { BrokerConfig } from '../../broker/config.js';
import { adminClientFor } from '../admin-client.js';
import { type Command, defineCommand } from '../frame/command.js';
import { UsageError } from '../frame/exit.js';
import { formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { asOperator, brokerConfig, withCloud, withStore } from './broker-operator.js';
import { remoteAccept, remotePending, remoteReject } from './broker-remote.js';
import { parseSince } from './log-view.js';

export function pendingCommands(): Record<'pending' | 'accept' | 'reject', () => Promise<Command>> {
  return { pending: async () => pending, accept: async () => accept, reject: async () => reject };
}

const pending = defineCommand({
  usage: 'usage: botlink broker pending [--config FILE | --admin URL] [--vendor-id V] [--source CIDR] [--json]',
  help: `The keys waiting for an operator (enrollment with no code): keyId, vendor, device, name, source, first and
last ask, and how many other keys wait for the same device (--json: one array).`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
    'vendor-id': { type: 'string' },
    source: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run({ flags, stdout, env }) {
    const filter = definedOf({ vendorId: flags['vendor-id'], source: flags.source });
    const api = adminClientFor(flags, env);
    const list = api
      ? await remotePending(api, filter)
      : await withStore(brokerConfig(flags.config, env), (store) => listPending(store, filter));
    if (flags.json) {
      stdout.write(`${printableJson(list)}\n`);
      return;
    }
    stdout.write('keyId\tvendorId\tdeviceId\tname\tsource\tfirstAsked\tlastAsked\tduplicates\n');
    // deviceId, name and source are what a device sent: every field printable, a tab in one escaped.
    for (const p of list) {
      const fields = [
        p.keyId,
        p.vendorId,
        p.deviceId,
        p.name,
        p.source,
        formatTime(p.firstAsked),
        formatTime(p.lastAsked),
        String(p.duplicates),
      ];
      stdout.write(`${fields.map((f) => printable(f)).join('\t')}\n`);
    }
  },
});

const accept = defineCommand({
  usage: 'usage: botlink broker accept [--config FILE | --admin URL] KEYID --device-id SN',
  help: `Enrolls the waiting key: the whole keyId as the device shows it, and the serial you expect it for (another
is refused). The cloud registers the device; any other key waiting for it is rejected. Prints botId: <id> last.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' }, 'device-id': { type: 'string', required: true } },
  positionals: [{ name: 'keyId', required: true }],
  async run({ flags, args, stdout, stderr, env }) {
    const deviceId = flags['device-id'];
    const api = adminClientFor(flags, env);
    const result = api
      ? await remoteAccept(api, args.keyId, deviceId)
      : await acceptOnStore(brokerConfig(flags.config, env), args.keyId, deviceId);
    stderr.write(`${printable(`accepted key ${args.keyId} for device ${deviceId}; ${result.rejected} other waiting key(s) rejected`)}\n`);
    stdout.write(`botId: ${printable(result.botId)}\n`);
  },
});

function acceptOnStore(config: BrokerConfig, keyId: string, deviceId: string): Promise<{ botId: string; rejected: number }> {
  return withCloud(config, (cloud) => {
    const deps = { register: operatorRegistrar(cloud, systemClock), now: () => systemClock.wallNow() };
    return asOperator(config, (store, by) => acceptPending({ ...deps, store }, keyId, deviceId, by));
  });
}

const reject = defineCommand({
  usage: 'usage: botlink broker reject [--config FILE | --admin URL] KEYID | --vendor-id V [--source CIDR] [--first-asked-before T]',
  help: `Rejects one waiting key (final: it answers 403 rejected from then on), or, for a flood, every key of the vendor
that waits — from --source (an address or a block) and first asked before T (an ISO time, or a span back: 2h, 1d)
when given — in one transaction. Prints how many.`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
    'vendor-id': { type: 'string' },
    source: { type: 'string' },
    'first-asked-before': { type: 'string' },
  },
  positionals: [{ name: 'keyId' }],
  oneOf: [['KEYID', '--vendor-id']],
  needs: [
    ['--source', '--vendor-id'],
    ['--first-asked-before', '--vendor-id'],
  ],
  async run({ flags, args, stdout, env }) {
    const now = systemClock.wallNow();
    const before = flags['first-asked-before'];
    const firstAskedBefore = before === undefined ? undefined : parseSince(before, now);
    if (before !== undefined && firstAskedBefore === undefined)
      throw new UsageError(`--first-asked-before: not a time or a span: '${before}'`);
    const which: RejectWhich =
      args.keyId !== undefined
        ? { keyId: args.keyId }
        : definedOf({ vendorId: flags['vendor-id'], source: flags.source, firstAskedBefore });
    const api = adminClientFor(flags, env);
    const rejected = api
      ? await remoteReject(api, which)
      : await asOperator(brokerConfig(flags.config, env), (store, by) => rejectPending(store, which, now, by));
    stdout.write(`rejected ${rejected} key(s)\n`);
  },
});

/** The fields that are given (exactOptionalPropertyTypes: an absent filter is no key, not undefined). */
function definedOf<T extends Record<string, unknown>>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
