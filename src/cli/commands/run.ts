import { Daemon } from '../../agent/daemon/daemon.js';
import { systemClock, systemRandom } from '../../clock.js';
import { createLogger } from '../../log.js';
import { BotlinkError, fixOf, messageOf } from '../../protocol/errors.js';
import { defineCommand } from '../frame/command.js';
import { DaemonNotStarted, Exit, Failure } from '../frame/exit.js';
import { stoppingOn, untilSignal } from '../frame/signals.js';
import { agentConfig } from './agent-config.js';

const USAGE = 'usage: botlink run [--config FILE]';
/** systemd's default stop timeout is 90 s; we promise to be gone well within 5 s. */
const STOP_DEADLINE_MS = 4500;
const FLUSH_DEADLINE_MS = 1000;

/** `botlink run`: the daemon in the foreground until SIGTERM/SIGINT; its answer is whether it stopped cleanly (0) or not (1). */
export const run = defineCommand({
  usage: USAGE,
  // Its failures say `botlink: …`, as the journal shows them.
  label: 'botlink',
  flags: { config: { type: 'string' } },
  // Whatever the daemon leaves running (a hung socket, a timer) must not keep a stopped daemon alive.
  exitAtOnce: true,
  async run({ flags, env }) {
    // Zero-touch (brokerUrl and vendorId, no botId): the daemon makes its own key before it enrolls it.
    const config = agentConfig(flags.config, env, { makeDeviceKey: true });
    let logging: ReturnType<typeof createLogger>;
    try {
      // A log file the daemon cannot open (root-owned after a rotation) is no reason to stay down: stderr is journald.
      logging = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink', stderrIfUnwritable: true });
    } catch (err) {
      throw new Failure(messageOf(err), { fix: fixOf(err), kind: 'config', cause: err });
    }
    const { logger } = logging;
    const daemon = new Daemon(config, { log: logger, env, clock: systemClock, random: systemRandom });

    // A log that cannot drain (disk full, hung SD card) must not keep a crashed daemon alive.
    const closeLog = async (): Promise<void> => {
      await Promise.race([logging.flush(), new Promise((resolve) => setTimeout(resolve, FLUSH_DEADLINE_MS).unref())]);
      logging.close();
    };
    const exitNow = (): void => void closeLog().then(() => process.exit(Exit.FAILURE));
    const crash = (kind: string) => (err: unknown) => {
      logger.fatal({ err, kind }, 'unexpected error: exiting so systemd restarts botlink');
      exitNow();
    };
    process.on('uncaughtException', crash('uncaughtException'));
    process.on('unhandledRejection', crash('unhandledRejection'));
    process.on('SIGHUP', () => {
      logging.reopen();
      logger.info('log file reopened (SIGHUP)');
    });

    const stopped = untilSignal().received.then(async (signal): Promise<number> => {
      logger.info({ signal }, stoppingOn(signal));
      setTimeout(() => {
        logger.error('clean stop took too long: exiting anyway');
        exitNow();
      }, STOP_DEADLINE_MS).unref();
      try {
        await daemon.stop();
        return Exit.OK;
      } catch (err) {
        logger.error({ err }, 'error while stopping');
        return Exit.FAILURE;
      }
    });

    try {
      await daemon.start();
    } catch (err) {
      logger.fatal(err instanceof BotlinkError ? { code: err.code, fix: err.fix } : {}, messageOf(err));
      await daemon.stop().catch(() => undefined);
      await closeLog();
      throw new DaemonNotStarted(err);
    }
    const code = await stopped;
    await closeLog();
    return code;
  },
});
