import { describe, expect, it } from 'vitest';
import {
  decideLink,
  DISPLACED_RESET_MS,
  DUPLICATE_WINDOW_MS,
  frameFailure,
  initialLinkMemory,
  MAX_FAILURE_BODY,
  type LinkDecision,
  type LinkEnding,
  type LinkFacts,
  type LinkMemory,
  type ReconnectCause,
} from '../../../src/agent/link/decide.js';
import type { AppReconnectCause } from '../../../src/agent/link/app-pacing.js';
import { LINK_DEFAULTS, MAX_CLOUD_MESSAGE_BYTES, resolveLinkSettings, type LinkSettings } from '../../../src/agent/link/options.js';
import { LINK_BACKOFF } from '../../../src/agent/link/options.js';
import { WS_FAILURE_FIXES, WsMessage } from '../../../src/protocol/codes.js';
import { wsFailureBody } from '../../../src/protocol/wire.js';
import { S, MIN } from '../../helpers/time.js';

const NOW = 5_000_000;
/** Just below 1: every delay is its window's ceiling − 1, which tells the windows apart. */
const TOP = 1 - Number.EPSILON;

/** A configured link backoff unlike the built-in one (0.5 s → 60 s), so using the wrong one shows. */
const SETTINGS: LinkSettings = resolveLinkSettings({ botId: 'bot-1', backoff: { baseMs: 100, capMs: 1_600 } });

const EVENT = JSON.stringify({
  code: 200,
  msg: 'displaced',
  contentType: 'EVENT',
  content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} },
});
const UNAUTHORIZED_AGAIN = 'Unauthorized again with a renewed token';
const BOT_INVALID = 'botId not found or invalid';
const SHARED_FIX = WS_FAILURE_FIXES[WsMessage.REPEAT_SESSION];
const DISPLACED = 'REPEAT_CLIENT_SESSION: another connection holds this botId';

interface Given extends Partial<LinkMemory> {
  upMs?: number;
  accepted?: boolean;
  attempt?: number;
  displacedAttempt?: number;
}

function factsOf(g: Given = {}): LinkFacts {
  const { upMs, accepted, attempt, displacedAttempt, ...memory } = g;
  // Frozen: a pure decision never writes into what it was given.
  return Object.freeze({
    ...initialLinkMemory(),
    ...(attempt !== undefined && { backoff: { attempt } }),
    ...(displacedAttempt !== undefined && { displacedBackoff: { attempt: displacedAttempt } }),
    ...memory,
    now: NOW,
    accepted: accepted ?? false,
    ...(upMs !== undefined && { upMs }),
  });
}

/** What a row expects; memory fields are checked only where given. */
interface Expect {
  next: LinkDecision['next'];
  reason: string;
  fix?: string;
  invalidate?: boolean;
  attempt?: number;
  displacedAttempt?: number;
  streak?: number;
  displaced?: number;
  shared?: boolean;
  cause?: ReconnectCause;
}

const backoff = (delayMs: number) => ({ state: 'backoff', delayMs }) as const;
const displaced = (delayMs: number) => ({ state: 'displaced', delayMs }) as const;
const NOW_AGAIN = { state: 'connecting' } as const;

const closed = (code: number, reason = ''): LinkEnding => ({ kind: 'closed', code, reason });
const refused = (status: number, body = ''): LinkEnding => ({ kind: 'refused', status, body });
const frame = (failure: (typeof WsMessage)[keyof typeof WsMessage]): LinkEnding => ({ kind: 'frame', failure });

