import { once } from 'node:events';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createReferenceService, type ReferenceService } from '../../src/service/server.js';
import { MAX_UNREAD_BYTES } from '../../src/service/ws-send.js';
import { connectWs, getTokens } from '../helpers/service-client.js';

let service: ReferenceService;
beforeEach(async () => {
  service = await createReferenceService();
});
afterEach(() => service.close());

// Far above what the service may hold plus every kernel buffer on the way, far below what a test may use.
const SEND_CAP_BYTES = 64 * 1024 * 1024;

it('a client that stops reading while it sends is closed once MAX_UNREAD_BYTES of echo wait for it', async () => {
  const { accessToken } = await getTokens(service.url);
  const attempt = await connectWs(service.wsUrl, 'bot-1', accessToken);
  if (!attempt.ok) throw new Error(`refused: ${attempt.status} ${attempt.body}`);
  const { ws } = attempt;
  ws.on('error', () => undefined);
  // The client's socket stops reading: the echo piles up on the service's side.
  ws.pause();
  const notReading = once(service.events, 'not-reading') as Promise<[{ botId: string; limitBytes: number }]>;
  const serverClosed = once(service.events, 'ws-close');
  let tripped = false;
  void notReading.then(() => (tripped = true));

  const chunk = Buffer.alloc(60 * 1024, 7);
  let sent = 0;
  while (!tripped && sent < SEND_CAP_BYTES) {
    // Each send waits until the kernel took it, or until the service gave up on this client.
    await Promise.race([new Promise((resolve) => ws.send(chunk, resolve)), notReading]);
    sent += chunk.length;
  }
  expect(tripped, `the service echoed ${sent} bytes to a client that reads nothing and never closed it`).toBe(true);
  const [event] = await notReading;
  expect(event).toEqual({ botId: 'bot-1', limitBytes: MAX_UNREAD_BYTES });
  await serverClosed;
  expect(service.stats.ws.open).toBe(0);
  ws.terminate();
});

it('a client that reads gets every echo back, however much it sends', async () => {
  const { accessToken } = await getTokens(service.url);
  const attempt = await connectWs(service.wsUrl, 'bot-1', accessToken);
  if (!attempt.ok) throw new Error(`refused: ${attempt.status} ${attempt.body}`);
  const { ws } = attempt;
  const chunk = Buffer.alloc(60 * 1024, 7);
  const total = Math.ceil((2 * MAX_UNREAD_BYTES) / chunk.length);
  let received = 0;
  const all = new Promise<void>((resolve) =>
    ws.on('message', () => {
      received += 1;
      if (received === total) resolve();
    }),
  );
  for (let i = 0; i < total; i++) ws.send(chunk);
  await all;
  expect(received).toBe(total);
  ws.terminate();
});
