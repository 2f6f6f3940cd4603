// The vendor's side of a broker test: the account secret, a token key and the broker's settings in a folder.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface BrokerFiles {
  /** The cloud the broker signs for. */
  cloudUrl: string;
  /** The account secret, written to `<dir>/secret-key`. */
  secret: string;
  /** `<dir>/token-key`'s content: 32 raw bytes, or 64 hex characters. Default 32 bytes of 7. */
  tokenKey?: Buffer | string;
  /** Default `sqlite:<dir>/state/broker.db`: a folder apart from the token key's. */
  store?: string;
  /** More settings (limits, another listen …), over the defaults. */
  extra?: Record<string, unknown>;
}

/** Writes the secret and the token key into `dir` (0600) and returns the broker's settings for them (accessKeyId AK, loopback). */
export function brokerSettings(dir: string, o: BrokerFiles): Record<string, unknown> {
  writeFileSync(join(dir, 'secret-key'), o.secret, { mode: 0o600 });
  writeFileSync(join(dir, 'token-key'), o.tokenKey ?? Buffer.alloc(32, 7), { mode: 0o600 });
  return {
    listen: '127.0.0.1:0',
    baseUrl: o.cloudUrl,
    accessKeyId: 'AK',
    secretKeyFile: join(dir, 'secret-key'),
    tokenKeyFile: join(dir, 'token-key'),
    store: o.store ?? `sqlite:${join(dir, 'state', 'broker.db')}`,
    logFile: join(dir, 'broker.log'),
    ...o.extra,
  };
}

/** brokerSettings written as `<dir>/<name>`; the config file's path. */
export function writeBrokerConfig(dir: string, o: BrokerFiles, name = 'config.json'): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(brokerSettings(dir, o)));
  return file;
}
