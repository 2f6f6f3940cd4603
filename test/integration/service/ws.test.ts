import { once } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket, type RawData } from 'ws';
import { parseWsFailure } from '../../../src/protocol/wire.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import type { Seed } from '../../../src/service/seed.js';
import { DOWN, shapeDifferences } from '../../helpers/guide-frames.js';
import { connectWs, getTokens, type OpenSocket, type Tokens } from '../../helpers/service-client.js';

const seed: Seed = {
  accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1', 'bot-2'] }] }],
};

let service: TestService;
let bot1: Tokens;
const sockets: WebSocket[] = [];

beforeEach(async () => {
  // Short enough for the ping tests, long enough that a loaded machine's pauses do not cost a pong.
  service = await createTestService({ seed, pingIntervalMs: 300 });
  bot1 = await getTokens(service.url, { botId: 'bot-1' });
});
afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  await service.close();
});

async function openSocket(botId: string, token: string, options: { autoPong?: boolean } = {}): Promise<OpenSocket> {
  const attempt = await connectWs(service.wsUrl, botId, token, options);
  if (!attempt.ok) throw new Error(`refused: ${attempt.status} ${attempt.body}`);
  sockets.push(attempt.ws);
  return attempt;
}

async function open(botId: string, token: string, options: { autoPong?: boolean } = {}): Promise<WebSocket> {
  return (await openSocket(botId, token, options)).ws;
}

async function refusal(botId: string | undefined, token: string | undefined): Promise<{ status: number; body: string }> {
  const attempt = await connectWs(service.wsUrl, botId, token);
  if (attempt.ok) {
    attempt.ws.terminate();
    throw new Error('expected a refusal');
  }
  return { status: attempt.status, body: attempt.body };
}

function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return once(ws, 'close').then(([code, reason]) => ({ code: code as number, reason: String(reason as Buffer) }));
}

/** Sends a PING and waits for the PONG; true when its mid is the service's own (`<requestId>_N`), as in the guide. */
function pong(ws: WebSocket, mid: string): Promise<boolean> {
  return new Promise((resolve) => {
    // One listener for all frames: frames read in one go are emitted together, and once() would miss the later ones.
    const onMessage = (data: RawData, isBinary: boolean): void => {
      const frame = isBinary ? undefined : (JSON.parse(String(data)) as { contentType?: string; mid?: string });
      if (frame?.contentType !== 'PONG') return;
      ws.off('message', onMessage);
      resolve(frame.mid !== mid && /^\S+_\d+$/.test(String(frame.mid)));
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ mid, contentType: 'PING', content: {} }));
  });
}

const BOT_INVALID = '{"code":400,"msg":"botId not found or invalid"}';
const UNAUTHORIZED = '{"code":400,"msg":"Unauthorized"}';

