import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { LinkSupervisor, type LinkState, type TokenSource } from '../../../src/agent/link/supervisor.js';
import { systemClock } from '../../../src/clock.js';
import {
  chance,
  closePayload,
  CONTENT_TYPES,
  fuzzSeed,
  int,
  INVALID_CLOSE_CODES,
  INVALID_UTF8,
  isObject,
  pick,
  prng,
  randomBytes,
  randomJson,
  randomString,
  type Rng,
  VALID_CLOSE_CODES,
  wsAccept,
  wsFrame as frame,
} from '../../helpers/fuzz.js';
import { collectUnexpected, useHarness } from '../../helpers/harness.js';

/**
 * Suite 4 of issue 6, the agent's half, WebSocket: generated peers for the link. FUZZ_SEED=n
 * reproduces a run; every failure message names the seed, the lane and the attempt. The cloud
 * client's half is fuzz-cloud-client.test.ts.
 */

const SEED = fuzzSeed(20261122);
const WS_LANES = 4;
const WS_PER_LANE = 550;

const FAILURES = ['botId not found or invalid', 'Unauthorized', 'REPEAT_CLIENT_SESSION'] as const;
type Failure = (typeof FAILURES)[number];
const LINK_STATES: ReadonlySet<string> = new Set<LinkState>(['connecting', 'connected', 'backoff', 'displaced', 'stopped']);

const unexpected = collectUnexpected();
const { cleanups, tempDir } = useHarness(() => {
  expect(unexpected.map(String), `unhandled errors (seed ${SEED})`).toEqual([]);
});

/** What the DESIGN §1.4 carriers say: a failure, none, or a form the contract leaves open. */
/** `bare`: whether the carrier may hold the bare message (handshake body, close reason) or only JSON (a frame). */
function carrierMeaning(payload: string, bare = true): { failure: Failure | undefined; ambiguous: boolean } {
  const exact = (p: string): Failure | undefined => {
    if ((FAILURES as readonly string[]).includes(p)) return bare ? (p as Failure) : undefined;
    let v: unknown;
    try {
      v = JSON.parse(p);
    } catch {
      return undefined;
    }
    return isObject(v) && v['code'] === 400 && (FAILURES as readonly unknown[]).includes(v['msg']) ? (v['msg'] as Failure) : undefined;
  };
  const failure = exact(payload);
  if (failure) return { failure, ambiguous: false };
  // Surrounding whitespace, or a code of "400"/401: lenient readers may accept them; the contract does not say.
  let loose = exact(payload.trim()) !== undefined;
  try {
    const v: unknown = JSON.parse(payload);
    loose ||= isObject(v) && (v['code'] === '400' || v['code'] === 401) && (FAILURES as readonly unknown[]).includes(v['msg']);
  } catch {
    // not JSON: nothing more to consider
  }
  return { failure: undefined, ambiguous: loose };
}

const NEAR_MESSAGES = [
  'unauthorized',
  'UNAUTHORIZED',
  'Unauthorized.',
  'Un authorized',
  'Unauthorised',
  'Unauthorized\u0000',
  'REPEAT_CLIENT_SESSIONS',
  'repeat_client_session',
  'REPEAT-CLIENT-SESSION',
  'botId not found',
  'botId not found or invalid!',
  'botid not found or invalid',
  'code 400',
  '400',
  '',
];
const NEAR_CODES: readonly unknown[] = [200, 500, 4000, 40, -400, 400.5, null, 'x', true, [400], 0];

function canonicalCarrier(rng: Rng, failure: Failure, bare = true): string {
  switch (bare ? int(rng, 5) : 1 + int(rng, 4)) {
    case 0:
      return failure;
    case 1:
      return JSON.stringify({ code: 400, msg: failure });
    case 2:
      return JSON.stringify({ msg: failure, code: 400 });
    case 3:
      return `{ "code" : ${pick(rng, ['400', '400.0', '4e2', '4.00e2'])} ,\n "msg" : ${JSON.stringify(failure)} }`;
    default:
      return JSON.stringify({ code: 400, data: null, msg: failure, ts: int(rng, 1e9) });
  }
}

