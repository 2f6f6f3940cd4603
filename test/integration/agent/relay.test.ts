import { once } from 'node:events';
import { randomBytes, randomInt } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { KEEPALIVE_INTERVAL_MS } from '../../../src/agent/local/keepalive.js';
import { MAX_APP_BACKLOG_BYTES, MAX_APP_FRAME_BYTES } from '../../../src/agent/local/relay-decide.js';
import { Relay } from '../../../src/agent/local/relay.js';
import { systemClock } from '../../../src/clock.js';
import { WsMessage } from '../../../src/protocol/codes.js';
import { wsFailureBody } from '../../../src/protocol/wire.js';
import { downText, UP } from '../../helpers/guide-frames.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { cloudPeer, GREETING, relayRig, settled, type App } from '../../helpers/relay-rig.js';

/**
 * Every rule of DESIGN §3.5 against a real link, a real cloud peer on 127.0.0.1 and apps on a real
 * Unix socket. The daemon-level checks (reference service, real process) are in the local API's tests.
 */

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: Parameters<typeof relayRig>[0] extends infer O ? Omit<O, 'cloudUrl'> : never = {}) {
  const cloud = await cloudPeer();
  cleanups.push(() => cloud.close());
  const rig = await relayRig({ cloudUrl: cloud.url, ...opts });
  cleanups.push(() => rig.close());
  // The greeting reaches the link before any app: dropped and counted, kept for replay.
  const greeted = once(rig.link, 'message');
  rig.link.start();
  await greeted;
  return { cloud, rig };
}

/** The eventData of a LINK_STATE frame; fails on anything else. */
async function linkState(app: App): Promise<Record<string, unknown>> {
  const frame = await app.frames.json();
  expect(frame).toMatchObject({ contentType: 'BOTLINK', content: { eventType: 'LINK_STATE' } });
  return (frame['content'] as { eventData: Record<string, unknown> }).eventData;
}

/** LINK_STATE frames until one in `state`; returns it. */
async function stateUntil(app: App, state: string): Promise<Record<string, unknown>> {
  for (;;) {
    const data = await linkState(app);
    if (data['state'] === state) return data;
  }
}

const VOICE_CONFIG = JSON.stringify({
  mid: 'v1',
  contentType: 'EVENT',
  content: { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: { binary: true } } },
});

/** An app that attaches with `query`, sends its voice config (so it conversed on the socket) and leaves. */
async function converseAndLeave(rig: Awaited<ReturnType<typeof setup>>['rig'], query: string): Promise<void> {
  const app = await rig.attach(query);
  await stateUntil(app, 'connected');
  app.ws.send(VOICE_CONFIG);
  await settled(app.ws);
  app.ws.close();
  await app.closed;
}