/** Every ending kind, on a connection that never opened (no `upMs`) unless the facts say otherwise. r = TOP. */
const ROWS: [string, LinkEnding, Given, Expect][] = [
  // Plain drops: the link backoff (100 ms → 1.6 s here), attempt by attempt.
  ['clean close 1000 before open → backoff', closed(1000), {}, { next: backoff(99), reason: 'closed (1000)', attempt: 1, cause: 'closed' }],
  [
    'close with a reason that is no failure → its words',
    closed(1001, 'going away'),
    {},
    { next: backoff(99), reason: 'closed (1001 going away)' },
  ],
  [
    'abnormal close 1006 on attempt 3 → window of attempt 3',
    closed(1006),
    { attempt: 3 },
    { next: backoff(799), reason: 'closed (1006)', attempt: 4 },
  ],
  [
    'drop of an established socket → retries from attempt 2',
    closed(1006),
    { upMs: 5 * S },
    { next: backoff(399), reason: 'closed (1006)', attempt: 3 },
  ],
  [
    'drop of a socket open 0 ms is still established',
    closed(1006),
    { upMs: 0 },
    { next: backoff(399), reason: 'closed (1006)', attempt: 3 },
  ],
  [
    'drop of an established socket past attempt 2 → keeps its attempt',
    closed(1006),
    { upMs: 5 * S, attempt: 3 },
    { next: backoff(799), reason: 'closed (1006)', attempt: 4 },
  ],
  [
    'drop of an established socket ends an Unauthorized streak',
    closed(1006),
    { upMs: 5 * S, unauthorizedStreak: 2 },
    { next: backoff(399), reason: 'closed (1006)', streak: 0 },
  ],
  [
    'a drop before open keeps the Unauthorized streak',
    closed(1006),
    { unauthorizedStreak: 2 },
    { next: backoff(99), reason: 'closed (1006)', streak: 2 },
  ],
  [
    'network error → its message',
    { kind: 'socket-error', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:9' },
    {},
    { next: backoff(99), reason: 'connect ECONNREFUSED 127.0.0.1:9', cause: 'network' },
  ],
  [
    'message over the limit (ws closes 1009) → its own words, as a drop',
    { kind: 'socket-error', code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', message: 'Max payload size exceeded' },
    { upMs: S },
    {
      next: backoff(399),
      reason: `the cloud sent a message over ${MAX_CLOUD_MESSAGE_BYTES} bytes: closed with 1009`,
      attempt: 3,
      cause: 'oversized',
    },
  ],
  [
    'handshake deadline → says the configured deadline',
    { kind: 'handshake-timeout' },
    {},
    { next: backoff(99), reason: 'WebSocket handshake not complete within 10000 ms', cause: 'handshake-timeout' },
  ],
  [
    'pong timeout on an established socket → a drop',
    { kind: 'pong-timeout' },
    { upMs: 30 * S },
    { next: backoff(399), reason: 'no pong within 15000 ms', attempt: 3, cause: 'pong-timeout' },
  ],
  [
    'token unavailable → the configured backoff, not the built-in one',
    { kind: 'no-token', message: 'service down' },
    {},
    { next: backoff(99), reason: 'no token: service down', attempt: 1, invalidate: false, cause: 'no-token' },
  ],
  [
    "token refused for a reason a person must fix → the token error's fix",
    { kind: 'no-token', message: 'getToken refused with code 1005', fix: 'check the secret-key file' },
    {},
    { next: backoff(99), reason: 'no token: getToken refused with code 1005', fix: 'check the secret-key file', attempt: 1 },
  ],
  [
    'token unavailable on attempt 4 → the configured cap',
    { kind: 'no-token', message: 'x' },
    { attempt: 4 },
    { next: backoff(1_599), reason: 'no token: x', attempt: 5 },
  ],
  [
    'request cannot be built → renew the token, back off',
    { kind: 'unopenable', message: 'Invalid character in header content ["Authorization"]' },
    {},
    { next: backoff(99), reason: 'cannot open the WebSocket: Invalid character in header content ["Authorization"]', invalidate: true },
  ],
  [
    'HTTP 503 without a failure body → a drop with the status',
    refused(503, 'busy'),
    {},
    { next: backoff(99), reason: 'handshake refused with HTTP 503', cause: 'refused' },
  ],
  [
    'HTTP 400 with a body that is no failure → a drop',
    refused(400, '{"code":400,"msg":"something else"}'),
    {},
    { next: backoff(99), reason: 'handshake refused with HTTP 400' },
  ],

  // Unauthorized, in every form: the first renews and reconnects at once; a second in a row backs off.
  [
    'HTTP 401, empty body → Unauthorized: renew, reconnect now',
    refused(401),
    {},
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1, attempt: 0, cause: 'unauthorized' },
  ],
  [
    'HTTP 401 with a body of another sort → still Unauthorized',
    refused(401, '<html>no</html>'),
    {},
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],
  [
    'HTTP 400 {code 400, Unauthorized} → Unauthorized',
    refused(400, wsFailureBody(WsMessage.UNAUTHORIZED)),
    {},
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],
  [
    'HTTP 400 bare "Unauthorized" → Unauthorized',
    refused(400, 'Unauthorized'),
    {},
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],
  [
    'Unauthorized frame → Unauthorized',
    frame(WsMessage.UNAUTHORIZED),
    { upMs: S },
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],
  [
    'Unauthorized close reason → Unauthorized',
    closed(4001, 'Unauthorized'),
    { upMs: S },
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],
  [
    'a second Unauthorized in a row → back off and say why',
    refused(401),
    { unauthorizedStreak: 1 },
    {
      next: backoff(99),
      reason: UNAUTHORIZED_AGAIN,
      fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED],
      invalidate: true,
      streak: 2,
      attempt: 1,
    },
  ],
  [
    'a third, on attempt 2 → window of attempt 2',
    frame(WsMessage.UNAUTHORIZED),
    { unauthorizedStreak: 2, attempt: 2, upMs: S },
    {
      next: backoff(399),
      reason: UNAUTHORIZED_AGAIN,
      fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED],
      invalidate: true,
      streak: 3,
      attempt: 3,
    },
  ],
  [
    'a failure on an established socket keeps the streak (no dropped-socket rule)',
    frame(WsMessage.UNAUTHORIZED),
    { unauthorizedStreak: 1, upMs: S },
    { next: backoff(99), reason: UNAUTHORIZED_AGAIN, fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED], invalidate: true, streak: 2 },
  ],
  [
    'Unauthorized after the cloud answered this session (pong, message) → a first one again',
    frame(WsMessage.UNAUTHORIZED),
    { unauthorizedStreak: 3, upMs: S, accepted: true },
    { next: NOW_AGAIN, reason: 'Unauthorized', invalidate: true, streak: 1 },
  ],

  // botId not found or invalid: a slow fixed retry, the backoff untouched.
  [
    'HTTP 400 botId invalid → slow retry',
    refused(400, wsFailureBody(WsMessage.BOT_INVALID)),
    { attempt: 3 },
    { next: backoff(300_000), reason: BOT_INVALID, fix: WS_FAILURE_FIXES[WsMessage.BOT_INVALID], attempt: 3, invalidate: false },
  ],
  [
    'botId invalid frame → slow retry',
    frame(WsMessage.BOT_INVALID),
    { upMs: S },
    { next: backoff(300_000), reason: BOT_INVALID, fix: WS_FAILURE_FIXES[WsMessage.BOT_INVALID], attempt: 0 },
  ],
  [
    'botId invalid close reason → slow retry',
    closed(4000, WsMessage.BOT_INVALID),
    {},
    { next: backoff(300_000), reason: BOT_INVALID, fix: WS_FAILURE_FIXES[WsMessage.BOT_INVALID] },
  ],

  // REPEAT_CLIENT_SESSION, as code 400 or as the guide's EVENT, in every form: the displaced backoff (equal jitter).
  [
    'HTTP 400 {code 400, REPEAT_CLIENT_SESSION} → displaced [30 s, 60 s)',
    refused(400, wsFailureBody(WsMessage.REPEAT_SESSION)),
    {},
    { next: displaced(59_999), reason: DISPLACED, displaced: 1, displacedAttempt: 1, shared: false },
  ],
  [
    'HTTP 400 with the displacement EVENT → displaced',
    refused(400, EVENT),
    {},
    { next: displaced(59_999), reason: DISPLACED, displaced: 1 },
  ],
  [
    'REPEAT_CLIENT_SESSION frame → displaced',
    frame(WsMessage.REPEAT_SESSION),
    { upMs: S },
    { next: displaced(59_999), reason: DISPLACED, displaced: 1 },
  ],
  [
    'REPEAT_CLIENT_SESSION close reason → displaced',
    closed(4000, WsMessage.REPEAT_SESSION),
    { upMs: S },
    { next: displaced(59_999), reason: DISPLACED, displaced: 1 },
  ],
  [
    'displacement EVENT as a close reason → displaced',
    closed(4000, EVENT),
    { upMs: S },
    { next: displaced(59_999), reason: DISPLACED, displaced: 1 },
  ],
  [
    'displaced again → the next window, the link backoff untouched',
    frame(WsMessage.REPEAT_SESSION),
    { displacedAttempt: 2, attempt: 4, upMs: S },
    { next: displaced(239_999), reason: DISPLACED, displacedAttempt: 3, attempt: 4, displaced: 1 },
  ],
  [
    'displaced on attempt 9 → capped below 30 min',
    frame(WsMessage.REPEAT_SESSION),
    { displacedAttempt: 9 },
    { next: displaced(1_799_999), reason: DISPLACED, displaced: 1 },
  ],
  [
    'a third displacement within 10 min → two devices share the botId',
    frame(WsMessage.REPEAT_SESSION),
    { displacements: [NOW - DUPLICATE_WINDOW_MS + 1, NOW - 5 * MIN] },
    {
      next: displaced(59_999),
      reason: 'REPEAT_CLIENT_SESSION: displaced 3 times in 10 min — two devices share botId bot-1',
      displaced: 3,
      shared: true,
      fix: SHARED_FIX,
    },
  ],
  [
    'displacements 10 min old no longer count',
    frame(WsMessage.REPEAT_SESSION),
    { displacements: [NOW - DUPLICATE_WINDOW_MS, NOW - 5 * MIN] },
    { next: displaced(59_999), reason: DISPLACED, displaced: 2, shared: false },
  ],

  // Up-time resets: a stable minute restarts the link backoff, ten minutes the displaced one.
  [
    'drop after 59.999 s up on attempt 5 → keeps attempt 5',
    closed(1006),
    { upMs: MIN - 1, attempt: 5 },
    { next: backoff(1_599), reason: 'closed (1006)', attempt: 6 },
  ],
  [
    'drop after a stable minute on attempt 5 → back to attempt 2',
    closed(1006),
    { upMs: MIN, attempt: 5 },
    { next: backoff(399), reason: 'closed (1006)', attempt: 3 },
  ],
  [
    'a second Unauthorized after a stable minute → attempt 0',
    refused(401),
    { upMs: MIN, attempt: 5, unauthorizedStreak: 1 },
    { next: backoff(99), reason: UNAUTHORIZED_AGAIN, fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED], invalidate: true, attempt: 1 },
  ],
  [
    'displaced after 9:59.999 up → keeps the displaced attempt',
    frame(WsMessage.REPEAT_SESSION),
    { upMs: DISPLACED_RESET_MS - 1, displacedAttempt: 3 },
    { next: displaced(479_999), reason: DISPLACED, displacedAttempt: 4, attempt: 0, displaced: 1 },
  ],
  [
    'displaced after 10 min up → the displaced backoff starts over',
    frame(WsMessage.REPEAT_SESSION),
    { upMs: DISPLACED_RESET_MS, displacedAttempt: 3 },
    { next: displaced(59_999), reason: DISPLACED, displacedAttempt: 1, displaced: 1 },
  ],
];