function nearMissCarrier(rng: Rng): string {
  switch (int(rng, 6)) {
    case 0:
      return pick(rng, NEAR_MESSAGES);
    case 1:
      return JSON.stringify({ code: 400, msg: pick(rng, NEAR_MESSAGES) });
    case 2:
      return JSON.stringify({ code: pick(rng, NEAR_CODES), msg: pick(rng, FAILURES) });
    case 3:
      return JSON.stringify(
        pick(rng, [
          { msg: pick(rng, FAILURES) },
          { code: 400 },
          [400, pick(rng, FAILURES)],
          { code: 400, msg: [pick(rng, FAILURES)] },
          { code: 400, msg: { text: pick(rng, FAILURES) } },
        ]),
      );
    case 4:
      return JSON.stringify(randomJson(rng, 3));
    default:
      return randomString(rng, 80);
  }
}

/** A peer's whole performance for one connection attempt, and what the link must conclude from it. */
interface WsScenario {
  /** Bytes written once the upgrade request arrived (a refusal, or the 101 and the frames). */
  write(key: string): Buffer;
  /** The failure the link must recognise; undefined for none. */
  failure: Failure | undefined;
  ambiguous: boolean;
  /** Data messages the link must pass on; undefined when delivery cannot be promised. */
  messages: number | undefined;
  desc: string;
}

