/** The broker's configuration error (config.ts), in a module of its own so the parts of the parsing can share it. */
import { BotlinkError, type BotlinkErrorOptions } from '../protocol/errors.js';

/** A configuration problem; `key` names the offending key ('config' for the file as a whole). */
export class BrokerConfigError extends BotlinkError {
  readonly key: string;

  constructor(key: string, message: string, options?: BotlinkErrorOptions) {
    super('ERR_CONFIG', message, 'needs-config', options);
    this.key = key;
  }
}
