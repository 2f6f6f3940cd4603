import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';

/** A configuration problem; `key` is the offending key ('config' for the file as a whole). */
export class ConfigError extends BotlinkError {
  readonly key: string;

  constructor(key: string, message: string, options?: BotlinkErrorOptions) {
    super('ERR_CONFIG', message, 'needs-config', options);
    this.key = key;
  }
}
