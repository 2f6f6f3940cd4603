import type { Logger } from 'pino';
import { unixDgram } from '../../native.js';
import type { Cancel, Clock } from '../../clock.js';

/** sd_notify(3) for a Type=notify unit; every method is a no-op when NOTIFY_SOCKET is unset. */
export interface Notifier {
  ready(status: string): void;
  status(line: string): void;
  stopping(): void;
  close(): void;
}

/**
 * Sends READY/STATUS/STOPPING and, when systemd asks for it (WATCHDOG_USEC), WATCHDOG=1 at half the
 * interval from the event loop — so a blocked loop stops the pings and systemd restarts us.
 */
export function createNotifier(env: NodeJS.ProcessEnv, log: Logger, clock: Pick<Clock, 'setTimer'>): Notifier {
  const path = socketPath(env['NOTIFY_SOCKET']);
  if (path === undefined) return { ready() {}, status() {}, stopping() {}, close() {} };
  const socket = unixDgram().createSocket('unix_dgram');
  socket.on('error', (err: Error) => log.warn({ err: err.message }, 'sd_notify failed'));
  const send = (message: string): void => {
    const buf = Buffer.from(message);
    socket.send(buf, 0, buf.length, path);
  };
  const intervalMs = watchdogIntervalMs(env);
  let cancelWatchdog: Cancel | undefined;
  // Armed again after each ping, unref'd: the pings never keep the process alive, only report it is.
  const ping = (ms: number): void => {
    send('WATCHDOG=1');
    cancelWatchdog = clock.setTimer(ms, () => ping(ms));
  };
  if (intervalMs !== undefined) ping(intervalMs);
  let lastStatus = '';
  return {
    ready: (status) => {
      lastStatus = oneLine(status);
      send(`READY=1\nSTATUS=${lastStatus}\nMAINPID=${process.pid}`);
    },
    status: (line) => {
      const next = oneLine(line);
      if (next === lastStatus) return;
      lastStatus = next;
      send(`STATUS=${next}`);
    },
    stopping: () => send('STOPPING=1'),
    close: () => {
      cancelWatchdog?.();
      socket.close();
    },
  };
}

/** '@name' is an abstract socket: its first byte is NUL on the wire. */
function socketPath(value: string | undefined): string | undefined {
  if (!value) return undefined;
  return value.startsWith('@') ? `\0${value.slice(1)}` : value;
}

/** Half of WATCHDOG_USEC, when the watchdog is meant for this process. */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv): number | undefined {
  const usec = Number(env['WATCHDOG_USEC']);
  if (!Number.isFinite(usec) || usec <= 0) return undefined;
  const pid = env['WATCHDOG_PID'];
  if (pid !== undefined && pid !== '' && Number(pid) !== process.pid) return undefined;
  return Math.max(1, Math.floor(usec / 2000));
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 200);
}
