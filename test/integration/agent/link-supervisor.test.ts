import { once, type EventEmitter } from 'node:events';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { WebSocket as PeerSocket } from 'ws';
import {
  LinkSupervisor,
  MAX_CLOUD_MESSAGE_BYTES,
  type LinkOptions,
  type OpenedWith,
  type TokenSource,
} from '../../../src/agent/link/supervisor.js';
import { WS_FAILURE_FIXES, WsMessage } from '../../../src/protocol/codes.js';
import { wsFailureBody } from '../../../src/protocol/wire.js';
import { createReferenceService } from '../../../src/service/server.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { pongFrame, rawWsServer, tricklingRefusal } from '../../helpers/ws-peers.js';
import { S, MIN, H } from '../../helpers/time.js';

/**
 * The link's shell on a ManualClock: the sockets are real (ws servers and the reference service on
 * 127.0.0.1), only the link's timers wait for `clock.advance`, so every schedule is exact.
 */

const { cleanups, service, tempDir } = useHarness();

/** Just below 1: each delay is its window's ceiling − 1. */
const TOP = 1 - Number.EPSILON;
const FAST = { baseMs: 100, capMs: 1_600 };
const DISPLACED = 'REPEAT_CLIENT_SESSION: another connection holds this botId';
const EVENT = JSON.stringify({
  code: 200,
  msg: 'displaced',
  contentType: 'EVENT',
  content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} },
});

interface Backoff {
  delayMs: number;
  reason: string;
}

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

type StubTokens = TokenSource & { asked: number[]; invalidated: (string | undefined)[] };

/** Tokens from a stub: a new one on each call (or `fail`'s error), every ask and invalidation recorded. */
function stubTokens(fail?: () => Error): StubTokens {
  let n = 0;
  const stub: StubTokens = {
    asked: [],
    invalidated: [],
    current: async ({ minLeftMs }) => {
      stub.asked.push(minLeftMs ?? 0);
      if (fail) throw fail();
      return `token-${++n}`;
    },
    invalidate: (token) => void stub.invalidated.push(token),
  };
  return stub;
}

/** A link on a ManualClock with pinned jitter, fast backoff and no heartbeat unless asked. */
function manualLink(wsUrl: string, opts: Partial<LinkOptions> & { tokens?: TokenSource } = {}) {
  const clock = new ManualClock();
  const logs: LogLine[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) });
  const tokens = stubTokens();
  const link = new LinkSupervisor({
    wsUrl,
    botId: 'bot-1',
    tokens,
    clock,
    log,
    backoff: FAST,
    random: () => TOP,
    heartbeatIntervalMs: H,
    ...opts,
  });
  cleanups.push(() => link.stop());
  return { clock, link, logs, tokens };
}

/** The first argument of `emitter`'s next `event`; ask before doing what fires it. */
function next<T>(emitter: EventEmitter, event: string): Promise<T> {
  return once(emitter, event).then(([value]) => value as T);
}

/** A reference service and a real token manager for the link (its clock stays the system's). */
async function referenceRig() {
  const svc = await service();
  const kit = new AgentKit({ url: svc.url });
  kit.tokens.start();
  cleanups.push(() => kit.close());
  return { svc, kit };
}

/** A manual-clock link connected to a peer that answers no ping by itself (autoPong off). */
async function linkToSilentPeer(heartbeatIntervalMs: number, heartbeatTimeoutMs: number) {
  const peer = await rawWsServer();
  cleanups.push(peer.close);
  const connected = once(peer.wss, 'connection');
  const { clock, link } = manualLink(peer.url, { heartbeatIntervalMs, heartbeatTimeoutMs });
  const up = next(link, 'connected');
  link.start();
  const [[peerSocket]] = await Promise.all([connected, up]);
  return { clock, link, peerSocket: peerSocket as PeerSocket };
}

