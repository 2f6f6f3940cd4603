import { readFileSync } from 'node:fs';
import { BotlinkError, messageOf } from '../protocol/errors.js';
import { locateJsonError } from '../protocol/json-position.js';

/** Who the reference service knows (DESIGN §3.3). */
export interface SeedVendor {
  vendorId: string;
  bots: string[];
}
export interface SeedAccount {
  accessKeyId: string;
  secretKey: string;
  vendors: SeedVendor[];
}
export interface Seed {
  accounts: SeedAccount[];
}

export const DEFAULT_SEED: Seed = Object.freeze({
  accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }],
});

/** The seed file is unreadable or does not have the shape of DESIGN §3.3; the message names the spot. */
export class SeedError extends BotlinkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_SEED', message, 'fatal', options);
  }
}

type Obj = Record<string, unknown>;

const MAX_ID = 128;

function object(value: unknown, path: string, keys: readonly string[]): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SeedError(`${path || 'seed'}: expected a JSON object`);
  }
  const o = value as Obj;
  for (const key of Object.keys(o)) {
    if (!keys.includes(key)) throw new SeedError(`${join(path, key)}: unknown key`);
  }
  return o;
}

function array(o: Obj, key: string, path: string): unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) throw new SeedError(`${join(path, key)}: expected an array`);
  return v;
}

function id(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') throw new SeedError(`${path}: expected a non-empty string`);
  if (value.length > MAX_ID) throw new SeedError(`${path}: longer than ${MAX_ID} characters`);
  return value;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** Ids the WebSocket and the token tables look up without an account, so they must be unique across the seed. */
function unique(seen: Set<string>, value: string, path: string, what: string): void {
  if (seen.has(value)) throw new SeedError(`${path}: duplicate ${what} '${value}'`);
  seen.add(value);
}

export function parseSeed(value: unknown): Seed {
  const root = object(value, '', ['accounts']);
  const accounts = array(root, 'accounts', '');
  if (accounts.length === 0) throw new SeedError('accounts: needs at least one account');
  const keys = new Set<string>();
  const vendorIds = new Set<string>();
  const botIds = new Set<string>();
  return {
    accounts: accounts.map((rawAccount, a) => {
      const path = `accounts[${a}]`;
      const account = object(rawAccount, path, ['accessKeyId', 'secretKey', 'vendors']);
      const accessKeyId = id(account['accessKeyId'], `${path}.accessKeyId`);
      unique(keys, accessKeyId, `${path}.accessKeyId`, 'accessKeyId');
      return {
        accessKeyId,
        secretKey: id(account['secretKey'], `${path}.secretKey`),
        vendors: array(account, 'vendors', path).map((rawVendor, v) => {
          const vpath = `${path}.vendors[${v}]`;
          const vendor = object(rawVendor, vpath, ['vendorId', 'bots']);
          const vendorId = id(vendor['vendorId'], `${vpath}.vendorId`);
          unique(vendorIds, vendorId, `${vpath}.vendorId`, 'vendorId');
          const bots = array(vendor, 'bots', vpath).map((rawBot, b) => {
            const botId = id(rawBot, `${vpath}.bots[${b}]`);
            unique(botIds, botId, `${vpath}.bots[${b}]`, 'botId');
            return botId;
          });
          return { vendorId, bots };
        }),
      };
    }),
  };
}

export function loadSeedFile(file: string): Seed {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new SeedError(`cannot read seed file ${file}: ${messageOf(err)}`, { cause: err });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Neither JSON.parse's message nor its error goes further: they quote the text, and the secrets are in it.
    const where = locateJsonError(text);
    const at = where ? `: line ${where.line}, column ${where.column} (offset ${where.offset}): ${where.problem}` : '';
    throw new SeedError(`seed file ${file} is not valid JSON${at}`);
  }
  try {
    return parseSeed(value);
  } catch (err) {
    if (err instanceof SeedError) throw new SeedError(`seed file ${file}: ${err.message}`, { cause: err });
    throw err;
  }
}
