/**
 * What every `botlink broker` operator command shares (DESIGN §3.1, §3.7): the broker's config, its store
 * opened for the command's length, the operator named and audited, and the cloud asked as the broker asks it.
 */
import { userInfo } from 'node:os';
import { AuditTrail } from '../../broker/audit/trail.js';
import { type BrokerConfig, configFileFor, loadBrokerConfig } from '../../broker/config.js';
import { readAccountSecret, readStorePassword } from '../../broker/keys.js';
import type { Operator } from '../../broker/operator.js';
import { openStore } from '../../broker/store/open.js';
import type { BrokerStore } from '../../broker/store/types.js';
import { CloudClient } from '../../cloud/client.js';
import { systemClock } from '../../clock.js';
import { createLogger } from '../../log.js';
import type { Env } from '../frame/io.js';

/** The broker's config: --config, else $BOTLINK_BROKER_CONFIG, else the default file; a bad one throws what to fix (78). */
export function brokerConfig(file: string | undefined, env: Env): BrokerConfig {
  return loadBrokerConfig(configFileFor(file, env), env);
}

export async function withStore<T>(config: BrokerConfig, fn: (store: BrokerStore) => Promise<T>): Promise<T> {
  const password = readStorePassword(config.storePasswordFile);
  const store = await openStore(config.store, { clock: systemClock, ...(password !== undefined && { password }) });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * Runs `fn` on the broker's store as the operator: their actions audited beside the broker's own, in its
 * store and its logFile, every row written before the store closes.
 */
export async function asOperator<T>(config: BrokerConfig, fn: (store: BrokerStore, by: Operator) => Promise<T>): Promise<T> {
  const logging = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink-broker' });
  try {
    return await withStore(config, async (store) => {
      const audit = new AuditTrail({ store, log: logging.logger, clock: systemClock });
      try {
        return await fn(store, { actor: operatorActor(), audit });
      } finally {
        await audit.close();
      }
    });
  } finally {
    await logging.flush();
    logging.close();
  }
}

/** `cli:<OS user>`: who ran the command, as the audit names them (a uid with no name: its number). */
function operatorActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return `cli:uid-${process.getuid?.() ?? 'unknown'}`;
  }
}

/** Runs `fn` with a client of the broker's cloud, signing with the account secret as the broker does; closed after. */
export async function withCloud<T>(config: BrokerConfig, fn: (cloud: CloudClient) => Promise<T>): Promise<T> {
  const secret = readAccountSecret(config.secretKeyFile);
  const cloud = new CloudClient({
    baseUrl: config.baseUrl,
    accessKeyId: config.accessKeyId,
    secretKey: { reveal: () => secret },
    clock: systemClock,
  });
  try {
    return await fn(cloud);
  } finally {
    await cloud.close();
  }
}
