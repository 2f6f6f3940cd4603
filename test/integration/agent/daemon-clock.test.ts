import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/agent/config/config.js';
import { Daemon } from '../../../src/agent/daemon/daemon.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

/**
 * The daemon in this process on a ManualClock, against the real reference service whose wall clock is
 * the same manual clock: its provisioning retry waits exactly the drawn backoff, then registers.
 */

const { cleanups, service, device, tempDir } = useHarness();

interface Line {
  msg: string;
  [field: string]: unknown;
}

/** The daemon's log as parsed lines, and a promise for the first line matching a test. */
class LogLines {
  readonly lines: Line[] = [];
  readonly #waits: { test: (l: Line) => boolean; resolve: (l: Line) => void }[] = [];

  write(text: string): void {
    const line = JSON.parse(text) as Line;
    this.lines.push(line);
    for (const w of this.#waits.filter((x) => x.test(line))) {
      this.#waits.splice(this.#waits.indexOf(w), 1);
      w.resolve(line);
    }
  }

  next(test: (l: Line) => boolean): Promise<Line> {
    return new Promise((resolve) => this.#waits.push({ test, resolve }));
  }
}

describe('the daemon on a manual clock', () => {
  it('retries a failed registration after exactly the drawn backoff (0.5 of a 1 s base), then connects as the new bot', async () => {
    const clock = new ManualClock();
    const svc = await service(DAEMON_SEED, { now: () => clock.wallNow() });
    svc.faults.nextResponses('http-503-html', 1, '/device/register');
    const d = device(svc, { vendorId: 'V1', deviceId: 'SN-0042', tokenBackoffBaseMs: 1000, tokenBackoffCapMs: 60_000 });
    const syncFile = join(tempDir('botlink-sync-'), 'synchronized');
    writeFileSync(syncFile, '');
    const log = new LogLines();
    const daemon = new Daemon(loadConfig({ file: d.configFile, env: {} }), {
      log: pino({ level: 'debug' }, log),
      env: {},
      clock,
      random: () => 0.5,
      timeSync: { syncFile },
    });
    cleanups.push(() => daemon.stop());

    const failed = log.next((l) => l.msg.startsWith('provisioning failed'));
    const started = daemon.start();
    expect(await failed).toMatchObject({ code: 'ERR_HTTP_STATUS', retryInMs: 500 });
    expect(daemon.statusDoc().identity).toEqual({ kind: 'vendor', id: 'V1', mode: 'sign' });
    // The retry's sleep, then the daemon's keep-alive (the longest timer Node takes).
    expect(clock.pending()).toEqual([500, 2 ** 31 - 1]);
    await clock.advance(499);
    expect(svc.stats.register.ok).toBe(0);
    await clock.advance(1);
    await started;
    expect(svc.stats.register.ok).toBe(1);
    expect(daemon.statusDoc().identity).toEqual({ kind: 'bot', id: expect.stringMatching(/\S/), mode: 'sign' });
  });
});