describe('decideLink: every ending kind × the facts that change it', () => {
  it.each(ROWS)('%s', (_name, ending, given, want) => {
    const d = decideLink(ending, factsOf(given), SETTINGS, TOP);
    expect(d.next).toEqual(want.next);
    expect(d.reason).toBe(want.reason);
    expect(d.fix).toBe(want.fix);
    expect(d.invalidateToken).toBe(want.invalidate ?? false);
    expect(d.sharedBotId).toBe(want.shared ?? false);
    expect(d.displaced).toEqual(want.displaced === undefined ? undefined : { count: want.displaced });
    if (want.attempt !== undefined) expect(d.memory.backoff.attempt).toBe(want.attempt);
    if (want.displacedAttempt !== undefined) expect(d.memory.displacedBackoff.attempt).toBe(want.displacedAttempt);
    if (want.streak !== undefined) expect(d.memory.unauthorizedStreak).toBe(want.streak);
    if (want.cause !== undefined) expect(d.cause).toBe(want.cause);
  });

  it('records the displacement at `now` and forgets those out of the window', () => {
    const d = decideLink(
      frame(WsMessage.REPEAT_SESSION),
      factsOf({ displacements: [NOW - DUPLICATE_WINDOW_MS - 1, NOW - MIN] }),
      SETTINGS,
      0,
    );
    expect(d.memory.displacements).toEqual([NOW - MIN, NOW]);
  });
});