function refusalScenario(rng: Rng): WsScenario {
  const status = pick(rng, [400, 400, 401, 401, 403, 404, 426, 429, 500, 503, 200, 301, 418]);
  const carrier = int(rng, 3);
  const failure = carrier === 0 ? pick(rng, FAILURES) : undefined;
  const body = failure
    ? canonicalCarrier(rng, failure)
    : carrier === 1
      ? nearMissCarrier(rng)
      : pick(rng, ['', '<html>nope</html>', randomString(rng, 200), 'x'.repeat(5000 + int(rng, 20_000))]);
  const delivery = pick(rng, ['length', 'length', 'chunked', 'close', 'truncated'] as const);
  const bytes = Buffer.from(body);
  const head = [`HTTP/1.1 ${status} ${pick(rng, ['Bad Request', 'Nope', ''])}`, `Content-Type: ${pick(rng, CONTENT_TYPES)}`];
  let payload: Buffer;
  if (delivery === 'length') {
    head.push(`Content-Length: ${bytes.length}`);
    payload = bytes;
  } else if (delivery === 'truncated') {
    head.push(`Content-Length: ${bytes.length + 10}`);
    payload = bytes;
  } else if (delivery === 'chunked') {
    head.push('Transfer-Encoding: chunked');
    payload =
      bytes.length > 0
        ? Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')])
        : Buffer.from('0\r\n\r\n');
  } else {
    payload = bytes;
  }
  if (status === 301) head.push('Location: /elsewhere');
  const complete = delivery !== 'truncated';
  const meaning = carrierMeaning(body);
  const said = complete ? meaning.failure : undefined;
  // A refusal whose body names nothing: 401 alone says Unauthorized.
  const expectedFailure = said ?? (complete && status === 401 && !meaning.ambiguous ? 'Unauthorized' : undefined);
  return {
    write: () => Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\nConnection: close\r\n\r\n`), payload]),
    failure: expectedFailure,
    // A truncated 401 may be read as Unauthorized (status) or as a drop (body never ended): both are sound.
    ambiguous: meaning.ambiguous || (status === 401 && !complete),
    messages: undefined,
    desc: `refusal ${status} ${delivery} ${JSON.stringify(body.slice(0, 80))}`,
  };
}

function badHandshakeScenario(rng: Rng): WsScenario {
  const variant = int(rng, 5);
  return {
    write: (key) => {
      const accept = wsAccept(key);
      const lines = ['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade'];
      if (variant === 0) lines.push('Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=');
      if (variant === 1) lines.splice(1, 1);
      if (variant === 2) lines.push(`Sec-WebSocket-Accept: ${accept}`, 'Sec-WebSocket-Protocol: chat');
      if (variant === 3) lines.push(`Sec-WebSocket-Accept: ${accept}`, 'Sec-WebSocket-Extensions: permessage-deflate');
      return variant === 4 ? Buffer.alloc(0) : Buffer.from(`${lines.join('\r\n')}\r\n\r\n`);
    },
    failure: undefined,
    ambiguous: false,
    messages: undefined,
    desc: `bad handshake variant ${variant}`,
  };
}

function openScenario(rng: Rng): WsScenario {
  const parts: Buffer[] = [];
  const desc: string[] = [];
  let messages = 0;
  let ambiguous = false;
  const carrier = pick(rng, ['none', 'none', 'frame', 'close'] as const);
  const failure = carrier === 'none' ? undefined : pick(rng, FAILURES);
  const frames = int(rng, 5);
  const carrierAt = carrier === 'frame' ? int(rng, frames + 1) : -1;
  for (let i = 0; i <= frames; i++) {
    if (i === carrierAt && failure) {
      const text = Buffer.from(canonicalCarrier(rng, failure, false));
      if (chance(rng, 0.3) && text.length > 2) {
        const cut = 1 + int(rng, text.length - 1);
        parts.push(frame(0x1, text.subarray(0, cut), { fin: false }), frame(0x0, text.subarray(cut)));
        desc.push('fragmented failure frame');
      } else {
        parts.push(frame(0x1, text));
        desc.push('failure frame');
      }
      continue;
    }
    if (i === frames) break;
    const kind = int(rng, 7);
    if (kind <= 1) {
      const text = nearMissCarrier(rng);
      ambiguous ||= carrierMeaning(text, false).ambiguous || carrierMeaning(text, false).failure !== undefined;
      parts.push(frame(0x1, Buffer.from(text)));
      messages++;
      desc.push(`text ${JSON.stringify(text.slice(0, 40))}`);
    } else if (kind === 2) {
      parts.push(
        frame(0x2, Buffer.from(chance(rng, 0.5) ? JSON.stringify({ code: 400, msg: pick(rng, FAILURES) }) : randomBytes(rng, 300))),
      );
      messages++;
      desc.push('binary');
    } else if (kind === 3) {
      parts.push(frame(0x1, Buffer.from('y'.repeat(4097 + int(rng, 20_000)))));
      messages++;
      desc.push('large text');
    } else if (kind === 4) {
      parts.push(frame(0x9, randomBytes(rng, 100)));
      desc.push('ping');
    } else if (kind === 5) {
      parts.push(frame(0xa, randomBytes(rng, 100)));
      desc.push('pong');
    } else {
      parts.push(frame(0x1, Buffer.alloc(0)));
      messages++;
      desc.push('empty text');
    }
  }
  let ending = pick(rng, ['close', 'close', 'end', 'protocol-error'] as const);
  if (carrier === 'close') ending = 'close';
  let checkable = true;
  if (ending === 'close') {
    const reason =
      carrier === 'close' && failure ? canonicalCarrier(rng, failure) : chance(rng, 0.5) ? nearMissCarrier(rng).slice(0, 40) : '';
    if (carrier !== 'close') ambiguous ||= carrierMeaning(reason).ambiguous || carrierMeaning(reason).failure !== undefined;
    const reasonBytes = Buffer.from(reason);
    const code = pick(rng, VALID_CLOSE_CODES);
    parts.push(frame(0x8, closePayload(code, reasonBytes.length <= 123 ? reasonBytes : reasonBytes.subarray(0, 0))));
    desc.push(`close ${code} ${JSON.stringify(reason)}`);
  } else if (ending === 'end') {
    desc.push('end without close');
  } else {
    const broken = int(rng, 9);
    const bad = [
      () => frame(0x3, Buffer.from('reserved opcode')),
      () => frame(0x1, Buffer.from('rsv1 without an extension'), { rsv: 4 }),
      () => frame(0x1, Buffer.from('masked by a server'), { mask: true }),
      () => frame(0x1, Buffer.from(pick(rng, INVALID_UTF8))),
      () => frame(0x8, closePayload(pick(rng, INVALID_CLOSE_CODES), 'bad code')),
      () => frame(0x8, Buffer.from([0x03])),
      () => frame(0x9, Buffer.alloc(126)),
      () => frame(0x9, Buffer.from('fragmented ping'), { fin: false }),
      () => frame(0x0, Buffer.from('continuation out of nowhere')),
    ][broken]!;
    parts.push(bad());
    desc.push(`protocol error ${broken}`);
    checkable = false;
  }
  return {
    write: (key) => {
      const accept = wsAccept(key);
      return Buffer.concat([
        Buffer.from(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
        ),
        ...parts,
      ]);
    },
    failure,
    ambiguous,
    messages: checkable && !failure ? messages : undefined,
    desc: `open: ${desc.join(', ')}`,
  };
}

function wsScenario(seed: number, lane: number, attempt: number): WsScenario {
  const rng = prng((seed ^ Math.imul(lane + 1, 0x9e3779b1) ^ Math.imul(attempt, 0x85ebca6b)) >>> 0);
  const r = rng();
  return r < 0.35 ? refusalScenario(rng) : r < 0.4 ? badHandshakeScenario(rng) : openScenario(rng);
}

interface Attempt {
  served: number;
  invalidated: boolean;
  displaced: number;
  backoffs: string[];
  messages: number;
}

/** A raw peer that plays the scenario named by the attempt number in the Bearer token. */
async function rawPeer(lane: number): Promise<{ url: string; served: Map<number, WsScenario>; close(): Promise<void> }> {
  const served = new Map<number, WsScenario>();
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    // Whatever the link sends (pongs, close frames) is read and ignored.
    socket.resume();
    const attempt = Number(/^Bearer tok-\d+-(\d+)$/.exec(req.headers.authorization ?? '')?.[1]);
    const scenario = wsScenario(SEED, lane, attempt);
    served.set(attempt, scenario);
    socket.end(scenario.write(String(req.headers['sec-websocket-key'] ?? '')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/soulmate/voiceChat/v1`,
    served,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

interface LaneResult {
  problems: string[];
  states: string[];
  attempts: number;
  /** Attempts by the failure the link recognised ('none' for a plain drop). */
  recognised: Record<string, number>;
  messagesChecked: number;
}

async function runLane(lane: number, logDir: string): Promise<LaneResult> {
  const peer = await rawPeer(lane);
  cleanups.push(() => peer.close());
  const attempts: Attempt[] = [];
  let n = 0;
  // The lane is done when the link asks for the token of one attempt past the last; 10 s with no new
  // attempt is a hang, reported with the scenario the link hung on.
  let stall: NodeJS.Timeout | undefined;
  let progressed = (): void => undefined;
  const done = new Promise<void>((resolve, reject) => {
    progressed = () => {
      clearTimeout(stall);
      if (n > WS_PER_LANE) return resolve();
      stall = setTimeout(() => {
        const stuck = peer.served.get(n);
        reject(
          new Error(
            `seed ${SEED} lane ${lane}: the link made no progress for 10 s at attempt ${n} (${stuck?.desc ?? 'never reached the peer'}), state ${link.status.state}`,
          ),
        );
      }, 10_000);
    };
  });
  const tokens: TokenSource = {
    current: () => {
      n++;
      attempts[n] = { served: 0, invalidated: false, displaced: 0, backoffs: [], messages: 0 };
      progressed();
      return Promise.resolve(`tok-${lane}-${n}`);
    },
    invalidate: (token) => {
      const at = Number(/^tok-\d+-(\d+)$/.exec(token ?? '')?.[1]);
      if (attempts[at]) attempts[at].invalidated = true;
    },
  };
  const log = pino({ level: 'debug' }, pino.destination({ dest: join(logDir, `lane-${lane}.log`), sync: true }));
  const link = new LinkSupervisor({
    wsUrl: peer.url,
    botId: 'bot-fuzz',
    tokens,
    clock: systemClock,
    log,
    backoff: { baseMs: 0, capMs: 0 },
    displacedBackoff: { baseMs: 0, capMs: 0 },
    botInvalidRetryMs: 0,
    connectTimeoutMs: 5000,
    heartbeatIntervalMs: 60_000,
  });
  const states: string[] = [];
  link.on('state', (s: { state: string }) => states.push(s.state));
  link.on('backoff', (b: { reason: string }) => attempts[n]?.backoffs.push(b.reason));
  link.on('displaced', () => {
    const a = attempts[n];
    if (a) a.displaced++;
  });
  link.on('message', () => {
    const a = attempts[n];
    if (a) a.messages++;
  });
  cleanups.push(
    () => link.stop(),
    () => clearTimeout(stall),
  );
  progressed();
  link.start();
  await done;
  await link.stop();

  const problems: string[] = [];
  const recognised: Record<string, number> = {};
  let messagesChecked = 0;
  for (let i = 1; i <= WS_PER_LANE; i++) {
    const a = attempts[i]!;
    const s = peer.served.get(i);
    const where = `seed ${SEED} lane ${lane} attempt ${i}`;
    if (!s) {
      problems.push(`${where}: never reached the peer`);
      continue;
    }
    const seen: Failure[] = [];
    if (a.invalidated) seen.push('Unauthorized');
    if (a.displaced > 0) seen.push('REPEAT_CLIENT_SESSION');
    if (a.backoffs.some((b) => b.startsWith('botId not found or invalid'))) seen.push('botId not found or invalid');
    recognised[seen[0] ?? 'none'] = (recognised[seen[0] ?? 'none'] ?? 0) + 1;
    if (s.messages !== undefined) messagesChecked++;
    const endings = a.backoffs.length + (a.invalidated && a.backoffs.length === 0 ? 1 : 0);
    if (seen.length > 1 || endings !== 1) problems.push(`${where}: ${endings} endings, recognised [${seen.join(', ')}] for ${s.desc}`);
    else if (!s.ambiguous && seen[0] !== s.failure)
      problems.push(`${where}: recognised ${seen[0] ?? 'nothing'}, expected ${s.failure ?? 'nothing'} for ${s.desc}`);
    else if (s.messages !== undefined && a.messages !== s.messages)
      problems.push(`${where}: passed on ${a.messages} messages, expected ${s.messages} for ${s.desc}`);
  }
  return { problems, states, attempts: WS_PER_LANE, recognised, messagesChecked };
}

describe(`LinkSupervisor under generated WebSocket peers (seed ${SEED})`, () => {
  it(`${WS_LANES * WS_PER_LANE} connection attempts: five states only, exactly the three 400 messages recognised, nothing thrown`, async () => {
    const logDir = tempDir('botlink-fuzz-ws-');
    const lanes = await Promise.all(Array.from({ length: WS_LANES }, (_, lane) => runLane(lane, logDir)));
    const problems = lanes.flatMap((l) => l.problems);
    expect(problems.slice(0, 20), `seed ${SEED}: ${problems.length} problems`).toEqual([]);
    const states = new Set(lanes.flatMap((l) => l.states));
    expect([...states].filter((s) => !LINK_STATES.has(s))).toEqual([]);
    expect(states.has('connected') && states.has('displaced') && states.has('backoff')).toBe(true);
    expect(lanes.reduce((sum, l) => sum + l.attempts, 0)).toBeGreaterThanOrEqual(2000);
    // The generator reaches every outcome often: each failure, plain drops, and counted deliveries.
    const total = (key: string): number => lanes.reduce((sum, l) => sum + (l.recognised[key] ?? 0), 0);
    for (const failure of FAILURES) expect(total(failure), failure).toBeGreaterThanOrEqual(100);
    expect(total('none')).toBeGreaterThanOrEqual(800);
    expect(lanes.reduce((sum, l) => sum + l.messagesChecked, 0)).toBeGreaterThanOrEqual(300);
  });
});
