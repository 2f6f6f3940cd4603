import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LINK_DEFAULTS } from '../../src/agent/link/options.js';
import { contentOf, ConversationClient, type Frame, isContent, isEvent } from '../helpers/conversation-client.js';
import { DAEMON_SEED, useHarness } from '../helpers/harness.js';
import { rssKiB } from '../../scripts/lib/procfs.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * Issue 20: no local app can make the device hammer the cloud or fill the disk. A real daemon process
 * against the reference service; the abusive app loops as fast as the local socket lets it.
 */

const { cleanups, service, device, daemon } = useHarness();

const STORM_MS = 30_000;
const FLOOD_MS = 20_000;
const ATTEMPTS = 10_000;
const WAVE = 500;
/** The cap's default (DESIGN §3.5). */
const CAP = 64;

const isLinkState = (f: Frame): boolean => isContent('BOTLINK')(f) && contentOf(f)['eventType'] === 'LINK_STATE';
const stateOf = (f: Frame): string => String((contentOf(f)['eventData'] as Record<string, unknown>)['state']);

async function daemonAtInfo() {
  const svc = await service(DAEMON_SEED);
  // The production level: per-connection events are debug, and must not reach the file.
  const d = device(svc, { botId: 'bot-1', logLevel: 'info' });
  const proc = daemon(d);
  await d.waitForLink('connected');
  await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
  return { svc, d, proc, socket: join(d.runtimeDir, 'botlink.sock') };
}

