import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { RelayPort } from '../../../src/agent/local/relay-port.js';
import { LOCAL_LIMITS, LocalApi } from '../../../src/agent/local/server.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { ask, Flood, pipelined, pipelineReading } from '../../helpers/pipelining.js';
import { waitFor } from '../../helpers/wait-for.js';

/** Issue 27: the local API answers one request at a time and cuts a client that leaves its answer unread. */

const { cleanups, service, device, daemon, tempDir } = useHarness();

/** A scrape as big as the daemon's own (~4 KiB): what the flood asks for. */
const METRICS = `${'botlink_metric{label="value"} 12345\n'.repeat(110)}`;

/** Takes upgrades with ws and echoes every message back: what the relay would see of a connection. */
class EchoRelay implements RelayPort {
  readonly #wss = new WebSocketServer({ noServer: true });
  readonly counters = { attached: false, framesUp: 0, framesDown: 0, dropped: 0, observers: 0 };
  readonly traffic = { attaches: 0, bytesUp: 0, bytesDown: 0, observers: { attaches: 0, frames: 0, bytes: 0, slow: 0, refused: 0 } };

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
  }

  handleObserve(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.handleUpgrade(req, socket, head);
  }

  async stop(): Promise<void> {
    for (const ws of this.#wss.clients) ws.terminate();
  }
}

/** A LocalApi in this process on a ManualClock; the relay echoes. */
async function localApi(): Promise<{ api: LocalApi; clock: ManualClock; path: string }> {
  const clock = new ManualClock();
  const path = join(tempDir('local-pipe-'), 'api.sock');
  const api = new LocalApi({
    path,
    gid: null,
    clock,
    maxConnections: 64,
    relay: new EchoRelay(),
    log: pino({ level: 'silent' }),
    status: () => ({ ok: true }),
    tokens: () => undefined,
    metrics: () => ({ text: METRICS, type: 'text/plain; version=0.0.4' }),
  });
  await api.start();
  cleanups.push(() => api.stop());
  return { api, clock, path };
}

/** A connection that writes `bytes` and never reads (so it never sees the daemon hang up either). */
async function nonReader(path: string, bytes: string): Promise<void> {
  const s = connect(path);
  cleanups.push(() => s.destroy());
  s.pause();
  s.on('error', () => undefined);
  await once(s, 'connect');
  s.write(bytes);
}

const answered = (api: LocalApi): number => api.requests.reduce((n, r) => n + r.count, 0);

/** 20 rounds of status, metrics and a path that is none, in that order: each answer tells which it is. */
const MIXED = Array.from({ length: 20 }, () => ['/v1/status', '/v1/metrics', '/v1/nope']).flat();

function expectMixedInOrder(answers: { status: number; headers: Record<string, string> }[]): void {
  expect(answers.map((a) => `${a.status} ${a.headers['content-type']?.split(';')[0]}`)).toEqual(
    MIXED.map((p) => (p === '/v1/status' ? '200 application/json' : p === '/v1/metrics' ? '200 text/plain' : '404 application/json')),
  );
}

describe('the local API, one request at a time (issue 27)', () => {
  it('stops reading a client that leaves its answer unread, holds that one answer, and cuts it after unreadTimeoutMs', async () => {
    const { api, clock, path } = await localApi();
    await nonReader(path, pipelined('/v1/metrics').repeat(4096));
    // The kernel's buffer fills with answers; then the one being written waits, and its timer with it.
    await waitFor(() => clock.pending().length === 1, 15_000, 'an answer left unread');
    const stalled = answered(api);
    expect(stalled * METRICS.length).toBeLessThan(1024 * 1024);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Nothing more was read, so nothing more was answered: 4,000 requests wait in the kernel, not in the daemon.
    expect(answered(api)).toBe(stalled);
    await clock.advance(LOCAL_LIMITS.unreadTimeoutMs - 1);
    expect(api.connections.open).toBe(1);
    await clock.advance(1);
    await waitFor(() => api.connections.open === 0, 15_000, 'the connection cut');
    expect((await ask(path, '/v1/status')).status).toBe(200);
  });

  it('answers a client that pipelines and reads: every answer, in order, on one connection that stays open', async () => {
    const { path } = await localApi();
    const { answers, closed } = await pipelineReading(path, MIXED);
    expect(closed).toBe(false);
    expectMixedInOrder(answers);
  });

  it('finds a head that comes a byte at a time, and one after blank lines', async () => {
    const { path } = await localApi();
    const s = connect(path);
    cleanups.push(() => s.destroy());
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    await once(s, 'connect');
    for (const byte of `\r\n\r\n${pipelined('/v1/status')}`) {
      s.write(byte);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await waitFor(() => got.includes('{"ok":true}'), 15_000, 'the answer');
    expect(got).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('hands an upgrade its own socket, with the frame the client sent in the same write as the request', async () => {
    const { path } = await localApi();
    const s = connect(path);
    cleanups.push(() => s.destroy());
    let got = Buffer.alloc(0);
    s.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
    await once(s, 'connect');
    const mask = randomBytes(4);
    const frame = Buffer.concat([Buffer.from([0x81, 0x80 | 5]), mask, Buffer.from('hello').map((b, i) => b ^ mask[i % 4]!)]);
    s.write(
      Buffer.concat([
        Buffer.from(
          'GET /soulmate/voiceChat/v1 HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
            `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
        ),
        frame,
      ]),
    );
    const echo = Buffer.from([0x81, 5, ...Buffer.from('hello')]);
    await waitFor(() => got.includes(echo), 15_000, 'the echo of the frame');
    expect(got.toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
  });
});

describe('the daemon under one client that pipelines and never reads (issue 27)', () => {
  it('cuts it, and meanwhile answers a client that pipelines and reads, in order', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
    const sock = join(d.runtimeDir, 'botlink.sock');
    const started = performance.now();
    // It writes on as the daemon takes its bytes: a write after the cut fails, and so it learns of the cut.
    const flood = new Flood(sock, 1);
    cleanups.push(() => flood.stop());
    const { answers } = await pipelineReading(sock, MIXED);
    expectMixedInOrder(answers);
    await waitFor(() => flood.cuts > 0, 15_000, 'the non-reading client cut');
    console.log(`the non-reading client was cut ${Math.round(performance.now() - started)} ms after it connected`);
    await waitFor(() => d.log().includes('cut a connection that left its answer unread'), 10_000, 'the cut told at debug');
    expect((await ask(sock, '/v1/status')).status).toBe(200);
  });
});