describe('heartbeat on the Clock', () => {
  it('pings every heartbeatIntervalMs and stays up while the reference service answers', async () => {
    const { svc, kit } = await referenceRig();
    const { clock, link } = manualLink(svc.wsUrl, { tokens: kit.tokens, heartbeatIntervalMs: 20 * S, heartbeatTimeoutMs: 10 * S });
    const up = next(link, 'connected');
    link.start();
    await up;
    expect(clock.pending()).toEqual([20 * S]);
    for (let beat = 1; beat <= 3; beat++) {
      await clock.advance(20 * S - 1);
      expect(clock.pending()).toEqual([1]);
      await clock.advance(1);
      // The service answers in order, the pong then the PONG frame: once the PONG frame is in, so is the pong.
      // Its PONG carries the service's own mid, as the guide's does: any PONG answers the one PING.
      const answered = pongFrame(link);
      link.send(`{"mid":"after-ping-${beat}","contentType":"PING"}`);
      await answered;
      // The pong cancelled its deadline: only the next ping is due.
      expect(clock.pending()).toEqual([20 * S]);
    }
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 0 });
  });

  it('cuts a peer that does not answer a ping within heartbeatTimeoutMs, and retries from attempt 2', async () => {
    const { clock, link, peerSocket } = await linkToSilentPeer(20 * S, 10 * S);
    const pinged = once(peerSocket, 'ping');
    await clock.advance(20 * S);
    await pinged;
    await clock.advance(10 * S - 1);
    expect(link.status.state).toBe('connected');
    const backoff = next<Backoff>(link, 'backoff');
    const cut = once(peerSocket, 'close');
    await clock.advance(1);
    expect(await backoff).toEqual({ delayMs: 399, reason: 'no pong within 10000 ms' });
    await cut;
    expect(clock.pending()).toEqual([399]);
  });
});

describe('heartbeat with a timeout as long as the interval (the default)', () => {
  it('arms no deadline timer: a pong-less ping is judged at the next one, a whole interval later', async () => {
    const { clock, link, peerSocket } = await linkToSilentPeer(15 * S, 15 * S);
    // The peer answers the first ping, then a frame: once the frame is in, so is the pong (one socket, in order).
    peerSocket.once('ping', () => {
      peerSocket.pong();
      peerSocket.send('{"mid":"first","contentType":"PONG"}');
    });
    const answered = pongFrame(link, 'first');
    await clock.advance(15 * S);
    await answered;
    // Only the next ping is pending: no deadline timer, answered or not.
    expect(clock.pending()).toEqual([15 * S]);
    const pinged = once(peerSocket, 'ping');
    await clock.advance(15 * S);
    await pinged;
    expect(clock.pending()).toEqual([15 * S]);
    expect(link.status.state).toBe('connected');
    const backoff = next<Backoff>(link, 'backoff');
    const cut = once(peerSocket, 'close');
    await clock.advance(15 * S);
    expect(await backoff).toEqual({ delayMs: 399, reason: 'no pong within 15000 ms' });
    await cut;
  });
});

