import type { Clock } from '../../clock.js';
import { BrokerConfigError } from '../config.js';
import { openSqliteStore } from './sqlite.js';
import type { BrokerStore } from './types.js';

/** The store a `store` setting names: `sqlite:PATH`, or a postgres:// URL. */
export async function openStore(spec: string, clock: Pick<Clock, 'wallNow'>): Promise<BrokerStore> {
  if (spec.startsWith('sqlite:')) return openSqliteStore(spec.slice('sqlite:'.length), clock);
  throw new BrokerConfigError('store', `store must be sqlite:PATH or a postgres:// URL, got ${spec.split(':', 1)[0]}:…`);
}
