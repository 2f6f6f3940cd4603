import { type AgentConfig, loadConfig } from '../../agent/config/config.js';
import { Failure } from '../frame/exit.js';
import type { Env } from '../frame/io.js';

/**
 * The agent config a command works on (--config, else $BOTLINK_CONFIG, else the default file); a bad one
 * throws what to fix (78). `makeDeviceKey`: a zero-touch device's key is made here when there is none (run).
 */
export function agentConfig(file: string | undefined, env: Env, opts: { makeDeviceKey?: boolean } = {}): AgentConfig {
  return loadConfig({ ...(file !== undefined && { file }), env, ...opts });
}

/**
 * The local API's socket for a client command: --socket as given (no config read, so an app's user
 * can run it), else the config's localSocket.
 */
export function localSocketFor(flags: { readonly config?: string; readonly socket?: string }, env: Env): string {
  if (flags.socket !== undefined) return flags.socket;
  const { localSocket } = agentConfig(flags.config, env);
  if (localSocket !== null) return localSocket;
  throw new Failure('the local API is turned off (localSocket is "")', {
    fix: 'remove localSocket from the config, or set it to a path, and restart the daemon',
    kind: 'config',
  });
}
