import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { ConfigError, loadConfig } from '../../agent/config/config.js';
import { Daemon } from '../../agent/daemon/daemon.js';
import { systemClock, systemRandom } from '../../clock.js';
import { createLogger } from '../../log.js';
import { describeError } from '../../protocol/errors.js';
import { createReferenceService } from '../../service/server.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import { untilSignal } from '../frame/signals.js';
import { readableLine } from '../log-lines.js';
import { printable } from '../printable.js';
import { acceptWhenPending, type BrokerDevice, brokerDevice, type DemoAccount, ZERO_TOUCH_SERIAL, zeroTouchDevice } from './demo-broker.js';

const USAGE = `usage: botlink demo [--sign] [--duration S]   (default: until Ctrl-C)

The reference service (the cloud), the vendor's broker and a device in broker mode on loopback, a
small app conversing through the device; the device holds no account secret. A second board enrolls
zero-touch: pending until the demo's operator accepts its keyId, then connected. --sign: the device
signs getToken itself with the account secret, as before broker mode.`;

/** Lifetimes of seconds so one minute shows every transition of the token state table. */
const ACCESS_TTL_S = 8;
const REFRESH_TTL_S = 30;
const DROP_EVERY_MS = 20_000;
const DEMO_SECRET = 'demo-secret-key';
/** The app asks this often: several rounds between two drops. */
const APP_EVERY_S = 3;
/** The app leaves by itself once the daemon's stop closes the relay; this bounds the wait. */
const APP_EXIT_WAIT_MS = 5000;

/**
 * `botlink demo`: the reference service, the vendor's broker and the agent on loopback. The device
 * enrolls its own key with a code and asks the broker for every token (`--sign`: it starts with only a
 * vendorId, provisions itself, then signs, refreshes and re-signs itself), connects and rides out a
 * forced drop of its WebSocket every 20 s. A small app, a process of its own (`botlink demo-app`),
 * converses through the daemon's relay all along.
 */
