import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UNIT_ENV, UNIT_FILE } from '../../scripts/bench/unit.js';
import { cleanEnv } from '../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../helpers/harness.js';
import { ask, askAsFastAsAnswered, Flood } from '../helpers/pipelining.js';
import { rssKiB } from '../../scripts/lib/procfs.js';
import { waitFor } from '../helpers/wait-for.js';

const { service, device, daemon } = useHarness();

/** Issue 27's attack: 24 connections (far under the cap of 64) pipelining GET /v1/metrics for 20 s, never reading. */
const FLOODERS = 24;
const FLOOD_MS = 20_000;
/** What the attack may add to the RSS of the daemon at work, at its worst moment. */
const RSS_SLACK_KIB = 16 * 1024;
const SAMPLE_MS = 200;
/** Honest clients as many as the flood's, asking as fast as they are answered, before the flood: see below. */
const LOAD_MS = 10_000;

/**
 * The young generation V8 gives the daemon under the unit: Node sizes V8's heap from the cgroup's limit
 * (MemoryMax=256M), and for 256 MiB V8's semi-space is at its floor, 1–2 MiB. On a machine with
 * gigabytes V8 lets the heap grow by ~120 MiB under any burst of requests (honest ones: 17 → 154 MiB)
 * and keeps it: V8 sizing itself for the machine, not the daemon holding answers, nor what a device sees.
 */
const UNIT_V8 = '--max-semi-space-size=2';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('the local API under a member who pipelines requests and never reads the answers (issue 27)', () => {
  it(
    'stays alive within 16 MiB of its RSS at work, its cloud socket untouched, an honest client served all along',
    async () => {
      const svc = await service(DAEMON_SEED);
      const d = device(svc, { botId: 'bot-1', logLevel: 'info' });
      expect(readFileSync(UNIT_FILE, 'utf8')).toMatch(/^MemoryMax=256M$/m);
      const proc = daemon(d, cleanEnv({ ...UNIT_ENV, NODE_OPTIONS: UNIT_V8 }));
      const before = await d.waitForLink('connected');
      await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
      const sock = join(d.runtimeDir, 'botlink.sock');
      const pid = proc.child.pid!;
      let cloudEvents = 0;
      const onCloud = (): void => void cloudEvents++;
      svc.events.on('ws-open', onCloud).on('ws-close', onCloud);

      for (const path of ['/v1/status', '/v1/metrics', '/v1/token']) expect((await ask(sock, path)).status).toBe(200);
      // The reference is the daemon at work, not idle: 24 honest clients asking as fast as it answers
      // grow its RSS by 25–60 MiB (V8's heap and glibc's arenas sized for that churn, and kept), and a
      // flood whose connections are cut and come back is churn too. What the flood must not do is make
      // the daemon hold more than honest work does.
      const rssIdle = rssKiB(pid);
      const loaded = await askAsFastAsAnswered(sock, FLOODERS, LOAD_MS);
      await sleep(2_000);
      const rssBefore = rssKiB(pid);

      const flood = new Flood(sock, FLOODERS);
      const honest: number[] = [];
      const failures: string[] = [];
      let peak = rssBefore;
      const until = performance.now() + FLOOD_MS;
      const asking = (async () => {
        while (performance.now() < until) {
          const r = await ask(sock, '/v1/status').catch((err: Error) => ({ status: 0, ms: 0, body: err.message }));
          if (r.status === 200) honest.push(r.ms);
          else failures.push(`${r.status} ${r.body}`);
          await sleep(100);
        }
      })();
      while (performance.now() < until) {
        await sleep(SAMPLE_MS);
        peak = Math.max(peak, rssKiB(pid));
      }
      await asking;
      await flood.stop();
      const rssAfter = rssKiB(pid);
      svc.events.off('ws-open', onCloud).off('ws-close', onCloud);
      honest.sort((a, b) => a - b);
      console.log(
        `honest load, ${FLOODERS} clients for ${LOAD_MS / 1000} s: ${loaded} answers, RSS ${Math.round(rssIdle / 1024)} MiB idle, ` +
          `+${((rssBefore - rssIdle) / 1024).toFixed(1)} MiB after; ` +
          `pipelining flood, ${FLOODERS} connections for ${FLOOD_MS / 1000} s: ${flood.opened} connections, ${flood.cuts} cut; ` +
          `RSS ${Math.round(rssBefore / 1024)} MiB before, peak +${((peak - rssBefore) / 1024).toFixed(1)} MiB, ` +
          `+${((rssAfter - rssBefore) / 1024).toFixed(1)} MiB after; honest client ${honest.length} answers ` +
          `(median ${honest[honest.length >> 1]?.toFixed(1)} ms, max ${honest.at(-1)?.toFixed(1)} ms), ${failures.length} failed`,
      );

      expect(proc.child.exitCode).toBeNull();
      expect(peak - rssBefore).toBeLessThanOrEqual(RSS_SLACK_KIB);
      expect(flood.cuts).toBeGreaterThan(0);
      expect(failures).toEqual([]);
      // One honest ask every 100 ms or so: most of them answered, not a handful squeezed in.
      expect(honest.length).toBeGreaterThan(FLOOD_MS / 1000);
      expect(cloudEvents).toBe(0);
      const after = d.status()!;
      expect(after.link).toMatchObject({ state: 'connected', since: before.link.since, reconnects: before.link.reconnects });
      const metrics = await ask(sock, '/v1/metrics');
      expect(metrics.body).not.toMatch(/^botlink_link_reconnects_total\{[^}]*\} [1-9]/m);
    },
    FLOOD_MS + 60_000,
  );
});
