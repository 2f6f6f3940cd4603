import { type FSWatcher, mkdirSync, readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { STATUS_PACE } from '../../../src/agent/daemon/publish.js';
import type { StatusDoc } from '../../../src/agent/daemon/status.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';

// Observers' churn (issue 27 LOW): each attach and each detach changes status.relay; written one by one,
// 1,000 attaches were 2,000 renames of status.json (an SD card's wear, were runtimeDir on one).

const ATTACHES = 1000;
const { cleanups, service, device, daemon } = useHarness();

/** Every replacement of <runtimeDir>/status.json as it lands (inotify's moved-to), with the document it put there. */
class StatusWrites {
  readonly writes: { at: number; doc: StatusDoc }[] = [];
  readonly #watcher: FSWatcher;
  readonly #file: string;
  #waits: { test: (doc: StatusDoc) => boolean; resolve: (at: number) => void }[] = [];

  constructor(runtimeDir: string) {
    mkdirSync(runtimeDir, { recursive: true });
    this.#file = join(runtimeDir, 'status.json');
    this.#watcher = watch(runtimeDir, (event, name) => {
      if (event !== 'rename' || name !== 'status.json') return;
      const at = performance.now();
      let doc: StatusDoc;
      try {
        doc = JSON.parse(readFileSync(this.#file, 'utf8')) as StatusDoc;
      } catch {
        // Replaced again, or removed, before this event was read: the next event reads that one.
        return;
      }
      this.writes.push({ at, doc });
      for (const w of this.#waits.filter((x) => x.test(doc))) w.resolve(at);
      this.#waits = this.#waits.filter((x) => !x.test(doc));
    });
  }

  /** When status.json first holds a document that passes `test`, from now on. */
  next(test: (doc: StatusDoc) => boolean): Promise<number> {
    return new Promise((resolve) => this.#waits.push({ test, resolve }));
  }

  /** Now, if status.json passes `test` already; else when it first does. */
  until(test: (doc: StatusDoc) => boolean): Promise<number> {
    let doc: StatusDoc | undefined;
    try {
      doc = JSON.parse(readFileSync(this.#file, 'utf8')) as StatusDoc;
    } catch {
      doc = undefined;
    }
    return doc && test(doc) ? Promise.resolve(performance.now()) : this.next(test);
  }

  since(t: number): number {
    return this.writes.filter((w) => w.at >= t).length;
  }

  close(): void {
    this.#watcher.close();
  }
}

/** One observer: attach, take its first frame (LINK_STATE), leave, and wait until it is gone. */
async function observeOnce(socket: string): Promise<number> {
  const ws = new WebSocket(`ws+unix://${socket}:/v1/observe`);
  await new Promise((resolve, reject) => {
    ws.once('message', resolve);
    ws.once('error', reject);
  });
  const gone = new Promise((resolve) => ws.once('close', resolve));
  ws.close();
  await gone;
  return performance.now();
}

describe("status.json under observers' churn (issue 27)", () => {
  it(`${ATTACHES} observer attaches: status.json at its pace, a link change within everyMs meanwhile, the last state exact`, async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const status = new StatusWrites(d.runtimeDir);
    cleanups.push(() => status.close());
    const spawned = performance.now();
    const p = daemon(d);
    const connected = await Promise.race([
      status.until((doc) => doc.link.state === 'connected'),
      p.exited.then(({ code }) => Promise.reject(new Error(`the daemon exited with ${code}: ${p.stderr}`))),
    ]);
    const bootWrites = status.since(spawned);
    const socket = join(d.runtimeDir, 'botlink.sock');

    const started = performance.now();
    let dropped: { at: number; landed: Promise<number> } | undefined;
    let lastGone = 0;
    for (let i = 0; i < ATTACHES; i++) {
      if (i === ATTACHES / 2) {
        // A change of the link amid the churn: it must not wait behind the observers'.
        const landed = status.next((doc) => doc.link.reconnects >= 1);
        dropped = { at: performance.now(), landed };
        svc.faults.dropAllSockets();
      }
      lastGone = await observeOnce(socket);
    }
    // The last detach: in status.json already, or in the one write still due.
    const last = await status.until((doc) => doc.relay.observers === 0);
    const landedAt = await dropped!.landed;
    await status.until((doc) => doc.link.state === 'connected' && doc.relay.observers === 0);
    const elapsed = last - started;
    const churnWrites = status.writes.filter((w) => w.at >= started && w.at <= last).length;
    const bound = STATUS_PACE.burst + Math.ceil(elapsed / STATUS_PACE.everyMs) + 1;
    console.log(
      `${ATTACHES} observer attaches in ${elapsed.toFixed(0)} ms: ${churnWrites} writes of status.json (bound ${bound}, ` +
        `${2 * ATTACHES} before); boot → connected ${bootWrites} writes in ${(connected - spawned).toFixed(0)} ms; ` +
        `a link drop amid the churn in status.json after ${(landedAt - dropped!.at).toFixed(0)} ms; ` +
        `the last detach after ${(last - lastGone).toFixed(0)} ms`,
    );
    expect(churnWrites).toBeLessThanOrEqual(bound);
    expect(churnWrites).toBeLessThan(ATTACHES / 10);
    // A boot writes within the burst: each of its changes lands at once.
    expect(bootWrites).toBeLessThanOrEqual(STATUS_PACE.burst);
    // everyMs by design (test/unit/agent/paced-write.test.ts, on a manual clock); here a loaded machine's timers add to it.
    expect(landedAt - dropped!.at).toBeLessThan(4 * STATUS_PACE.everyMs);
    expect(last - lastGone).toBeLessThan(4 * STATUS_PACE.everyMs);

    // The last document is exact: the daemon's, connected, no observer, the drop counted.
    const doc = d.status()!;
    expect(doc).toMatchObject({ pid: p.child.pid, link: { state: 'connected' }, relay: { observers: 0, attached: false } });
    expect(doc.link.reconnects).toBeGreaterThanOrEqual(1);
  });
});
