import type { Clock } from '../../clock.js';
import { BrokerConfigError } from '../config.js';
import { openSqliteStore } from './sqlite.js';
import type { BrokerStore } from './types.js';

export interface OpenStoreDeps {
  /** The SQLite store's clock. */
  clock: Pick<Clock, 'wallNow'>;
}

/** The store the config's `store` key names: `sqlite:PATH` (PostgreSQL follows). */
export async function openStore(spec: string, deps: OpenStoreDeps): Promise<BrokerStore> {
  if (spec.startsWith('sqlite:') && spec.length > 'sqlite:'.length) return openSqliteStore(spec.slice('sqlite:'.length), deps.clock);
  throw new BrokerConfigError(
    'store',
    `store must be sqlite:PATH or a postgres:// URL, not ${JSON.stringify(spec.replace(/:[^:@/]*@/, ':***@'))}`,
  );
}
