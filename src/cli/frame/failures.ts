import { BotlinkError, messageOf } from '../../protocol/errors.js';
import { RelayRefused } from '../app/relay-errors.js';
import { failureLines, formatFailure } from '../format.js';
import { DaemonNotStarted, Exit, Failure, type FailureKind, UsageError } from './exit.js';

/**
 * How a command ends when it throws, in one table: the exit code of every failure (DESIGN §3.1) and
 * the lines it prints on stderr. Commands throw; the frame (command.ts) asks here.
 */

const KIND_EXIT: Readonly<Record<FailureKind, number>> = {
  failed: Exit.FAILURE,
  data: Exit.DATAERR,
  unavailable: Exit.UNAVAILABLE,
  later: Exit.TEMPFAIL,
  denied: Exit.NOPERM,
  config: Exit.CONFIG,
};

/** The exit code of a failure. */
export function exitOf(err: unknown): number {
  // A mistake on the command line.
  if (err instanceof UsageError) return Exit.USAGE;
  // The command's own words: their kind, else the kind of the error they explain.
  if (err instanceof Failure) return err.kind === undefined ? exitOf(err.cause) : KIND_EXIT[err.kind];
  // The daemon: 78 when its config is wrong, 69 when another daemon runs; anything else 1, which systemd restarts.
  if (err instanceof DaemonNotStarted) {
    if (err.cause instanceof BotlinkError && err.cause.code === 'ERR_CONFIG') return Exit.CONFIG;
    return err.cause instanceof BotlinkError && err.cause.code === 'ERR_ALREADY_RUNNING' ? Exit.UNAVAILABLE : Exit.FAILURE;
  }
  // The relay: no daemon, no access to its socket, or the app's or the observers' places taken.
  if (err instanceof RelayRefused) return Exit.UNAVAILABLE;
  if (err instanceof BotlinkError) {
    switch (err.retry) {
      // A config, a secret file or a log file to fix, or a device to provision first.
      case 'needs-config':
      case 'needs-provisioning':
        return Exit.CONFIG;
      // Data no retry mends: a seed file, an operator's input, a service database.
      case 'fatal':
        return Exit.DATAERR;
      // The service, the network, the clock, the store's lock: worth trying again later.
      default:
        return Exit.UNAVAILABLE;
    }
  }
  // A round lost or ended without a reply, a timeout, and anything unforeseen.
  return Exit.FAILURE;
}

/** What a failure prints after `label` (`botlink status`): the cause, then its fix on a line of its own. */
export function failureText(err: unknown, label: string): string {
  if (err instanceof Failure || err instanceof RelayRefused) return failureLines(label, err.message, err.fix);
  if (err instanceof DaemonNotStarted) return formatFailure(label, err.cause);
  if (err instanceof BotlinkError && (err.code === 'ERR_CONFIG' || err.code === 'ERR_SECRET_FILE') && err.retry === 'needs-config')
    return failureLines(`${label}: configuration error`, messageOf(err), err.fix);
  return formatFailure(label, err);
}
