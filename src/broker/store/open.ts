import type { Clock } from '../../clock.js';
import { BrokerConfigError } from '../config-error.js';
import type { PostgresStoreOptions } from './postgres.js';
import { openSqliteStore } from './sqlite.js';
import type { BrokerStore } from './types.js';

export interface OpenStoreDeps extends PostgresStoreOptions {
  /** The SQLite store's clock (PostgreSQL's is the server's own). */
  clock: Pick<Clock, 'wallNow'>;
}

/**
 * The store the config's `store` key names: `sqlite:PATH`, or a `postgres://` / `postgresql://` URL.
 * The PostgreSQL module (and with it `pg`) is loaded only for a URL, so a broker on SQLite never loads it.
 */
export async function openStore(spec: string, deps: OpenStoreDeps): Promise<BrokerStore> {
  if (spec.startsWith('sqlite:') && spec.length > 'sqlite:'.length) return openSqliteStore(spec.slice('sqlite:'.length), deps.clock);
  if (/^postgres(ql)?:\/\/./.test(spec)) {
    const { openPostgresStore } = await import('./postgres.js');
    return openPostgresStore(spec, {
      ...(deps.poolSize !== undefined && { poolSize: deps.poolSize }),
      ...(deps.lockPoolSize !== undefined && { lockPoolSize: deps.lockPoolSize }),
      ...(deps.password !== undefined && { password: deps.password }),
    });
  }
  throw new BrokerConfigError(
    'store',
    `store must be sqlite:PATH or a postgres:// URL, not ${JSON.stringify(spec.replace(/:[^:@/]*@/, ':***@'))}`,
  );
}
