import { pino } from 'pino';
import type { AgentConfig } from '../../agent/config/config.js';
import type { AgentRuntime } from '../../agent/daemon/runtime.js';
import { createLogger, type BotlinkLogger } from '../../log.js';
import { BotlinkError, describeError } from '../../protocol/errors.js';
import type { Identity } from '../../protocol/wire.js';
import { Failure } from '../frame/exit.js';
import type { Output } from '../frame/io.js';
import { explainFailure } from '../format.js';
import { printable } from '../printable.js';

/** The configured log file at the configured level; never stdout, which carries the command's output. One it cannot open is said on `stderr`. */
export function openCommandLog(config: AgentConfig, command: string, stderr: Output): BotlinkLogger {
  const silent = { logger: pino({ level: 'silent' }), reopen() {}, flush: () => Promise.resolve(), close() {} };
  // '-' means stdout for the daemon (journald); a command's stdout is its answer, so it logs nowhere.
  if (config.logFile === '-') return silent;
  try {
    const logging = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink' });
    return { ...logging, logger: logging.logger.child({ command }) };
  } catch (err) {
    stderr.write(`botlink ${command}: not logging: ${printable(describeError(err))}\n`);
    return silent;
  }
}

/** The failure in a technician's words: the cause and, when one is known, the fix; its exit code is the cause's. */
export function explained(err: unknown, config: AgentConfig, identity: Identity): Failure {
  const { cause, fix } = explainFailure(err, { ...config, identity });
  return new Failure(cause, { fix, cause: err });
}

/**
 * Runs `work` on a view of `rt` whose token managers give up at their first failure or at the
 * deadline: a command reports the cause at once instead of retrying in the background. The
 * deadline's error names what did not come (`no token within 1 s`); the command's name is the
 * report's to add.
 */
export async function withDeadline<T>(
  rt: AgentRuntime,
  ms: number,
  awaited: string,
  work: (rt: AgentRuntime, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  // Held open: the command is waiting on this deadline and must not exit before it.
  const cancel = rt.clock.setTimer(
    ms,
    () => abort.abort(new BotlinkError('ERR_DEADLINE', `no ${awaited} within ${ms / 1000} s`, 'retry-backoff')),
    { ref: true },
  );
  const failing: AgentRuntime = {
    ...rt,
    tokensFor(identity, onChange) {
      const manager = rt.tokensFor(identity, () => {
        onChange?.();
        if (manager.snapshot().lastError) abort.abort();
      });
      return manager;
    },
  };
  try {
    return await work(failing, abort.signal);
  } finally {
    cancel();
  }
}