/** Feeds each decision's memory into the next, as the supervisor does. */
function run(endings: LinkEnding[], random: number, given: Given = {}): LinkDecision[] {
  let facts = factsOf(given);
  return endings.map((e) => {
    const d = decideLink(e, facts, SETTINGS, random);
    facts = { ...facts, ...d.memory };
    return d;
  });
}

describe('decideLink: schedules', () => {
  it('the link backoff doubles from its base to its cap (full jitter: [0, ceiling))', () => {
    const fails = Array.from({ length: 7 }, () => closed(1006));
    expect(run(fails, TOP).map((d) => d.next)).toEqual([99, 199, 399, 799, 1_599, 1_599, 1_599].map(backoff));
    expect(run(fails, 0).map((d) => d.next)).toEqual(Array.from({ length: 7 }, () => backoff(0)));
  });

  it('REPEAT_CLIENT_SESSION backs off from 30 s, doubling, to 30 min (equal jitter: [ceiling/2, ceiling))', () => {
    const displacements = Array.from({ length: 8 }, () => frame(WsMessage.REPEAT_SESSION));
    const floors = [30, 60, 120, 240, 480, 900, 900, 900].map((s) => displaced(s * S));
    const ceilings = [60, 120, 240, 480, 960, 1_800, 1_800, 1_800].map((s) => displaced(s * S - 1));
    expect(run(displacements, 0).map((d) => d.next)).toEqual(floors);
    expect(run(displacements, TOP).map((d) => d.next)).toEqual(ceilings);
  });

  it('the built-in link backoff is 0.5 s → 60 s when none is configured', () => {
    const d = decideLink({ kind: 'no-token', message: 'x' }, factsOf({ attempt: 20 }), resolveLinkSettings({ botId: 'b' }), TOP);
    expect(d.next).toEqual(backoff(LINK_BACKOFF.capMs - 1));
  });

  it('Unauthorized twice: at once, then backoff; a pong in between starts over', () => {
    const u = frame(WsMessage.UNAUTHORIZED);
    expect(run([u, u, u], TOP).map((d) => d.next.state)).toEqual(['connecting', 'backoff', 'backoff']);
    let facts = factsOf();
    const states = [false, true, false].map((accepted) => {
      const d = decideLink(u, { ...facts, accepted }, SETTINGS, TOP);
      facts = { ...facts, ...d.memory };
      return d.next.state;
    });
    expect(states).toEqual(['connecting', 'connecting', 'backoff']);
  });
});

