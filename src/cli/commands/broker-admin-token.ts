/**
 * `botlink broker admin-token create | list | revoke` (DESIGN §3.1, §3.8): the admin API's tokens, made and ended
 * on the broker's store. A token is printed once, alone on the last line, and never again.
 */
import {
  createAdminToken,
  DEFAULT_ADMIN_TOKEN_TTL_S,
  isAdminRole,
  listAdminTokens,
  revokeAdminToken,
} from '../../broker/admin/admin-tokens.js';
import { brokerKeys, readTokenKey } from '../../broker/keys.js';
import { systemClock } from '../../clock.js';
import { defineCommand } from '../frame/command.js';
import { UsageError } from '../frame/exit.js';
import { formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { asOperator, brokerConfig, withStore } from './broker-operator.js';

/**
 * admin-token works on the store alone (DESIGN §3.1): it makes the first token, before any could be used, and the
 * admin API has no route that makes or lists tokens. `--admin` is refused (64) saying so, not ignored.
 */
function storeOnly(admin: string | undefined): void {
  if (admin !== undefined)
    throw new UsageError(
      "admin-token works on the broker's store only (it makes the first admin token; the admin API makes none): run it with --config on the broker's host",
    );
}

const create = defineCommand({
  usage: 'usage: botlink broker admin-token create [--config FILE] --name N --role viewer|operator [--ttl S]',
  help: `A new admin token for the admin API and the console, alone on the last line (blk_…): shown this once, kept by
the store only as an HMAC. viewer reads; operator also acts. Default life ${DEFAULT_ADMIN_TOKEN_TTL_S / 86400} days. A name is
never reused, even after its token was revoked.`,
  flags: {
    config: { type: 'string' },
    admin: { type: 'string' },
    name: { type: 'string', required: true },
    role: { type: 'string', required: true },
    ttl: { type: 'integer', min: 60, max: 366 * 24 * 3600 },
  },
  async run({ flags, stdout, stderr, env }) {
    storeOnly(flags.admin);
    const role = flags.role;
    if (!isAdminRole(role)) throw new UsageError('--role is viewer or operator');
    const config = brokerConfig(flags.config, env);
    const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
    const request = { name: flags.name, role, ttlS: flags.ttl ?? DEFAULT_ADMIN_TOKEN_TTL_S };
    const made = await asOperator(config, (store, by) => createAdminToken(store, keys, request, systemClock.wallNow(), by));
    stderr.write(`${printable(`admin token ${made.name} (${made.role})`)}: expires ${formatTime(made.expiresAt)}\n`);
    stdout.write(`${made.token}\n`);
  },
});

const list = defineCommand({
  usage: 'usage: botlink broker admin-token list [--config FILE] [--json]',
  help: `Every admin token ever made, by name: role, expiry, last use (to the minute) and, once revoked, when (--json:
one array of {name, role, createdAt, expiresAt, lastUsedAt, revokedAt}). Never a token.`,
  flags: { config: { type: 'string' }, admin: { type: 'string' }, json: { type: 'boolean' } },
  async run({ flags, stdout, env }) {
    storeOnly(flags.admin);
    const config = brokerConfig(flags.config, env);
    const tokens = await withStore(config, (store) => listAdminTokens(store));
    if (flags.json) {
      stdout.write(`${printableJson(tokens)}\n`);
      return;
    }
    const now = systemClock.wallNow();
    stdout.write('name\trole\texpires\tlastUsed\tstate\n');
    for (const t of tokens) {
      const state = t.revokedAt !== null ? `revoked ${formatTime(t.revokedAt)}` : t.expiresAt <= now ? 'expired' : 'live';
      const fields = [t.name, t.role, formatTime(t.expiresAt), t.lastUsedAt === null ? 'never' : formatTime(t.lastUsedAt), state];
      stdout.write(`${fields.map((f) => printable(f)).join('\t')}\n`);
    }
  },
});

const revoke = defineCommand({
  usage: 'usage: botlink broker admin-token revoke [--config FILE] NAME',
  help: 'Ends the admin token of this name, and every console session it opened, on every replica from the next request.',
  flags: { config: { type: 'string' }, admin: { type: 'string' } },
  positionals: [{ name: 'name', required: true }],
  async run({ flags, args, stdout, env }) {
    storeOnly(flags.admin);
    const config = brokerConfig(flags.config, env);
    const { sessions } = await asOperator(config, (store, by) => revokeAdminToken(store, args.name, systemClock.wallNow(), by));
    stdout.write(`${printable(`revoked admin token ${args.name}`)}: ${sessions} session(s) ended\n`);
  },
});

export const adminToken = defineCommand({
  usage: `usage: botlink broker admin-token create [--config FILE] --name N --role viewer|operator [--ttl S]
       botlink broker admin-token list   [--config FILE] [--json]
       botlink broker admin-token revoke [--config FILE] NAME`,
  help: `The admin API's tokens (DESIGN §3.8), on the broker's store:
  create   a new token, printed once on the last line; viewer reads, operator also acts
  list     names, roles, expiry, last use
  revoke   ends the token and its console sessions at once`,
  flags: {},
  subcommands: { create: async () => create, list: async () => list, revoke: async () => revoke },
  async run({ stdout }) {
    stdout.write(`${adminToken.usage}\n`);
  },
});
