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
