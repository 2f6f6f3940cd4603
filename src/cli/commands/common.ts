import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, type AgentConfig } from '../../agent/config/config.js';
import { SecretFileError } from '../../agent/config/secret.js';
import { BotlinkError, messageOf } from '../../protocol/errors.js';
import { Exit, UsageError } from '../frame/exit.js';
import { failureLines, formatFailure } from '../format.js';

/** parseArgs with strict options; mistakes become UsageError (exit 64). */
export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T, usage: string) {
  try {
    return parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false });
  } catch (err) {
    throw new UsageError(`${messageOf(err)}\n${usage}`);
  }
}

/** A `--timeout S` flag: S seconds as a positive number, else a usage error. */
export function timeoutFlag(value: string | undefined, defaultS: number, usage: string): number {
  const seconds = value === undefined ? defaultS : Number(value);
  if (!(Number.isFinite(seconds) && seconds > 0))
    throw new UsageError(`--timeout must be a positive number of seconds, got '${value}'\n${usage}`);
  return seconds;
}

/** Loads the agent config for a command; a bad config prints what to fix and maps to exit 78. */
export function loadCommandConfig(file: string | undefined): AgentConfig | number {
  try {
    return loadConfig({ ...(file !== undefined && { file }), env: process.env });
  } catch (err) {
    if (err instanceof ConfigError || err instanceof SecretFileError) {
      process.stderr.write(formatFailure('botlink: configuration error', err));
      return Exit.CONFIG;
    }
    throw err;
  }
}

/** The exit code a failure of this retry class deserves. */
export function exitFor(err: unknown): number {
  if (!(err instanceof BotlinkError)) return Exit.FAILURE;
  switch (err.retry) {
    case 'needs-config':
    case 'needs-provisioning':
      return Exit.CONFIG;
    case 'fatal':
      return Exit.DATAERR;
    default:
      return Exit.UNAVAILABLE;
  }
}

/** The opening of a command taking --config and --json: --help prints usage (0), a bad config exits 78. */
export function configAndJson(argv: string[], usage: string): { config: AgentConfig; json: boolean } | number {
  const { values } = parseFlags(argv, { config: { type: 'string' }, json: { type: 'boolean' } }, usage);
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return Exit.OK;
  }
  const config = loadCommandConfig(values.config);
  if (typeof config === 'number') return config;
  return { config, json: values.json === true };
}

/**
 * The local API's socket for a client command: --socket as given (no config read, so an app's user
 * can run it), else the config's localSocket; or the exit code of a bad config or a turned-off API.
 */
export function localSocketFor(command: string, flags: { config?: string | undefined; socket?: string | undefined }): string | number {
  if (flags.socket !== undefined) return flags.socket;
  const config = loadCommandConfig(flags.config);
  if (typeof config === 'number') return config;
  if (config.localSocket !== null) return config.localSocket;
  process.stderr.write(
    failureLines(
      command,
      'the local API is turned off (localSocket is "")',
      'remove localSocket from the config, or set it to a path, and restart the daemon',
    ),
  );
  return Exit.CONFIG;
}