describe('handshake refusals: HTTP 400 with a JSON body', () => {
  it.each([
    ['no botId', undefined],
    ['an empty botId', ''],
  ])('a valid token with %s → botId not found or invalid', async (_name, botId) => {
    expect(await refusal(botId, bot1.accessToken)).toEqual({ status: 400, body: BOT_INVALID });
  });

  it('no token → Unauthorized', async () => {
    expect(await refusal('bot-1', undefined)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('an unknown token → Unauthorized', async () => {
    expect(await refusal('bot-1', 'made-up')).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('another bot’s token → Unauthorized', async () => {
    expect(await refusal('bot-2', bot1.accessToken)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('a vendor token → Unauthorized', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    expect(await refusal('bot-1', vendor.accessToken)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('a refresh token as Bearer → Unauthorized', async () => {
    expect(await refusal('bot-1', bot1.refreshToken)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('an expired token → Unauthorized', async () => {
    service.faults.shiftClockMs(7200 * 1000);
    expect(await refusal('bot-1', bot1.accessToken)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('bodies are recognised by the protocol parser', async () => {
    expect(parseWsFailure((await refusal(undefined, bot1.accessToken)).body)).toBe('botId not found or invalid');
    expect(parseWsFailure((await refusal('bot-1', undefined)).body)).toBe('Unauthorized');
  });

  it('another path → 404', async () => {
    const attempt = await connectWs(service.wsUrl.replace('/v1', '/v2'), 'bot-1', bot1.accessToken);
    expect(attempt.ok ? 0 : attempt.status).toBe(404);
  });
});

describe('no probing: the token is checked before the botId', () => {
  const tokens: Record<string, () => Promise<string | undefined>> = {
    'no token': () => Promise.resolve(undefined),
    'a made-up token': () => Promise.resolve('made-up'),
    'a refresh token': () => Promise.resolve(bot1.refreshToken),
    'a valid token of another bot': () => Promise.resolve(bot1.accessToken),
    'a valid vendor token': async () => (await getTokens(service.url, { vendorId: 'V1' })).accessToken,
  };

  it.each(Object.keys(tokens))('%s gets the same answer for an existing and an unknown botId, asked in either order', async (name) => {
    const token = await tokens[name]!();
    const existingFirst = [await refusal('bot-2', token), await refusal('bot-nope', token)];
    const unknownFirst = [await refusal('bot-nope', token), await refusal('bot-2', token)];
    for (const answer of [...existingFirst, ...unknownFirst]) expect(answer).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('an expired token gets the same answer for an existing and an unknown botId', async () => {
    service.faults.shiftClockMs(7200 * 1000);
    expect(await refusal('bot-1', bot1.accessToken)).toEqual({ status: 400, body: UNAUTHORIZED });
    expect(await refusal('bot-nope', bot1.accessToken)).toEqual({ status: 400, body: UNAUTHORIZED });
  });

  it('without a valid token, no botId at all is Unauthorized too', async () => {
    expect(await refusal(undefined, undefined)).toEqual({ status: 400, body: UNAUTHORIZED });
    expect(await refusal('', 'made-up')).toEqual({ status: 400, body: UNAUTHORIZED });
  });
});

describe('a session', () => {
  it('greets with CFG_BOT_EVENT as text, then answers a PING with its PONG', async () => {
    const ws = await open('bot-1', bot1.accessToken);
    expect(await pong(ws, 'p-1')).toBe(true);
  });

  it("a second connection displaces the first: the guide's EVENT frame (mid null), then a close 4000 without a reason", async () => {
    const displacedEvents: unknown[] = [];
    service.events.on('displaced', (e) => displacedEvents.push(e));
    const first = await openSocket('bot-1', bot1.accessToken);
    const serverClosedFirst = once(service.events, 'ws-close');
    const t0 = Date.now();
    const second = await open('bot-1', bot1.accessToken);
    expect(await first.closed).toEqual({ code: 4000, reason: '' });
    await serverClosedFirst;
    const frames = first.messages;
    expect(frames).toHaveLength(2);
    expect(frames[0]).toContain('"CFG_BOT_EVENT"');
    const frame = JSON.parse(frames[1]!) as Record<string, unknown>;
    expect(shapeDifferences(frame, DOWN['REPEAT_CLIENT_SESSION'])).toEqual([]);
    expect(frame).toMatchObject({
      code: 200,
      msg: 'Event success',
      mid: null,
      content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} },
    });
    expect(Math.abs((frame['t'] as number) - t0)).toBeLessThan(60_000);
    expect(parseWsFailure(frames[0]!)).toBeUndefined();
    expect(parseWsFailure(frames[1]!)).toBe('REPEAT_CLIENT_SESSION');
    expect(displacedEvents).toEqual([{ botId: 'bot-1' }]);
    expect(service.stats.ws.displaced).toBe(1);
    expect(service.stats.ws.maxConcurrentPerBot).toBe(2);
    expect(service.stats.ws.perBotOpen('bot-1')).toBe(1);

    expect(await pong(second, 'still here')).toBe(true);
  });

  it("displacementMarker 'code400': the displaced socket gets the seed's {code: 400} frame, then a close with that reason", async () => {
    const svc = await createTestService({ seed, displacementMarker: 'code400' });
    try {
      const tokens = await getTokens(svc.url, { botId: 'bot-1' });
      const headers = { authorization: `Bearer ${tokens.accessToken}` };
      const first = new WebSocket(`${svc.wsUrl}?botId=bot-1&requestId=req-7`, { headers });
      sockets.push(first);
      const frames: string[] = [];
      first.on('message', (data) => frames.push(String(data)));
      const firstClosed = closed(first);
      await once(first, 'open');
      const second = new WebSocket(`${svc.wsUrl}?botId=bot-1`, { headers });
      sockets.push(second);
      await once(second, 'open');
      const { code, reason } = await firstClosed;
      expect([4000, 1008]).toContain(code);
      expect(reason).toBe('REPEAT_CLIENT_SESSION');
      expect(frames).toEqual([expect.stringContaining('"CFG_BOT_EVENT"'), '{"code":400,"msg":"REPEAT_CLIENT_SESSION"}']);
      expect(parseWsFailure(frames[1]!)).toBe('REPEAT_CLIENT_SESSION');
      expect(svc.stats.ws.displaced).toBe(1);
    } finally {
      await svc.close();
    }
  });

  it('sessions of different bots do not displace each other', async () => {
    const bot2 = await getTokens(service.url, { botId: 'bot-2' });
    const a = await open('bot-1', bot1.accessToken);
    await open('bot-2', bot2.accessToken);
    expect(service.stats.ws.displaced).toBe(0);
    expect(service.stats.ws.open).toBe(2);
    expect(service.stats.ws.maxConcurrentPerBot).toBe(1);
    expect(await pong(a, 'x')).toBe(true);
  });

  it('emits ws-open and ws-close and counts sockets', async () => {
    const events: string[] = [];
    service.events.on('ws-open', (e: { botId: string }) => events.push(`open ${e.botId}`));
    service.events.on('ws-close', (e: { botId: string }) => events.push(`close ${e.botId}`));
    const ws = await open('bot-1', bot1.accessToken);
    expect(service.stats.ws).toMatchObject({ open: 1, total: 1 });
    expect(service.stats.ws.perBotOpen('bot-1')).toBe(1);
    const serverSawClose = once(service.events, 'ws-close');
    ws.close();
    await serverSawClose;
    expect(events).toEqual(['open bot-1', 'close bot-1']);
    expect(service.stats.ws).toMatchObject({ open: 0, total: 1 });
    expect(service.stats.ws.perBotOpen('bot-1')).toBe(0);
  });
});

describe('pings', () => {
  it('terminates a peer that does not answer pings', async () => {
    const ws = await open('bot-1', bot1.accessToken, { autoPong: false });
    let pings = 0;
    ws.on('ping', () => (pings += 1));
    const { code } = await closed(ws);
    expect(code).toBe(1006);
    expect(pings).toBeGreaterThanOrEqual(1);
  });

  it('keeps a peer that answers pings', async () => {
    const ws = await open('bot-1', bot1.accessToken);
    let pings = 0;
    ws.on('ping', () => (pings += 1));
    const terminated = closed(ws).then(({ code }) => {
      throw new Error(`terminated (${code}) after ${pings} pings`);
    });
    while (pings < 4) await Promise.race([once(ws, 'ping'), terminated]);
    expect(ws.readyState).toBe(WebSocket.OPEN);
  });
});

describe('WebSocket fault knobs', () => {
  it('dropAllSockets terminates every socket without a close frame', async () => {
    const a = await open('bot-1', bot1.accessToken);
    const bot2 = await getTokens(service.url, { botId: 'bot-2' });
    const b = await open('bot-2', bot2.accessToken);
    const closes = Promise.all([closed(a), closed(b)]);
    service.faults.dropAllSockets();
    expect((await closes).map((c) => c.code)).toEqual([1006, 1006]);
  });

  it.each(['Unauthorized', 'botId not found or invalid'] as const)(
    'refuseWebSockets(%j) refuses a valid client at the handshake, until undefined',
    async (msg) => {
      service.faults.refuseWebSockets(msg);
      expect(await refusal('bot-1', bot1.accessToken)).toEqual({ status: 400, body: JSON.stringify({ code: 400, msg }) });
      service.faults.refuseWebSockets(undefined);
      await open('bot-1', bot1.accessToken);
    },
  );

  it("refuseWebSockets(…, 'frame') opens, sends the JSON frame, then closes", async () => {
    service.faults.refuseWebSockets('Unauthorized', 'frame');
    const attempt = await connectWs(service.wsUrl, 'bot-1', bot1.accessToken);
    if (!attempt.ok) throw new Error('expected the socket to open');
    const { code } = await attempt.closed;
    expect(attempt.messages).toEqual(['{"code":400,"msg":"Unauthorized"}']);
    expect(code).toBe(1008);
    expect(service.stats.ws.total).toBe(0);
  });

  it("refuseWebSockets(…, 'close-reason') opens, then closes with the message as reason", async () => {
    service.faults.refuseWebSockets('Unauthorized', 'close-reason');
    const attempt = await connectWs(service.wsUrl, 'bot-1', bot1.accessToken);
    if (!attempt.ok) throw new Error('expected the socket to open');
    const { code, reason } = await attempt.closed;
    expect(attempt.messages).toEqual([]);
    expect({ code, reason }).toEqual({ code: 1008, reason: 'Unauthorized' });
    expect(parseWsFailure(reason)).toBe('Unauthorized');
  });

  it('setLatencyMs delays the handshake answer too', async () => {
    service.faults.setLatencyMs(300);
    const started = Date.now();
    await open('bot-1', bot1.accessToken);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('reset() stops refusing', async () => {
    service.faults.refuseWebSockets('Unauthorized');
    expect(await refusal('bot-1', bot1.accessToken)).toMatchObject({ status: 400, body: expect.stringContaining('Unauthorized') });
    service.faults.reset();
    const ws = await open('bot-1', bot1.accessToken);
    expect(ws.readyState).toBe(WebSocket.OPEN);
  });

  it('the handshake answer carries the Date of the shifted service clock', async () => {
    service.faults.shiftClockMs(-86_400_000);
    const ws = new WebSocket(`${service.wsUrl}?botId=bot-1`, { headers: { authorization: `Bearer ${bot1.accessToken}` } });
    sockets.push(ws);
    const [res] = (await once(ws, 'upgrade')) as [{ headers: Record<string, string> }];
    const date = Date.parse(res.headers['date']!);
    expect(Math.abs(date - (Date.now() - 86_400_000))).toBeLessThan(5000);
  });
});