describe('frameFailure: which frames end the session', () => {
  const text = (s: string) => [false, Buffer.byteLength(s), () => s] as const;
  it.each([
    ['{code 400, Unauthorized}', wsFailureBody(WsMessage.UNAUTHORIZED), WsMessage.UNAUTHORIZED],
    ['{code 400, botId invalid}', wsFailureBody(WsMessage.BOT_INVALID), WsMessage.BOT_INVALID],
    ['{code 400, REPEAT_CLIENT_SESSION}', wsFailureBody(WsMessage.REPEAT_SESSION), WsMessage.REPEAT_SESSION],
    ["the guide's displacement EVENT", EVENT, WsMessage.REPEAT_SESSION],
    ['a bare word (conversation may say it)', 'Unauthorized', undefined],
    [
      'a conversation EVENT',
      JSON.stringify({ code: 200, msg: '', contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT', eventData: {} } }),
      undefined,
    ],
    ['a TEXT frame', JSON.stringify({ contentType: 'TEXT', content: { text: 'Unauthorized' } }), undefined],
  ])('%s', (_name, body, want) => {
    expect(frameFailure(...text(body))).toBe(want);
  });

  it('a binary frame, or a text one over 4 KiB, is conversation and is not even read', () => {
    const unread = () => {
      throw new Error('read');
    };
    expect(frameFailure(true, 40, unread)).toBeUndefined();
    expect(frameFailure(false, MAX_FAILURE_BODY + 1, unread)).toBeUndefined();
    expect(frameFailure(false, MAX_FAILURE_BODY, () => wsFailureBody(WsMessage.UNAUTHORIZED))).toBe(WsMessage.UNAUTHORIZED);
  });
});

describe('resolveLinkSettings: every default in one place', () => {
  it('fills what is left out from LINK_DEFAULTS', () => {
    expect(resolveLinkSettings({ botId: 'b' })).toEqual({ ...LINK_DEFAULTS, botId: 'b' });
    expect(LINK_DEFAULTS).toMatchObject({
      tokenMarginMs: 300_000,
      backoff: LINK_BACKOFF,
      botInvalidRetryMs: 300_000,
      heartbeatIntervalMs: 15_000,
      heartbeatTimeoutMs: 15_000,
      connectTimeoutMs: 10_000,
      stableAfterMs: 60_000,
      appReconnectsPerMinute: 6,
    });
  });

  it('keeps what is given, zero included', () => {
    const given = {
      tokenMarginMs: 0,
      backoff: { baseMs: 1, capMs: 2 },
      displacedBackoff: { baseMs: 3, capMs: 4 },
      botInvalidRetryMs: 5,
      heartbeatIntervalMs: 6,
      heartbeatTimeoutMs: 7,
      connectTimeoutMs: 8,
      stableAfterMs: 0,
      appReconnectsPerMinute: 9,
    };
    expect(resolveLinkSettings({ botId: 'b', ...given })).toEqual({ botId: 'b', ...given });
  });
});

describe('decideLink: reconnects an app causes (DESIGN §3.5), paced by paceAppReconnect', () => {
  const app = (cause: AppReconnectCause = 'app-params'): LinkEnding => ({ kind: 'app', cause });

  it('one the pacing lets go at once reconnects now; one it holds waits in backoff; either under its cause', () => {
    const now = decideLink(app(), factsOf({ appReconnects: [NOW - MIN] }), SETTINGS, TOP);
    expect(now).toMatchObject({ next: NOW_AGAIN, reason: 'an app asked for other connection parameters', cause: 'app-params' });
    const paced = decideLink(app('app-reattach'), factsOf({ appReconnects: [NOW - S] }), SETTINGS, TOP);
    expect(paced).toMatchObject({ next: backoff(99), cause: 'app-reattach', invalidateToken: false, sharedBotId: false });
    expect(paced.memory).toMatchObject({ appReconnects: [NOW - S], backoff: { attempt: 1 } });
  });

  it('starts the schedule over after a socket that held stableAfterMs', () => {
    const d = decideLink(app(), factsOf({ appReconnects: [NOW - S], attempt: 4, upMs: MIN }), SETTINGS, TOP);
    expect(d.next).toEqual(backoff(99));
  });
});
