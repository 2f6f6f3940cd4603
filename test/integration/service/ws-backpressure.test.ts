import { once } from 'node:events';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createReferenceService, type ReferenceService } from '../../../src/service/server.js';
import { MAX_UNREAD_BYTES } from '../../../src/service/ws-send.js';
import { connectWs, getTokens } from '../../helpers/service-client.js';

let service: ReferenceService;
beforeEach(async () => {
  // Rounds answered at once: each TEXT frame is answered in full before the next is read.
  service = await createReferenceService({ roundDelayMs: 0 });
});
afterEach(() => service.close());

// Far above what the service may hold plus every kernel buffer on the way, far below what a test may use.
const SEND_CAP_BYTES = 64 * 1024 * 1024;
/** A TEXT frame whose round sends back more than twice its size: the input in AGENT pieces and again as TTS audio. */
const BIG_TEXT = JSON.stringify({ contentType: 'TEXT', content: { input: 'x'.repeat(60 * 1024) } });

it('a client that stops reading while it talks is closed once MAX_UNREAD_BYTES of rounds wait for it', async () => {
  const { accessToken } = await getTokens(service.url);
  const attempt = await connectWs(service.wsUrl, 'bot-1', accessToken);
  if (!attempt.ok) throw new Error(`refused: ${attempt.status} ${attempt.body}`);
  const { ws } = attempt;
  ws.on('error', () => undefined);
  // The client's socket stops reading: the answers pile up on the service's side.
  ws.pause();
  const notReading = once(service.events, 'not-reading') as Promise<[{ botId: string; limitBytes: number }]>;
  const serverClosed = once(service.events, 'ws-close');
  let tripped = false;
  void notReading.then(() => (tripped = true));

  let sent = 0;
  while (!tripped && sent < SEND_CAP_BYTES) {
    // Each send waits until the kernel took it, or until the service gave up on this client.
    await Promise.race([new Promise((resolve) => ws.send(BIG_TEXT, resolve)), notReading]);
    sent += BIG_TEXT.length;
  }
  expect(tripped, `the service answered ${sent} bytes of TEXT to a client that reads nothing and never closed it`).toBe(true);
  const [event] = await notReading;
  expect(event).toEqual({ botId: 'bot-1', limitBytes: MAX_UNREAD_BYTES });
  await serverClosed;
  expect(service.stats.ws.open).toBe(0);
  ws.terminate();
});

it('a client that reads gets every round back, however much it says in all', async () => {
  const { accessToken } = await getTokens(service.url);
  const attempt = await connectWs(service.wsUrl, 'bot-1', accessToken);
  if (!attempt.ok) throw new Error(`refused: ${attempt.status} ${attempt.body}`);
  const { ws } = attempt;
  const total = Math.ceil((2 * MAX_UNREAD_BYTES) / BIG_TEXT.length);
  let completed = 0;
  // A conversation waits for the answer before it speaks again: the next TEXT goes out on each COMPLETE.
  const all = new Promise<void>((resolve) =>
    ws.on('message', (data, isBinary) => {
      if (isBinary || !String(data).includes('"eventType":"COMPLETE"')) return;
      completed += 1;
      if (completed === total) resolve();
      else ws.send(BIG_TEXT);
    }),
  );
  ws.send(BIG_TEXT);
  await all;
  expect(completed).toBe(total);
  ws.terminate();
});