describe('reconnect schedule on the Clock', () => {
  it('backs off 100 ms doubling to the 1.6 s cap, and connects only when the delay is over', async () => {
    const peer = await rawWsServer(() => ({ status: 503, body: 'busy' }));
    cleanups.push(peer.close);
    const { clock, link, tokens } = manualLink(peer.url);
    let backoff = next<Backoff>(link, 'backoff');
    link.start();
    for (const delay of [99, 199, 399, 799, 1_599, 1_599]) {
      expect(await backoff).toEqual({ delayMs: delay, reason: 'handshake refused with HTTP 503' });
      expect(link.status).toMatchObject({ state: 'backoff', lastError: 'handshake refused with HTTP 503' });
      expect(clock.pending()).toEqual([delay]);
      await clock.advance(delay - 1);
      expect(clock.pending()).toEqual([1]);
      backoff = next(link, 'backoff');
      await clock.advance(1);
    }
    await backoff;
    expect(peer.upgrades).toBe(7);
    expect(tokens.asked).toEqual(Array.from({ length: 7 }, () => 300_000));
  });

  it('a missing token backs off on the configured schedule, not the built-in one', async () => {
    const tokens = stubTokens(() => new Error('the token service is down'));
    const { clock, link } = manualLink('ws://127.0.0.1:9/soulmate/voiceChat/v1', { tokens, tokenMarginMs: 42 });
    let backoff = next<Backoff>(link, 'backoff');
    link.start();
    expect(await backoff).toEqual({ delayMs: 99, reason: 'no token: the token service is down' });
    backoff = next(link, 'backoff');
    await clock.advance(99);
    expect(await backoff).toEqual({ delayMs: 199, reason: 'no token: the token service is down' });
    expect(tokens.asked).toEqual([42, 42]);
  });

  it('a stable minute up resets the backoff: a drop then retries from attempt 2', async () => {
    let refusals = 4;
    const peer = await rawWsServer(() => (refusals-- > 0 ? { status: 503, body: '' } : undefined));
    cleanups.push(peer.close);
    const conns: PeerSocket[] = [];
    peer.wss.on('connection', (s) => conns.push(s));
    const { clock, link } = manualLink(peer.url);
    let up = next(link, 'connected');
    let backoff = next<Backoff>(link, 'backoff');
    link.start();
    for (const delay of [99, 199, 399, 799]) {
      expect((await backoff).delayMs).toBe(delay);
      backoff = next(link, 'backoff');
      await clock.advance(delay);
    }
    await up;
    // Up 59.999 s: the drop keeps attempt 4 (ceiling 1.6 s).
    await clock.advance(MIN - 1);
    conns.at(-1)!.terminate();
    expect(await backoff).toEqual({ delayMs: 1_599, reason: 'closed (1006)' });
    up = next(link, 'connected');
    backoff = next(link, 'backoff');
    await clock.advance(1_599);
    await up;
    // Up a full minute: back to attempt 2 (ceiling 400 ms).
    await clock.advance(MIN);
    conns.at(-1)!.terminate();
    expect(await backoff).toEqual({ delayMs: 399, reason: 'closed (1006)' });
    expect(link.status.reconnects).toBe(6);
  });

  it('reconnects when the reference service comes back on the same port', async () => {
    const dbFile = join(tempDir('botlink-link-'), 'svc.db');
    const first = await createReferenceService({ dbFile });
    const kit = new AgentKit({ url: first.url });
    kit.tokens.start();
    cleanups.push(() => kit.close());
    const { clock, link } = manualLink(first.wsUrl, { tokens: kit.tokens });
    let up = next(link, 'connected');
    link.start();
    await up;
    let backoff = next<Backoff>(link, 'backoff');
    await first.close();
    expect(await backoff).toEqual({ delayMs: 399, reason: 'closed (1006)' });
    backoff = next(link, 'backoff');
    await clock.advance(399);
    const refused = await backoff;
    expect(refused.reason).toContain('ECONNREFUSED');
    const second = await service(undefined, { dbFile, port: first.port });
    up = next(link, 'connected');
    await clock.advance(refused.delayMs);
    await up;
    expect(second.stats.getToken.total).toBe(0);
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 2, lastError: null });
  });
});