function getText(socket: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ socketPath: socket, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

/** One app of the storm: attaches, and either waits for its state and sends one TEXT, or names a random session and leaves. */
async function stormApp(socket: string, n: number): Promise<'attached' | 'refused'> {
  const chats = n % 2 === 0;
  let app: ConversationClient;
  try {
    app = await ConversationClient.local(socket, chats ? {} : { sessionId: randomUUID() });
  } catch {
    return 'refused';
  }
  if (chats) {
    await app.indexOf(isLinkState, 0, 'LINK_STATE');
    app.send({ mid: `storm-${n}`, contentType: 'TEXT', content: { input: `storm ${n}` } });
  }
  app.ws.close();
  await app.closed;
  return 'attached';
}

describe('fleet safety (issue 20)', () => {
  it(
    `a ${STORM_MS / 1000} s attach storm makes at most ${LINK_DEFAULTS.appReconnectsPerMinute} cloud connections, all counted; the app after it converses at once`,
    async () => {
      const { svc, d, socket } = await daemonAtInfo();
      const before = svc.stats.ws.total;
      const deadline = performance.now() + STORM_MS;
      let attached = 0;
      let refused = 0;
      for (let n = 0; performance.now() < deadline; n++) {
        if ((await stormApp(socket, n)) === 'attached') attached++;
        else refused++;
      }
      const made = svc.stats.ws.total - before;
      const status = d.status()!;
      console.log(
        `storm: ${attached} attaches (${refused} refused) in ${STORM_MS / 1000} s; cloud connections ${made}; status ${JSON.stringify(status.link)}`,
      );
      expect(attached).toBeGreaterThan(100);
      expect(made).toBeLessThanOrEqual(LINK_DEFAULTS.appReconnectsPerMinute);
      // Every one of them is counted, by its cause; the counts add up.
      expect(status.link.reconnects).toBe(made);
      const byCause = status.link.reconnectsByCause;
      expect(Object.values(byCause).reduce((a, b) => a + b, 0)).toBe(status.link.reconnects);
      expect(Object.keys(byCause).every((c) => c.startsWith('app-'))).toBe(true);
      // The metrics count the same, by the same causes.
      const metrics = await getText(socket, '/v1/metrics');
      for (const [cause, n] of Object.entries(byCause)) expect(metrics).toContain(`botlink_link_reconnects_total{cause="${cause}"} ${n}\n`);
      expect(metrics).toMatch(new RegExp(`^botlink_relay_attaches_total ${attached}$`, 'm'));

      // The app that follows: no wait for a backoff, its round goes through.
      const app = await ConversationClient.local(socket);
      cleanups.push(() => app.terminate());
      await app.indexOf(isLinkState, 0, 'LINK_STATE');
      app.send({
        mid: 'cfg',
        contentType: 'EVENT',
        content: { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: { binary: false } } },
      });
      const configured = await app.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'), 0, 'the voice config acknowledged');
      const from = app.frames.length;
      app.send({ mid: 'ask', contentType: 'TEXT', content: { input: 'after the storm' } });
      const round = await app.round(from);
      expect(round.some(isEvent('COMPLETE'))).toBe(true);
      const states = app.frames.slice(0, configured).filter(isLinkState).map(stateOf);
      expect(states.filter((s) => s !== 'connected' && s !== 'connecting')).toEqual([]);
      expect(svc.stats.ws.total - before).toBeLessThanOrEqual(LINK_DEFAULTS.appReconnectsPerMinute);
    },
    STORM_MS + 60_000,
  );

  it(
    `${FLOOD_MS / 1000} s of attach/close loops grow the log by less than 100 KB`,
    async () => {
      const { d, socket } = await daemonAtInfo();
      const sizeBefore = statSync(d.logFile).size;
      const deadline = performance.now() + FLOOD_MS;
      let attached = 0;
      while (performance.now() < deadline) {
        const app = await ConversationClient.local(socket);
        await app.indexOf(isLinkState, 0, 'LINK_STATE');
        app.ws.close();
        await app.closed;
        attached++;
      }
      const grown = statSync(d.logFile).size - sizeBefore;
      console.log(`flood: ${attached} attaches in ${FLOOD_MS / 1000} s; the log grew ${grown} bytes`);
      expect(attached).toBeGreaterThan(100);
      expect(grown).toBeLessThan(100_000);
    },
    FLOOD_MS + 30_000,
  );

  it(
    `RSS stays flat while ${ATTEMPTS} local connections are attempted: ${CAP} held, the rest refused at once`,
    async () => {
      const { proc, socket } = await daemonAtInfo();
      const pid = proc.child.pid!;
      const rssBefore = rssKiB(pid);
      const open: Socket[] = [];
      cleanups.push(() => {
        for (const s of open) s.destroy();
      });
      /** One attempt, left open: 'served' when the daemon answers a request on it, 'refused' when it hangs up first. */
      const attempt = (): Promise<'served' | 'refused'> =>
        new Promise((resolve) => {
          const s = connect(socket);
          open.push(s);
          s.on('error', () => undefined);
          s.once('data', () => resolve('served'));
          s.once('close', () => resolve('refused'));
          s.write('GET /v1/status HTTP/1.1\r\nHost: localhost\r\n\r\n');
        });
      let served = 0;
      let refused = 0;
      for (let attempted = 0; attempted < ATTEMPTS; attempted += WAVE) {
        const results = await Promise.all(Array.from({ length: WAVE }, attempt));
        served += results.filter((r) => r === 'served').length;
        refused += results.filter((r) => r === 'refused').length;
      }
      const rssAfter = rssKiB(pid);
      console.log(
        `connections: ${ATTEMPTS} attempted in waves of ${WAVE}, ${served} served, ${refused} refused; daemon RSS ${rssBefore} KiB before, ${rssAfter} KiB after`,
      );
      // Each wave of WAVE at once meets the cap: at most CAP of it are served (the keep-alive ones stay open).
      expect(served).toBeLessThanOrEqual((ATTEMPTS / WAVE) * CAP);
      expect(served + refused).toBe(ATTEMPTS);
      // The review saw +44 MiB for 12,144 connections with no cap.
      expect(rssAfter - rssBefore).toBeLessThan(16 * 1024);
    },
    5 * 60_000,
  );
});