export const demo = defineCommand({
  usage: USAGE,
  flags: { duration: { type: 'seconds' }, sign: { type: 'boolean' } },
  async run({ flags }) {
    const durationS = flags.duration;
    // The wait before the first line: its reader may stop the demo at once, and a signal with none would kill it
    // (code null) with its folder left behind. One that comes before the try below ends the demo there.
    const stop = untilSignal();
    const dir = mkdtempSync(join(tmpdir(), 'botlink-demo-'));
    // The demo's stdout is read by a person: each line rendered, peers' bytes escaped (issue 27).
    const logging = createLogger({ file: '-', level: 'info', pretty: (entry) => `${printable(readableLine(entry).slice(0, -1))}\n` });
    let timer: NodeJS.Timeout | undefined;
    const finished = new Promise<void>((resolve) => {
      void stop.received.then(() => resolve());
      if (durationS !== undefined) timer = setTimeout(resolve, durationS * 1000);
    });
    try {
      await runDemo(dir, logging.logger, finished, durationS, flags.sign === true ? 'sign' : 'broker');
    } catch (err) {
      // The demo writes its own config: one it refuses says the temp folder will not do.
      if (!(err instanceof ConfigError)) throw err;
      throw new Failure(`cannot start: ${err.message}`, {
        fix: 'run it with TMPDIR set to a short folder: TMPDIR=/tmp botlink demo',
        cause: err,
      });
    } finally {
      // Whatever failed, the folder goes: it holds the demo's secret.
      clearTimeout(timer);
      stop.cancel();
      await logging.flush();
      logging.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

/** The demo in `dir` until `finished`; what it started is stopped whether it returns or throws. */
async function runDemo(
  dir: string,
  log: Logger,
  finished: Promise<void>,
  durationS: number | undefined,
  mode: 'sign' | 'broker',
): Promise<void> {
  const svc = await createReferenceService({
    accessTtlS: ACCESS_TTL_S,
    refreshTtlS: REFRESH_TTL_S,
    seed: {
      accounts: [
        { accessKeyId: DEMO_ACCOUNT.accessKeyId, secretKey: DEMO_SECRET, vendors: [{ vendorId: DEMO_ACCOUNT.vendorId, bots: [] }] },
      ],
    },
  });
  log.info({ url: svc.url, accessTtlS: ACCESS_TTL_S, refreshTtlS: REFRESH_TTL_S }, 'demo: reference token service listening');
  const dropper = setInterval(() => {
    log.info('demo: the service drops every WebSocket now');
    svc.faults.dropAllSockets();
  }, DROP_EVERY_MS);
  let daemon: Daemon | undefined;
  let app: DemoApp | undefined;
  let viaBroker: BrokerDevice | undefined;
  let second: SecondBoard | undefined;
  let over = false;
  try {
    if (mode === 'broker') viaBroker = await brokerDevice(dir, svc.url, DEMO_ACCOUNT, deviceSettings(join(dir, 'device')), log);
    const config = loadConfig({ file: viaBroker?.configFile ?? writeDemoConfig(dir, svc.url), env: {} });
    daemon = new Daemon(config, { log: log.child({ part: 'agent' }), env: {}, clock: systemClock, random: systemRandom });
    await daemon.start();
    log.info(`demo: running${durationS === undefined ? ' — Ctrl-C to stop' : ` for ${durationS} s`}; state in ${dir}`);
    if (viaBroker) {
      sayWhereTheSecretIs(viaBroker, log);
      second = zeroTouchBoard(dir, svc.url, viaBroker, log, () => over);
    }
    // The demo's config leaves localSocket at its default, so it is never off here.
    if (config.localSocket) app = startApp(config.localSocket, (line) => log.info(line));
    await finished;
  } finally {
    over = true;
    clearInterval(dropper);
    const link = daemon?.link?.status;
    const secondState = second?.state();
    await second?.daemon.stop();
    await second?.settled;
    await daemon?.stop();
    const rounds = await app?.stopped();
    await viaBroker?.broker.close();
    await svc.close();
    // A demo that got as far as its daemon says how it went.
    if (daemon) {
      const { getToken, refreshToken, register } = svc.stats;
      log.info(
        {
          mode,
          ...(viaBroker && { deviceFilesHoldingTheSecret: viaBroker.secretCheck().holding }),
          ...(secondState !== undefined && { zeroTouchBoard: secondState }),
          registered: register.ok,
          signed: getToken.ok,
          refreshed: refreshToken.ok,
          reconnects: link?.reconnects ?? 0,
          appRounds: rounds?.ok ?? 0,
          appRoundsLost: rounds?.lost ?? 0,
        },
        'demo: summary',
      );
    }
  }
}

const DEMO_ACCOUNT: DemoAccount = { accessKeyId: 'demo-ak', secret: DEMO_SECRET, vendorId: 'demo-vendor', deviceId: 'demo-device-0001' };

/** What the device's config holds in either mode, for a device whose files live in `dir`. */
function deviceSettings(dir: string): Record<string, unknown> {
  return { stateDir: join(dir, 'state'), runtimeDir: join(dir, 'run'), logFile: '-', linkBackoffBaseMs: 500 };
}

/** Signing mode: the device's secret and config.json in `dir`, for the service at `baseUrl`; the config's path. */
function writeDemoConfig(dir: string, baseUrl: string): string {
  writeFileSync(join(dir, 'secret-key'), `${DEMO_SECRET}\n`, { mode: 0o600 });
  const configFile = join(dir, 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      baseUrl,
      accessKeyId: DEMO_ACCOUNT.accessKeyId,
      secretKeyFile: join(dir, 'secret-key'),
      vendorId: DEMO_ACCOUNT.vendorId,
      deviceId: DEMO_ACCOUNT.deviceId,
      ...deviceSettings(dir),
    }),
  );
  return configFile;
}

interface SecondBoard {
  daemon: Daemon;
  /** Where it stands: its key's state, or `connected` once its link is. */
  state(): string;
  /** The operator's step and the board's connection, narrated; never rejects. */
  settled: Promise<void>;
}

/** A second board enrolling zero-touch beside the first (DESIGN §3.7): pending, accepted by the operator, connected. */
function zeroTouchBoard(dir: string, cloudUrl: string, via: BrokerDevice, log: Logger, over: () => boolean): SecondBoard {
  const boardDir = join(dir, 'device-2');
  log.info(`demo: a second board, ${ZERO_TOUCH_SERIAL}, boots the fleet's image: baseUrl, brokerUrl and vendorId, no code`);
  const configFile = zeroTouchDevice(boardDir, cloudUrl, via.broker, DEMO_ACCOUNT.vendorId, {
    ...deviceSettings(boardDir),
    localSocket: '',
  });
  const daemon = new Daemon(loadConfig({ file: configFile, env: {}, makeDeviceKey: true }), {
    log: log.child({ part: 'agent-2' }),
    env: {},
    clock: systemClock,
    random: systemRandom,
  });
  const identity = () => daemon.statusDoc().identity;
  const state = (): string => (daemon.link?.status.state === 'connected' ? 'connected' : (identity().state ?? 'starting'));
  const pendingKeyId = () => (identity().state === 'pending' ? identity().keyId : undefined);
  const settled = (async () => {
    const started = daemon.start();
    await acceptWhenPending(via.operator, pendingKeyId, over, log);
    await started;
    while (!over() && state() !== 'connected') await new Promise((resolve) => setTimeout(resolve, 200));
    if (!over()) log.info(`demo: ${ZERO_TOUCH_SERIAL} enrolled zero-touch and connected: botId ${identity().id}`);
  })().catch((err: unknown) => log.error(`demo: the zero-touch board: ${describeError(err)}`));
  return { daemon, state, settled };
}

/** The point of broker mode, checked rather than claimed: no file of the device holds the account secret. */
function sayWhereTheSecretIs(device: BrokerDevice, log: Logger): void {
  const { files, holding } = device.secretCheck();
  if (holding === 0) log.info(`demo: the device's ${files} files hold no account secret: only the broker has it`);
  else log.error(`demo: ${holding} of the device's ${files} files hold the account secret: broker mode failed its point`);
}

interface DemoApp {
  /** Waits for the app to leave (the daemon's stop closes its relay), then says how its rounds went. */
  stopped(): Promise<{ ok: number; lost: number }>;
}

/** `botlink demo-app` as a child process, like a real app; its lines go to `print` as they come. */
function startApp(socketPath: string, print: (line: string) => void): DemoApp {
  const child = spawn(process.execPath, [process.argv[1]!, 'demo-app', '--socket', socketPath, '--every', String(APP_EVERY_S)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const rounds = { ok: 0, lost: 0 };
  const onLine = (line: string): void => {
    if (line.startsWith('app: ← ')) rounds.ok++;
    else if (/^app: round \d+ lost/.test(line)) rounds.lost++;
    print(line);
  };
  createInterface({ input: child.stdout }).on('line', onLine);
  createInterface({ input: child.stderr }).on('line', print);
  const exited = new Promise<void>((done) => child.once('close', () => done()));
  return {
    async stopped() {
      const bound = setTimeout(() => child.kill('SIGKILL'), APP_EXIT_WAIT_MS);
      await exited;
      clearTimeout(bound);
      return rounds;
    },
  };
}