describe('displacement on the Clock', () => {
  it('backs off 30 s doubling; three displacements within 10 min say two devices share the botId', async () => {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    peer.wss.on('connection', (s) => s.close(4000, WsMessage.REPEAT_SESSION));
    const { clock, link, logs } = manualLink(peer.url, { random: () => 0 });
    const counts: number[] = [];
    link.on('displaced', ({ count }: { count: number }) => counts.push(count));
    const waits: Backoff[] = [];
    let backoff = next<Backoff>(link, 'backoff');
    link.start();
    for (let i = 0; i < 7; i++) {
      const b = await backoff;
      waits.push(b);
      expect(link.status).toMatchObject({ state: 'displaced', lastError: b.reason });
      if (i === 6) break;
      backoff = next(link, 'backoff');
      await clock.advance(b.delayMs);
    }
    // Displaced at 0, 30, 90, 210, 450, 930 and 1830 s: the last two see fewer within 10 min.
    expect(waits.map((w) => w.delayMs)).toEqual([30, 60, 120, 240, 480, 900, 900].map((s) => s * S));
    expect(counts).toEqual([1, 2, 3, 4, 5, 2, 1]);
    const shared = (n: number) => `REPEAT_CLIENT_SESSION: displaced ${n} times in 10 min — two devices share botId bot-1`;
    expect(waits.map((w) => w.reason)).toEqual([DISPLACED, DISPLACED, shared(3), shared(4), shared(5), DISPLACED, DISPLACED]);
    const errors = logs.filter((l) => l.level === 50).map((l) => [l.msg, l['displacements'], l['botId'], l['fix']]);
    expect(errors).toEqual([3, 4, 5].map((n) => [shared(n), n, 'bot-1', WS_FAILURE_FIXES[WsMessage.REPEAT_SESSION]]));
  });

  it('the displaced backoff starts over only after a connection held 10 min', async () => {
    // Displaced twice at once, then two sessions held: one for 9:59.999, one for 10 min.
    const plan = ['displace', 'displace', 'hold', 'hold'];
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    const held: PeerSocket[] = [];
    peer.wss.on('connection', (s) => {
      if (plan.shift() === 'displace') s.close(4000, WsMessage.REPEAT_SESSION);
      else held.push(s);
    });
    const { clock, link } = manualLink(peer.url, { random: () => 0 });
    let backoff = next<Backoff>(link, 'backoff');
    link.start();
    expect((await backoff).delayMs).toBe(30 * S);
    backoff = next(link, 'backoff');
    await clock.advance(30 * S);
    expect((await backoff).delayMs).toBe(60 * S);
    let up = next(link, 'connected');
    backoff = next(link, 'backoff');
    await clock.advance(60 * S);
    await up;
    await clock.advance(10 * MIN - 1);
    held[0]!.close(4000, WsMessage.REPEAT_SESSION);
    expect(await backoff).toEqual({ delayMs: 120 * S, reason: DISPLACED });
    up = next(link, 'connected');
    backoff = next(link, 'backoff');
    await clock.advance(120 * S);
    await up;
    await clock.advance(10 * MIN);
    held[1]!.close(4000, WsMessage.REPEAT_SESSION);
    expect(await backoff).toEqual({ delayMs: 30 * S, reason: DISPLACED });
  });

  it.each([
    ['code 400', 'handshake'],
    ['code 400', 'frame'],
    ['code 400', 'close-reason'],
    ['EVENT', 'handshake'],
    ['EVENT', 'frame'],
    ['EVENT', 'close-reason'],
  ] as const)('REPEAT_CLIENT_SESSION as %s in a %s: displaced, with the anti-flap backoff', async (shape, form) => {
    const body = shape === 'EVENT' ? EVENT : wsFailureBody(WsMessage.REPEAT_SESSION);
    const peer = await rawWsServer(() => (form === 'handshake' ? { status: 400, body } : undefined));
    cleanups.push(peer.close);
    let peerClosed: Promise<unknown[]> | undefined;
    peer.wss.on('connection', (s) => {
      peerClosed = once(s, 'close');
      if (form === 'frame') s.send(body);
      else s.close(4000, body);
    });
    const { link } = manualLink(peer.url, { random: () => 0 });
    const displaced = next(link, 'displaced');
    const backoff = next<Backoff>(link, 'backoff');
    const messages: unknown[] = [];
    link.on('message', (m) => messages.push(m));
    link.start();
    expect(await backoff).toEqual({ delayMs: 30 * S, reason: DISPLACED });
    expect(await displaced).toEqual({ count: 1 });
    expect(link.status).toMatchObject({ state: 'displaced', lastError: DISPLACED });
    expect(messages).toEqual([]);
    // A frame is not passed on as conversation: the link closes the displaced socket itself.
    if (form === 'frame') expect((await peerClosed!)[0]).toBe(1000);
  });
});

