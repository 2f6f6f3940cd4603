import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { closeWithin, cutAfter } from '../../../src/ws-close.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const GRACE_MS = 2000;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A ws server on 127.0.0.1 and one client connected to it: both ends of one real socket. */
async function pair(): Promise<{ url: string; client: WebSocket; server: WebSocket }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(wss, 'listening');
  const url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
  cleanups.push(async () => {
    for (const ws of wss.clients) ws.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });
  const accepted = once(wss, 'connection') as Promise<[WebSocket]>;
  const client = new WebSocket(url);
  cleanups.push(async () => void client.terminate());
  const [[server]] = await Promise.all([accepted, once(client, 'open')]);
  return { url, client, server };
}

/** Whether `promise` has settled yet. */
function watch(promise: Promise<void>): () => boolean {
  let settled = false;
  void promise.then(() => (settled = true));
  return () => settled;
}

/** `ending`, begun on `ws` whose peer has stopped reading, settles as `clock` reaches `graceMs` and not before: the socket is cut. */
async function expectCutAt(ws: WebSocket, clock: ManualClock, graceMs: number, ending: Promise<void>): Promise<void> {
  const closed = once(ws, 'close');
  const done = watch(ending);
  await clock.advance(graceMs - 1);
  expect({ done: done(), state: ws.readyState }).toEqual({ done: false, state: WebSocket.CLOSING });
  await clock.advance(1);
  expect(done()).toBe(true);
  const [code] = await closed;
  expect(code).toBe(1006);
}

describe('closeWithin', () => {
  it('closes with the code and reason, resolves when the peer finishes the handshake, and leaves no timer', async () => {
    const clock = new ManualClock();
    const { client, server } = await pair();
    const heard = once(server, 'close');
    await closeWithin(client, 4001, 'parameters changed', clock, GRACE_MS);
    const [code, reason] = await heard;
    expect({ code, reason: String(reason) }).toEqual({ code: 4001, reason: 'parameters changed' });
    expect(client.readyState).toBe(WebSocket.CLOSED);
    expect(clock.pending()).toEqual([]);
  });

  it('cuts a peer that leaves the handshake unfinished: at the grace, not before', async () => {
    const clock = new ManualClock();
    const { client, server } = await pair();
    // The client stops reading (a stalled app): it never sees the close frame, so it never answers it.
    client.pause();
    await expectCutAt(server, clock, GRACE_MS, closeWithin(server, 1008, 'too slow', clock, GRACE_MS));
  });

  it('a socket still connecting is cut at once, and no timer is left', async () => {
    const clock = new ManualClock();
    const { url } = await pair();
    const client = new WebSocket(url);
    client.on('error', () => undefined);
    await closeWithin(client, 1000, 'shutdown', clock, GRACE_MS);
    expect(client.readyState).toBe(WebSocket.CLOSED);
    expect(clock.pending()).toEqual([]);
  });

  it('a socket already closed: resolves at once and arms nothing', async () => {
    const clock = new ManualClock();
    const { client } = await pair();
    client.close();
    await once(client, 'close');
    await closeWithin(client, 1000, 'shutdown', clock, GRACE_MS);
    expect(clock.pending()).toEqual([]);
  });
});

describe('cutAfter', () => {
  it('bounds a closing handshake already under way: cut at the grace unless it finishes', async () => {
    const clock = new ManualClock();
    const { client, server } = await pair();
    client.pause();
    server.close(1009, 'frame too large');
    await expectCutAt(server, clock, 500, cutAfter(server, clock, 500));
  });

  it('a handshake that finishes in time cancels the cut', async () => {
    const clock = new ManualClock();
    const { client } = await pair();
    client.close(1000);
    await cutAfter(client, clock, 500);
    expect(client.readyState).toBe(WebSocket.CLOSED);
    expect(clock.pending()).toEqual([]);
  });
});
