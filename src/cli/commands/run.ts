import { ConfigError } from '../../agent/config/config.js';
import { Daemon } from '../../agent/daemon/daemon.js';
import { systemClock, systemRandom } from '../../clock.js';
import { createLogger } from '../../log.js';
import { BotlinkError, messageOf } from '../../protocol/errors.js';
import { loadCommandConfig, parseFlags } from './common.js';
import { Exit } from '../frame/exit.js';
import { formatFailure } from '../format.js';

const USAGE = 'usage: botlink run [--config FILE]';
/** systemd's default stop timeout is 90 s; we promise to be gone well within 5 s. */
const STOP_DEADLINE_MS = 4500;
const FLUSH_DEADLINE_MS = 1000;

/** `botlink run`: the daemon in the foreground until SIGTERM/SIGINT. */
export async function run(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, { config: { type: 'string' } }, USAGE);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  const config = loadCommandConfig(values.config);
  if (typeof config === 'number') return config;
  let logging: ReturnType<typeof createLogger>;
  try {
    // A log file the daemon cannot open (root-owned after a rotation) is no reason to stay down: stderr is journald.
    logging = createLogger({ file: config.logFile, level: config.logLevel, name: 'botlink', stderrIfUnwritable: true });
  } catch (err) {
    process.stderr.write(formatFailure('botlink', err));
    return Exit.CONFIG;
  }
  const { logger } = logging;
  const daemon = new Daemon(config, { log: logger, env: process.env, clock: systemClock, random: systemRandom });

  const exit = async (code: number): Promise<never> => {
    // A log that cannot drain (disk full, hung SD card) must not keep a crashed daemon alive.
    await Promise.race([logging.flush(), new Promise((resolve) => setTimeout(resolve, FLUSH_DEADLINE_MS).unref())]);
    logging.close();
    process.exit(code);
  };
  const crash = (kind: string) => (err: unknown) => {
    logger.fatal({ err, kind }, 'unexpected error: exiting so systemd restarts botlink');
    void exit(Exit.FAILURE);
  };
  process.on('uncaughtException', crash('uncaughtException'));
  process.on('unhandledRejection', crash('unhandledRejection'));
  process.on('SIGHUP', () => {
    logging.reopen();
    logger.info('log file reopened (SIGHUP)');
  });

  const stopped = new Promise<number>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'stopping');
      setTimeout(() => {
        logger.error('clean stop took too long: exiting anyway');
        void exit(Exit.FAILURE);
      }, STOP_DEADLINE_MS).unref();
      daemon.stop().then(
        () => resolve(Exit.OK),
        (err: unknown) => {
          logger.error({ err }, 'error while stopping');
          resolve(Exit.FAILURE);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });

  try {
    await daemon.start();
  } catch (err) {
    logger.fatal(err instanceof BotlinkError ? { code: err.code, fix: err.fix } : {}, messageOf(err));
    process.stderr.write(formatFailure('botlink', err));
    await daemon.stop().catch(() => undefined);
    // A config error found only now (the socket's folder, a file in the socket's place) is still one: 78.
    if (err instanceof ConfigError) return exit(Exit.CONFIG);
    return exit(err instanceof BotlinkError && err.code === 'ERR_ALREADY_RUNNING' ? Exit.UNAVAILABLE : Exit.FAILURE);
  }
  return exit(await stopped);
}