describe('the shell around decideLink', () => {
  it('Unauthorized: renews and reconnects at once, then backs off on a second one', async () => {
    let refusals = 2;
    const peer = await rawWsServer(() => (refusals-- > 0 ? { status: 401, body: '' } : undefined));
    cleanups.push(peer.close);
    const { clock, link, tokens, logs } = manualLink(peer.url);
    const backoff = next<Backoff>(link, 'backoff');
    link.start();
    expect((await backoff).delayMs).toBe(99);
    // The second attempt came without the clock moving.
    expect(peer.upgrades).toBe(2);
    expect(tokens.invalidated).toEqual(['token-1', 'token-2']);
    expect(link.status).toMatchObject({
      state: 'backoff',
      lastError: 'Unauthorized again with a renewed token',
      fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED],
    });
    expect(logs.some((l) => l.level === 40 && l.msg === 'link refused: Unauthorized; renewing the token and reconnecting at once')).toBe(
      true,
    );
    const up = next(link, 'connected');
    await clock.advance(99);
    await up;
    expect(link.status.lastError).toBeNull();
    expect(link.status.fix).toBeUndefined();
  });

  it('Unauthorized: the reason reaches state listeners (status.json, the relay) before the reconnect, as every change does', async () => {
    let refusals = 1;
    const peer = await rawWsServer(() => (refusals-- > 0 ? { status: 401, body: '' } : undefined));
    cleanups.push(peer.close);
    const { link } = manualLink(peer.url);
    const heard: [string, string | null][] = [];
    link.on('state', (s) => heard.push([s.state, s.lastError]));
    const up = next(link, 'connected');
    link.start();
    await up;
    expect(heard).toEqual([
      ['connecting', null],
      ['connecting', 'Unauthorized'],
      ['connected', null],
    ]);
  });

  it('gives the handshake connectTimeoutMs in total, even while a 401 body trickles in', async () => {
    const trickle = await tricklingRefusal();
    cleanups.push(trickle.close);
    const { clock, link } = manualLink(trickle.url, { connectTimeoutMs: 10 * S });
    const backoff = next<Backoff>(link, 'backoff');
    link.start();
    await trickle.firstRequest;
    await clock.advance(10 * S - 1);
    expect(link.status.state).toBe('connecting');
    await clock.advance(1);
    expect(await backoff).toEqual({ delayMs: 99, reason: 'WebSocket handshake not complete within 10000 ms' });
    expect(await trickle.firstHangUp).toBeLessThan(trickle.bodyLength);
  });

  it('closes a socket whose cloud sends a message over the limit with 1009, and reconnects with backoff', async () => {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    const closes: Promise<unknown[]>[] = [];
    peer.wss.on('connection', (s) => {
      // The first connection gets one byte too many; the second a message exactly at the limit.
      s.send(Buffer.alloc(closes.length === 0 ? MAX_CLOUD_MESSAGE_BYTES + 1 : MAX_CLOUD_MESSAGE_BYTES));
      closes.push(once(s, 'close'));
    });
    const { clock, link } = manualLink(peer.url);
    const backoff = next<Backoff>(link, 'backoff');
    link.start();
    expect(await backoff).toEqual({
      delayMs: 399,
      reason: `the cloud sent a message over ${MAX_CLOUD_MESSAGE_BYTES} bytes: closed with 1009`,
    });
    expect((await closes[0]!)[0]).toBe(1009);
    const atLimit = next<Buffer>(link, 'message');
    await clock.advance(399);
    expect((await atLimit).length).toBe(MAX_CLOUD_MESSAGE_BYTES);
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 1 });
  });

  it('passes a conversation EVENT through as a message', async () => {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    const greeting = JSON.stringify({ code: 200, msg: '', contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT', eventData: {} } });
    peer.wss.on('connection', (s) => s.send(greeting));
    const { link } = manualLink(peer.url);
    const got = next<Buffer>(link, 'message');
    link.start();
    expect((await got).toString()).toBe(greeting);
    expect(link.status.state).toBe('connected');
  });

  it('stop closes with 1000, cancels every timer of the link, and never reconnects', async () => {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    let peerClosed: Promise<unknown[]> | undefined;
    peer.wss.on('connection', (s) => (peerClosed = once(s, 'close')));
    const { clock, link } = manualLink(peer.url, { heartbeatIntervalMs: 20 * S });
    const up = next(link, 'connected');
    link.start();
    await up;
    expect(clock.pending()).toEqual([20 * S]);
    const stopping = link.stop();
    // Only the force timer, should the peer leave the close unanswered.
    expect(clock.pending()).toEqual([2 * S]);
    await stopping;
    expect((await peerClosed!)[0]).toBe(1000);
    expect(clock.pending()).toEqual([]);
    await clock.advance(H);
    expect(peer.upgrades).toBe(1);
    expect(link.status.state).toBe('stopped');
    expect(link.send('x')).toBe(false);
  });

  it('stop while waiting to reconnect cancels the wait', async () => {
    const peer = await rawWsServer(() => ({ status: 503, body: '' }));
    cleanups.push(peer.close);
    const { clock, link } = manualLink(peer.url);
    const backoff = next<Backoff>(link, 'backoff');
    link.start();
    await backoff;
    expect(clock.pending()).toEqual([99]);
    await link.stop();
    expect(clock.pending()).toEqual([]);
    await clock.advance(H);
    expect(peer.upgrades).toBe(1);
  });
});