describe('relay: attaching', () => {
  it('gives the app its state first, then replays the open connection greeting when the parameters match', async () => {
    const { cloud, rig } = await setup();
    const app = await rig.attach();
    expect(await linkState(app)).toEqual({ state: 'connected', sessionId: 'fresh-1' });
    const greeting = await app.frames.next();
    expect(greeting).toEqual({ data: Buffer.from(GREETING), isBinary: false });
    expect(cloud.conns).toHaveLength(1);
    expect(rig.relay.counters).toMatchObject({ attached: true });
  });

  it('reconnects the cloud with the app parameters when they differ; botId stays the device own', async () => {
    const { cloud, rig } = await setup();
    const app = await rig.attach('?botId=evil&sessionId=S1&requestId=R1&needManualCall=true&feature=f');
    expect(await linkState(app)).toEqual({ state: 'connecting', sessionId: 'S1' });
    expect(await linkState(app)).toEqual({ state: 'connected', sessionId: 'S1' });
    const conn = await cloud.connection(1);
    expect(Object.fromEntries(conn.query)).toEqual({
      botId: 'bot-1',
      sessionId: 'S1',
      requestId: 'R1',
      needManualCall: 'true',
      feature: 'f',
    });
    expect((await app.frames.next()).data.toString()).toBe(GREETING);
    // The first connection was closed by botlink, not displaced: it ended with 1000.
    expect(cloud.conns[0]!.ws.readyState).not.toBe(1);
  });

  it('keeps the connection for a second app with the same parameters, and a fresh session for none after a drop', async () => {
    const { cloud, rig } = await setup();
    const first = await rig.attach('?sessionId=S1');
    await stateUntil(first, 'connected');
    first.ws.close();
    await first.closed;
    const again = await rig.attach('?sessionId=S1');
    expect(await linkState(again)).toEqual({ state: 'connected', sessionId: 'S1' });
    expect((await again.frames.next()).data.toString()).toBe(GREETING);
    expect(cloud.conns).toHaveLength(2);
  });

  it('keeps the connection for an app that asks for the sessionId it was shown, when no app decided one', async () => {
    const { cloud, rig } = await setup();
    const first = await rig.attach();
    const shown = await linkState(first);
    expect(shown).toEqual({ state: 'connected', sessionId: 'fresh-1' });
    first.ws.close();
    await first.closed;
    const again = await rig.attach(`?sessionId=${shown['sessionId']}`);
    expect(await linkState(again)).toEqual({ state: 'connected', sessionId: 'fresh-1' });
    expect((await again.frames.next()).data.toString()).toBe(GREETING);
    expect(cloud.conns).toHaveLength(1);
    // Another parameter beside it is another connection.
    again.ws.close();
    await again.closed;
    const other = await rig.attach('?sessionId=fresh-1&feature=f');
    expect(await stateUntil(other, 'connected')).toEqual({ state: 'connected', sessionId: 'fresh-1' });
    expect(Object.fromEntries((await cloud.connection(1)).query)).toEqual({ botId: 'bot-1', sessionId: 'fresh-1', feature: 'f' });
  });

  it('keeps the connection for the same app coming back after it conversed, holding the last round back until it sends', async () => {
    const { cloud, rig } = await setup();
    await converseAndLeave(rig, '?sessionId=S1');
    const again = await rig.attach('?sessionId=S1');
    expect(await linkState(again)).toEqual({ state: 'connected', sessionId: 'S1' });
    expect((await again.frames.next()).data.toString()).toBe(GREETING);
    // What the cloud still sends for the first app's round is not the second app's.
    const conn = cloud.conns[1]!;
    conn.ws.send('tail of the last round');
    await settled(again.ws);
    again.ws.send(VOICE_CONFIG);
    expect((await again.frames.next()).data.toString()).toBe(VOICE_CONFIG);
    expect(cloud.conns).toHaveLength(2);
  });

  it('gives an app that names no session a new connection when another app conversed on a session it named', async () => {
    const { cloud, rig } = await setup();
    await converseAndLeave(rig, '?sessionId=S1');
    const next = await rig.attach();
    expect(await stateUntil(next, 'connected')).toEqual({ state: 'connected', sessionId: 'fresh-2' });
    expect(cloud.conns).toHaveLength(3);
    expect(rig.link.status).toMatchObject({ reconnects: 2, reconnectsByCause: { 'app-params': 1, 'app-reattach': 1 } });
  });

  it('paces the second app-caused reconnect of a minute; an app that leaves first leaves the open socket to the next', async () => {
    const { cloud, rig } = await setup({ link: { backoff: { baseMs: 60_000, capMs: 60_000 }, random: () => 0.5 } });
    const a = await rig.attach('?sessionId=A');
    expect(await stateUntil(a, 'connected')).toEqual({ state: 'connected', sessionId: 'A' });
    a.ws.close();
    await a.closed;
    const b = await rig.attach('?sessionId=B');
    // The second in a minute waits its turn, told so; the socket of A stays open meanwhile.
    expect(await linkState(b)).toEqual({ state: 'backoff', sessionId: 'B', retryInMs: expect.any(Number) });
    expect(rig.link.status.lastError).toMatch(/paced \(1 in the last minute, at most 6\)/);
    b.ws.close();
    await b.closed;
    const c = await rig.attach();
    expect(await linkState(c)).toEqual({ state: 'connected', sessionId: 'A' });
    expect(cloud.conns).toHaveLength(2);
    expect(rig.link.status).toMatchObject({ state: 'connected', reconnects: 1, reconnectsByCause: { 'app-params': 1 } });
  });

  it('answers a second app with 409 {code, msg} while one is attached', async () => {
    const { rig } = await setup();
    const app = await rig.attach();
    await linkState(app);
    const second = await rig.attach();
    const [, res] = (await once(second.ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    let body = '';
    for await (const chunk of res) body += chunk;
    expect(res.statusCode).toBe(409);
    expect(JSON.parse(body)).toMatchObject({ code: 409, msg: expect.stringContaining('another app') });
    second.ws.terminate();
  });
});

/** Random UTF-8 text of at most `bytes` bytes, with multi-byte characters in it. */
function randomText(bytes: number): string {
  const pieces = ['a', 'Z', '{', '"', 'é', '€', '😀', ' '];
  let s = '';
  let n = 0;
  for (;;) {
    const p = pieces[randomInt(pieces.length)]!;
    const len = Buffer.byteLength(p);
    if (n + len > bytes) return s;
    s += p;
    n += len;
  }
}

describe('relay: frames', () => {
  it('carries text as text and binary as binary, byte for byte both ways, at random sizes up to the limit', async () => {
    const { cloud, rig } = await setup();
    const app = await rig.attach();
    await linkState(app);
    await app.frames.next();
    const conn = cloud.conns[0]!;
    const sizes = [0, 1, MAX_APP_FRAME_BYTES, ...Array.from({ length: 12 }, () => randomInt(MAX_APP_FRAME_BYTES + 1))];
    for (const [i, size] of sizes.entries()) {
      const binary = i % 2 === 0;
      const data = binary ? randomBytes(size) : Buffer.from(randomText(size));
      app.ws.send(data, { binary });
      // Buffer.equals, not toEqual: a deep compare of a MiB byte by byte takes seconds.
      for (const got of [await conn.frames.next(), await app.frames.next()]) {
        expect({ size: got.data.length, isBinary: got.isBinary, same: got.data.equals(data) }).toEqual({
          size: data.length,
          isBinary: binary,
          same: true,
        });
      }
    }
    expect(rig.relay.counters).toEqual({ attached: true, framesUp: sizes.length, framesDown: sizes.length, dropped: 1, observers: 0 });
  });

  it('drops and counts app frames while the cloud socket is not open, and cloud frames with no app', async () => {
    const { cloud, rig } = await setup();
    cloud.echo = false;
    const noApp = new Promise((r) => rig.link.once('message', r));
    cloud.conns[0]!.ws.send('nobody listens');
    await noApp;
    expect(rig.relay.counters).toEqual({ attached: false, framesUp: 0, framesDown: 0, dropped: 2, observers: 0 });
    const app = await rig.attach();
    await linkState(app);
    await app.frames.next();
    cloud.refusing = true;
    cloud.conns[0]!.ws.terminate();
    await stateUntil(app, 'backoff');
    for (let i = 0; i < 5; i++) app.ws.send(randomBytes(100));
    await settled(app.ws);
    expect(rig.relay.counters).toMatchObject({ attached: true, framesUp: 0, dropped: 7 });
    cloud.refusing = false;
    await stateUntil(app, 'connected');
    app.ws.send('after');
    expect((await cloud.conns[1]!.frames.next()).data.toString()).toBe('after');
  });

  it('after a cloud drop sends the app last voice config first on the new connection, then its frames', async () => {
    const { cloud, rig } = await setup();
    cloud.echo = false;
    const app = await rig.attach();
    await linkState(app);
    await app.frames.next();
    app.ws.send(VOICE_CONFIG);
    expect((await cloud.conns[0]!.frames.next()).data.toString()).toBe(VOICE_CONFIG);
    cloud.conns[0]!.ws.terminate();
    expect(await stateUntil(app, 'backoff')).toMatchObject({ retryInMs: expect.any(Number) });
    await stateUntil(app, 'connected');
    app.ws.send(randomBytes(10), { binary: true });
    const conn = await cloud.connection(1);
    expect(await conn.frames.next()).toEqual({ data: Buffer.from(VOICE_CONFIG), isBinary: false });
    expect((await conn.frames.next()).isBinary).toBe(true);
    expect(app.ws.readyState).toBe(1);
  });

  it.each([
    ['code 400 frame', wsFailureBody(WsMessage.REPEAT_SESSION)],
    ['event envelope', JSON.stringify({ code: 200, contentType: 'EVENT', content: { eventType: 'REPEAT_CLIENT_SESSION' } })],
  ])('tells the app it is displaced (%s), with retryInMs, and carries on once back', async (_shape, marker) => {
    const { cloud, rig } = await setup();
    const app = await rig.attach();
    await linkState(app);
    await app.frames.next();
    cloud.conns[0]!.ws.send(marker);
    const displaced = await stateUntil(app, 'displaced');
    expect(displaced).toEqual({ state: 'displaced', sessionId: 'fresh-1', retryInMs: expect.any(Number) });
    expect(displaced['retryInMs']).toBeGreaterThanOrEqual(0);
    expect(await stateUntil(app, 'connected')).toEqual({ state: 'connected', sessionId: 'fresh-2' });
  });
});

describe('relay: limits and stop', () => {
  it('drops app frames once 4 MiB wait for a cloud that stops reading, and keeps the cloud socket', async () => {
    const { cloud, rig } = await setup();
    cloud.echo = false;
    const app = await rig.attach();
    await linkState(app);
    cloud.conns[0]!.ws.pause();
    const frame = randomBytes(MAX_APP_FRAME_BYTES);
    const total = 48;
    for (let i = 0; i < total; i++) app.ws.send(frame);
    await settled(app.ws);
    const c = rig.relay.counters;
    expect(c.framesUp + c.dropped).toBe(total + 1);
    // The bound, one frame over it, and what loopback TCP buffers hold (a few MiB each way).
    expect(c.framesUp).toBeLessThan(24);
    expect(rig.link.status).toMatchObject({ state: 'connected', reconnects: 0 });
    cloud.conns[0]!.ws.resume();
    const first = await cloud.conns[0]!.frames.next();
    expect(first.data.equals(frame)).toBe(true);
  });

  it('an app with other parameters joining a displaced link waits out the displaced backoff', async () => {
    const { cloud, rig } = await setup({ link: { displacedBackoff: { baseMs: 60_000, capMs: 60_000 }, random: () => 0.999 } });
    cloud.conns[0]!.ws.send(wsFailureBody(WsMessage.REPEAT_SESSION));
    await rig.reaches('displaced');
    const app = await rig.attach('?sessionId=S2');
    const state = await linkState(app);
    expect(state).toMatchObject({ state: 'displaced', sessionId: 'S2' });
    expect(state['retryInMs']).toBeGreaterThan(30_000);
    expect(cloud.conns).toHaveLength(1);
  });

  it('closes an app frame over 1 MiB with 1009, leaving the cloud socket alone', async () => {
    const { cloud, rig } = await setup();
    const app = await rig.attach();
    await linkState(app);
    app.ws.send(Buffer.alloc(MAX_APP_FRAME_BYTES + 1));
    const [code] = await app.closed;
    expect(code).toBe(1009);
    expect(cloud.conns).toHaveLength(1);
    expect(cloud.conns[0]!.ws.readyState).toBe(1);
    expect(rig.link.status).toMatchObject({ state: 'connected', reconnects: 0 });
    const next = await rig.attach();
    expect(await linkState(next)).toMatchObject({ state: 'connected' });
  });

  it('closes an app that stops reading with 1008 at 4 MiB unread while the cloud streams; memory stays bounded', async () => {
    const clock = new ManualClock();
    const { cloud, rig } = await setup({ relayClock: clock });
    const app = await rig.attach();
    await linkState(app);
    app.ws.pause();
    const frame = randomBytes(64 * 1024);
    const total = 200; // 12.5 MiB, three times the bound
    let got = 0;
    const all = new Promise<void>((resolve) =>
      rig.link.on('message', () => {
        if (++got === total) resolve();
      }),
    );
    for (let i = 0; i < total; i++) cloud.conns[0]!.ws.send(frame);
    await all;
    const c = rig.relay.counters;
    expect(c.attached).toBe(false);
    // What the app holds: the bound, one frame over it, and what the kernel took before the app stopped.
    expect(c.framesDown * frame.length).toBeLessThan(MAX_APP_BACKLOG_BYTES + 1024 * 1024);
    expect(c.framesDown + c.dropped).toBe(total + 1);
    expect(cloud.conns[0]!.ws.readyState).toBe(1);
    expect(rig.link.status).toMatchObject({ state: 'connected', reconnects: 0 });
    app.ws.resume();
    const [code] = await app.closed;
    expect(code).toBe(1008);
  });

  it('is built before its link starts, or not at all: it would miss the open socket and its greeting', async () => {
    const { rig } = await setup();
    expect(() => new Relay({ link: rig.link, clock: systemClock, log: pino({ level: 'silent' }) })).toThrow(/before its link starts/);
  });

  it('on stop sends LINK_STATE stopped, then closes with 1001, and refuses new apps', async () => {
    const { rig } = await setup();
    const app = await rig.attach();
    await linkState(app);
    await app.frames.next();
    await rig.relay.stop();
    expect(await linkState(app)).toMatchObject({ state: 'stopped' });
    const [code] = await app.closed;
    expect(code).toBe(1001);
    const late = await rig.attach();
    const [, res] = (await once(late.ws, 'unexpected-response')) as [unknown, { statusCode: number }];
    expect(res.statusCode).toBe(503);
    late.ws.terminate();
  });
});

describe("relay: the guide's JSON keepalive (DESIGN §1.7)", () => {
  const pong = (mid: string): string => downText('PONG', { mid });

  it('with no app the cloud gets a JSON PING every 30 s; with one attached, none; no PONG to the daemon reaches the app', async () => {
    const clock = new ManualClock();
    const { cloud, rig } = await setup({ relayClock: clock });
    cloud.echo = false;
    const conn = cloud.conns[0]!;
    for (const due of [1, 2]) {
      await clock.advance(KEEPALIVE_INTERVAL_MS);
      const ping = await conn.frames.json();
      expect(ping, `PING ${due}`).toEqual({ mid: expect.any(String), contentType: 'PING' });
    }
    // The second PING is unanswered when an app attaches and pings for itself.
    conn.ws.send(pong('r_1'));
    const app = await rig.attach();
    expect(await linkState(app)).toMatchObject({ state: 'connected' });
    await app.frames.next(); // the greeting
    app.ws.send(JSON.stringify(UP['PING']));
    expect(await conn.frames.json()).toEqual(UP['PING']);
    conn.ws.send(pong('r_2')); // answers the daemon's second PING
    conn.ws.send(pong('r_3')); // answers the app's
    expect(await app.frames.json()).toMatchObject({ contentType: 'PONG', mid: 'r_3' });
    // Dropped: only the greeting, which came before any app; the daemon's PONGs are neither relayed nor dropped.
    expect(rig.relay.counters).toMatchObject({ framesDown: 1, dropped: 1 });

    await clock.advance(4 * KEEPALIVE_INTERVAL_MS);
    app.ws.send(JSON.stringify(UP['TEXT']));
    expect(await conn.frames.json(), "the cloud's next frame is the app's: the daemon sent no PING").toEqual(UP['TEXT']);
  });
});
