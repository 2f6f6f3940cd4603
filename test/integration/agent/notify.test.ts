import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createNotifier } from '../../../src/agent/daemon/notify.js';
import { unixDgram } from '../../../src/native.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const { cleanups, tempDir } = useHarness();

/** A real sd_notify socket: every datagram the notifier sends, and a promise for the n-th. */
function listener(): { path: string; received: string[]; nth(n: number): Promise<void> } {
  const path = join(tempDir('botlink-notify-'), 'notify.sock');
  const received: string[] = [];
  const waits: { n: number; resolve: () => void }[] = [];
  const socket = unixDgram().createSocket('unix_dgram', (msg: Buffer) => {
    received.push(msg.toString());
    for (const w of waits.filter((x) => x.n <= received.length)) {
      waits.splice(waits.indexOf(w), 1);
      w.resolve();
    }
  });
  socket.bind(path);
  cleanups.push(() => socket.close());
  return {
    path,
    received,
    nth: (n) => (received.length >= n ? Promise.resolve() : new Promise((resolve) => waits.push({ n, resolve }))),
  };
}

describe('sd_notify watchdog on a manual clock', () => {
  it('pings at once, then every half WATCHDOG_USEC on the clock, and never after close()', async () => {
    const sd = listener();
    const clock = new ManualClock();
    const notifier = createNotifier({ NOTIFY_SOCKET: sd.path, WATCHDOG_USEC: '400000' }, pino({ level: 'silent' }), clock);
    await sd.nth(1);
    expect(clock.pending()).toEqual([200]);
    await clock.advance(199);
    expect(clock.pending()).toEqual([1]);
    await clock.advance(1);
    await sd.nth(2);
    expect(clock.pending()).toEqual([200]);
    notifier.stopping();
    await sd.nth(3);
    notifier.close();
    expect(clock.pending()).toEqual([]);
    expect(sd.received).toEqual(['WATCHDOG=1', 'WATCHDOG=1', 'STOPPING=1']);
  });

  it('sets no timer when systemd asks for no watchdog', () => {
    const sd = listener();
    const clock = new ManualClock();
    const notifier = createNotifier({ NOTIFY_SOCKET: sd.path }, pino({ level: 'silent' }), clock);
    cleanups.push(() => notifier.close());
    expect(clock.pending()).toEqual([]);
  });
});