describe('reconnects an app causes, on the Clock (DESIGN §3.5)', () => {
  async function connectedLink() {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    const { clock, link } = manualLink(peer.url);
    const up = next(link, 'connected');
    link.start();
    await up;
    return { peer, clock, link };
  }

  /** How many 'connected' events the link has emitted since this call. */
  function countConnected(link: LinkSupervisor) {
    const seen = { connected: 0 };
    link.on('connected', () => seen.connected++);
    return seen;
  }

  it('the first goes at once, the next waits the schedule on a parked socket, called off when the app leaves', async () => {
    const { peer, clock, link } = await connectedLink();
    const seen = countConnected(link);
    let up = next(link, 'connected');
    expect(link.useParams([['sessionId', 'S1']])).toBe('reconnecting');
    await up;
    expect(peer.upgrades).toBe(2);
    expect(link.useParams([['sessionId', 'S2']])).toBe('reconnecting');
    // Parked: the S1 socket stays, says backoff for the app, and carries nothing.
    expect(link.status).toMatchObject({ state: 'backoff', reconnects: 1 });
    expect(clock.pending()).toContain(99);
    expect(link.send('{}')).toBe(false);
    link.forgetParams();
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 1, lastError: null });
    // Every way into connected is one 'connected': the relay keeps the line again, and replays the voice config.
    expect(seen.connected).toBe(2);
    expect(clock.pending()).not.toContain(99);
    // Called off: no trace in the schedule; the next one waits the same 99 ms, then goes.
    expect(link.useParams([['sessionId', 'S3']])).toBe('reconnecting');
    up = next(link, 'connected');
    await clock.advance(99);
    await up;
    expect(peer.upgrades).toBe(3);
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 2, reconnectsByCause: { 'app-params': 2 } });
  });

  it('a socket that opened while a paced replacement waited says connected, once, when the wait is called off', async () => {
    const { peer, link } = await connectedLink();
    // Each socket opened from here greets: its greeting says it is open, whatever the link tells.
    peer.wss.on('connection', (s) => s.send('{"contentType":"EVENT","content":{"eventType":"CFG_BOT_EVENT"}}'));
    const seen = countConnected(link);
    // The next app asks for its own socket while the first app's is opening: its replacement waits (paced).
    let paced: string | undefined;
    link.once('opening', () => queueMicrotask(() => (paced = link.useParams([['sessionId', 'S2']]))));
    const greeted = next(link, 'message');
    expect(link.useParams([['sessionId', 'S1']])).toBe('reconnecting');
    await greeted;
    expect(paced).toBe('reconnecting');
    expect(link.status.state).toBe('backoff');
    expect(seen.connected).toBe(0);
    // That app leaves before its turn: the S1 socket, open all along, is the link's.
    link.forgetParams();
    expect(link.status).toMatchObject({ state: 'connected', reconnects: 1 });
    expect(seen.connected).toBe(1);
    expect(link.send('{}')).toBe(true);
    expect(peer.upgrades).toBe(2);
  });

  it('renewSession replaces even a socket the parameters fit (app-reattach); opening tells each socket what it is opened with', async () => {
    const peer = await rawWsServer();
    cleanups.push(peer.close);
    let n = 0;
    const { clock, link } = manualLink(peer.url, { newSessionId: () => `fresh-${++n}` });
    const opened: OpenedWith[] = [];
    link.on('opening', (o) => opened.push(o));
    let up = next(link, 'connected');
    link.start();
    await up;
    expect(link.useParams([])).toBe('kept');
    up = next(link, 'connected');
    expect(link.renewSession([])).toBe('reconnecting');
    await up;
    // Parameters the socket does not fit are app-params, whichever way they come.
    up = next(link, 'connected');
    expect(link.renewSession([['feature', 'f']])).toBe('reconnecting');
    // The second in the minute waits the schedule.
    expect(link.status.state).toBe('backoff');
    await clock.advance(99);
    await up;
    expect(opened).toEqual([
      { params: [], sessionId: 'fresh-1' },
      { params: [], sessionId: 'fresh-2' },
      { params: [['feature', 'f']], sessionId: 'fresh-3' },
    ]);
    expect(peer.upgrades).toBe(3);
    expect(link.status.reconnectsByCause).toEqual({ 'app-reattach': 1, 'app-params': 1 });
  });

  /** When each replacement began (the link says connecting at that instant), and the last wait announced. */
  function watchSwaps(link: LinkSupervisor, clock: ManualClock) {
    const seen = { swaps: [] as number[], retryInMs: 0 };
    link.on('state', (s) => {
      if (s.state === 'connecting') seen.swaps.push(clock.monoNow());
      if (s.state === 'backoff') seen.retryInMs = s.retryInMs ?? 0;
    });
    return seen;
  }

  /** `count` apps in a row, each with a session of its own from S`from` on, each reconnect waited out and made. */
  async function appsInARow(link: LinkSupervisor, clock: ManualClock, seen: { retryInMs: number }, from: number, count: number) {
    for (let i = from; i < from + count; i++) {
      const up = next(link, 'connected');
      expect(link.useParams([['sessionId', `S${i}`]])).toBe('reconnecting');
      if (link.status.state === 'backoff') await clock.advance(seen.retryInMs);
      await up;
    }
  }

  it('never more than appReconnectsPerMinute in any minute, however fast apps ask', async () => {
    const { peer, clock, link } = await connectedLink();
    const seen = watchSwaps(link, clock);
    const { swaps } = seen;
    await appsInARow(link, clock, seen, 0, 10);
    expect(peer.upgrades).toBe(11);
    expect(swaps).toHaveLength(10);
    for (const t of swaps) expect(swaps.filter((u) => u >= t && u < t + MIN).length).toBeLessThanOrEqual(6);
    // The seventh waited for the first to leave the minute.
    expect(swaps[6]! - swaps[0]!).toBe(MIN);
    expect(link.status.reconnectsByCause).toEqual({ 'app-params': 10 });
  });

  it('a reconnect called off while it waited for the cap leaves every replacement made counted (CI: 7 in 30 s)', async () => {
    const { peer, clock, link } = await connectedLink();
    const seen = watchSwaps(link, clock);
    const { swaps } = seen;
    // Six apps with a session each, as fast as the schedule lets: six replacements within the minute.
    await appsInARow(link, clock, seen, 0, 6);
    expect(swaps).toHaveLength(6);
    // The seventh waits for the first to leave the minute, and its app leaves before that: called off.
    expect(link.useParams([['sessionId', 'S6']])).toBe('reconnecting');
    expect(seen.retryInMs).toBe(swaps[0]! + MIN - clock.monoNow());
    link.forgetParams();
    expect(link.status.state).toBe('connected');
    // The next app's reconnect still waits for the first to leave the minute, not just the schedule.
    const up = next(link, 'connected');
    expect(link.useParams([['sessionId', 'S7']])).toBe('reconnecting');
    expect(link.status.state).toBe('backoff');
    await clock.advance(seen.retryInMs);
    await up;
    expect(swaps).toHaveLength(7);
    expect(swaps[6]! - swaps[0]!).toBe(MIN);
    expect(peer.upgrades).toBe(8);
    expect(link.status.reconnectsByCause).toEqual({ 'app-params': 7 });
  });
});
