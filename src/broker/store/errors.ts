import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';

/** The broker's store cannot be used: the message names the file or the server (never a password). */
export class BrokerStoreError extends BotlinkError {
  constructor(code: 'ERR_STORE_VERSION' | 'ERR_STORE_ACCESS', message: string, options?: BotlinkErrorOptions) {
    super(code, message, code === 'ERR_STORE_VERSION' ? 'fatal' : 'needs-config', options);
  }
}

/** A schema newer than this release knows: written by a newer broker, so never migrated down or guessed at. */
export function newerSchema(where: string, version: number, known: number): BrokerStoreError {
  return new BrokerStoreError(
    'ERR_STORE_VERSION',
    `${where} has broker schema version ${version} but this botlink knows only up to ${known}: it was written by a newer release`,
    { fix: 'upgrade botlink on this host to the release the other brokers run' },
  );
}

/**
 * The store did not answer a request (PostgreSQL down or refusing, SQLite busy or its disk full): a
 * passing fault, told to the device as 503 store-unavailable with Retry-After, never as a broker failure.
 */
export class StoreUnavailable extends BotlinkError {
  constructor(message: string, options?: BotlinkErrorOptions) {
    super('ERR_STORE_ACCESS', message, 'retry-backoff', options);
  }
}
