import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BrokerClient } from '../../../src/agent/broker/client.js';
import { createDeviceKey } from '../../../src/agent/config/device-key.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { ServerTime } from '../../../src/agent/time/servertime.js';
import type { TimeSyncResult } from '../../../src/agent/time/timesync.js';
import { brokerSource } from '../../../src/agent/token/broker-source.js';
import { TokenManager } from '../../../src/agent/token/manager.js';
import { type DeviceAuthorization, parseDeviceAuthorization, publicKeyFromWire, verifyRequest } from '../../../src/protocol/device-sig.js';
import { SYNCED, UNKNOWN } from '../../helpers/agent-kit.js';
import { Changes } from '../../helpers/changes.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';
import { S, MIN, H } from '../../helpers/time.js';

/**
 * The token manager in broker mode (DESIGN §3.7) on a ManualClock, against a broker played by a real
 * HTTP server on 127.0.0.1 that verifies every signature and stamps its Date with the same manual clock.
 * The manager's policy and backoff are signing mode's: only where tokens come from differs.
 */

const ENROLL = 'botlink provision --broker URL --code CODE --device-id SN';
const { cleanups, tempDir } = useHarness();

/** What the broker saw of one /v1/token: the signed ts and the minValidityS asked. */
interface Asked {
  ts: number;
  minValidityS: number | undefined;
}
type Special = (res: ServerResponse, auth: DeviceAuthorization) => void;

interface Rig {
  clock: ManualClock;
  tokens: TokenManager;
  store: TokenStore;
  changes: Changes;
  asked: Asked[];
  health: { count: number };
  /** Answers for the next /v1/token requests, in order; afterwards each gets a fresh 2 h token. */
  next: Special[];
  logLines: string[];
}

async function rig(
  o: { clock?: ManualClock; verdict?: TimeSyncResult; botId?: string; stateDir?: string; brokerWall?: () => number } = {},
): Promise<Rig> {
  const clock = o.clock ?? new ManualClock();
  const brokerWall = o.brokerWall ?? (() => clock.wallNow());
  const dir = tempDir('botlink-broker-mode-');
  const key = createDeviceKey(join(dir, 'device-key.pem'));
  const wire = publicKeyFromWire(key.publicKey);
  const asked: Asked[] = [];
  const health = { count: 0 };
  const next: Special[] = [];
  let issued = 0;
  const server = await startScriptedServer((req, res, body) => {
    res.setHeader('date', new Date(brokerWall()).toUTCString());
    if (req.url === '/v1/health') {
      health.count++;
      return json(res, { ok: true, store: 'sqlite' });
    }
    const auth = parseDeviceAuthorization(req.headers.authorization);
    if (!verifyRequest(wire.key, auth, 'POST', req.url ?? '', Buffer.from(body))) return json(res, { code: 'bad-signature', msg: '' }, 401);
    asked.push({ ts: auth.tsMs, minValidityS: (JSON.parse(body) as { minValidityS?: number }).minValidityS });
    const special = next.shift();
    if (special) return special(res, auth);
    issued++;
    json(res, { botId: 'bot-1', accessToken: `at-${issued}`, expireIn: 7200, expiresAt: brokerWall() + 2 * H });
  });
  cleanups.push(() => server.close());
  const store = TokenStore.open(o.stateDir ?? join(dir, 'state'));
  const serverTime = new ServerTime(clock);
  const client = new BrokerClient({
    brokerUrl: server.url,
    ca: null,
    key,
    clock,
    onDateSample: (date, sent, received) => serverTime.addSample(date, sent, received),
  });
  const changes = new Changes();
  const logLines: string[] = [];
  const tokens = new TokenManager({
    identity: { kind: 'bot', id: o.botId ?? 'bot-1' },
    baseUrl: 'http://127.0.0.1:9',
    accessKeyId: '',
    store,
    source: brokerSource(client, clock),
    serverTime,
    clock,
    checkTimeSync: async () => o.verdict ?? SYNCED,
    log: pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }),
    random: () => 0.5,
    onChange: changes.onChange,
  });
  cleanups.push(async () => {
    tokens.stop();
    await client.close();
    store.close();
  });
  return { clock, tokens, store, changes, asked, health, next, logLines };
}

/** Moves the clock `ms` on, first proving that the next timer falls exactly there. */
async function exactlyAfter(clock: ManualClock, ms: number): Promise<void> {
  await clock.advance(ms - 1);
  expect(clock.pending()[0]).toBe(1);
  await clock.advance(1);
}

const lastCode = (r: Rig) => r.tokens.snapshot().lastError?.code;

describe('TokenManager in broker mode: where signing mode signs or refreshes, it asks the broker', () => {
  it('sends its refresh point as minValidityS, keeps no refresh token, and asks again exactly at that point', async () => {
    const r = await rig();
    r.tokens.start();
    expect(await r.tokens.current()).toBe('at-1');
    expect(r.asked).toEqual([{ ts: r.clock.wallNow(), minValidityS: 1800 }]);
    const snap = r.tokens.snapshot();
    expect([snap.accessExpiresAt, snap.refreshExpiresAt, snap.renewals]).toEqual([
      r.clock.wallNow() + 2 * H,
      undefined,
      { signed: 1, refreshed: 0 },
    ]);
    // The cache holds the access token alone, under the broker's mark: no refresh token on the device.
    expect(r.store.peekPair()).toMatchObject({
      identity: { accessKeyId: '', kind: 'bot', id: 'bot-1' },
      pair: { accessToken: 'at-1', refreshToken: '' },
    });
    expect(r.logLines.join('')).toContain('"msg":"token issued by the broker"');

    await exactlyAfter(r.clock, 90 * MIN);
    await r.changes.until(() => r.tokens.snapshot().renewals.signed === 2, 'the renewal');
    expect(await r.tokens.current()).toBe('at-2');
    expect(r.asked).toHaveLength(2);
    expect(r.asked[1]).toEqual({ ts: r.clock.wallNow(), minValidityS: 1800 });
  });

  it('a caller that needs more life asks the broker for that much', async () => {
    const r = await rig();
    r.tokens.start();
    await r.tokens.current();
    await r.clock.advance(65 * MIN);
    // 55 min left, less than the 80 min asked once capped at half the lifetime: renewed, and the broker is
    // asked for the whole 80 min (it caps at half the lifetime itself).
    expect(await r.tokens.current({ minLeftMs: 80 * MIN })).toBe('at-2');
    expect(r.asked[1]?.minValidityS).toBe(80 * 60);
  });

  it('honours Retry-After: after a 429 the next ask comes no sooner, stretched by the jitter draw', async () => {
    const r = await rig();
    r.next.push((res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '120' });
      res.end(JSON.stringify({ code: 'rate-limited', msg: 'slow down' }));
    });
    r.tokens.start();
    const waiting = r.tokens.current();
    await r.changes.until(() => lastCode(r) === 'ERR_BROKER_RATE_LIMITED', 'the refusal');
    // The schedule draws 0.5 (500 ms); Retry-After 120 s stretched by 0.5 × 0.5: 150 s.
    expect(r.clock.pending()).toEqual([150 * S]);
    await r.clock.advance(150 * S - 1);
    expect(r.asked).toHaveLength(1);
    await r.clock.advance(1);
    expect(await waiting).toBe('at-1');
    expect(r.asked).toHaveLength(2);
  });

  it('after clock-skew asks once more, at the time the broker gave; a second refusal stands', async () => {
    const r = await rig();
    const brokerTime = r.clock.wallNow() + 7 * MIN;
    const skew = (res: ServerResponse): void => json(res, { code: 'clock-skew', msg: 'ts out of window', serverTime: brokerTime }, 401);
    r.next.push(skew);
    r.tokens.start();
    expect(await r.tokens.current()).toBe('at-1');
    expect(r.asked.map((a) => a.ts)).toEqual([r.clock.wallNow(), brokerTime]);
    expect(r.logLines.join('')).toContain('the broker refused the timestamp (clock-skew); asking once more with its time');

    const again = await rig();
    again.next.push(skew, skew);
    again.tokens.start();
    await again.changes.until(() => lastCode(again) === 'ERR_BROKER_CLOCK_SKEW', 'the second refusal');
    expect(again.asked).toHaveLength(2);
    expect(again.tokens.snapshot().lastError?.retry).toBe('needs-clock');
  });

  it('revoked: stops asking, says to re-enroll, and uses the token held until it ends', async () => {
    const r = await rig();
    r.tokens.start();
    expect(await r.tokens.current()).toBe('at-1');
    r.next.push((res) => json(res, { code: 'revoked', msg: 'this key was revoked' }, 403));
    await exactlyAfter(r.clock, 90 * MIN);
    await r.changes.until(() => lastCode(r) === 'ERR_BROKER_REVOKED', 'the revocation');
    const err = r.tokens.snapshot().lastError!;
    expect(err.retry).toBe('needs-provisioning');
    expect(err.fix).toContain(`re-enroll with \`${ENROLL}\` and a new code from the vendor`);
    // Later tries ask nothing of the broker; the token it holds is still handed out while it lasts.
    await r.clock.advance(29 * MIN);
    expect(r.asked).toHaveLength(2);
    expect(r.tokens.peek(0)?.token).toBe('at-1');
    await r.clock.advance(2 * MIN);
    expect(r.tokens.peek(0)).toBeUndefined();
    expect(r.asked).toHaveLength(2);
  });

  it('refuses a token for another botId than the config names, with the fix', async () => {
    const r = await rig({ botId: 'bot-7' });
    r.tokens.start();
    await r.changes.until(() => lastCode(r) === 'ERR_BROKER_BOT_MISMATCH', 'the mismatch');
    expect(r.tokens.snapshot().lastError).toMatchObject({
      retry: 'needs-config',
      message: 'the broker issued a token for botId bot-1, but the config names bot-7',
      fix: expect.stringMatching(/^set botId to "bot-1", the one the broker bound to this device key \(keyId [0-9a-f]{32}\)$/),
    });
    expect(r.tokens.peek(0)).toBeUndefined();
  });

  it("drops the pair signing mode cached, refresh token and all, for the broker's", async () => {
    const stateDir = tempDir('botlink-broker-mode-state-');
    const signed = TokenStore.open(stateDir);
    const clock = new ManualClock();
    const pair = {
      accessToken: 'signed-at',
      accessExpiresAt: clock.wallNow() + H,
      refreshToken: 'signed-rt',
      refreshExpiresAt: clock.wallNow() + 7 * 24 * H,
      issuedAt: clock.wallNow() - H,
    };
    signed.savePair({ baseUrl: 'http://127.0.0.1:9', accessKeyId: 'AK', kind: 'bot', id: 'bot-1' }, pair);
    signed.close();
    const r = await rig({ clock, stateDir });
    r.tokens.start();
    expect(await r.tokens.current()).toBe('at-1');
    expect(r.store.peekPair()?.pair).toMatchObject({ accessToken: 'at-1', refreshToken: '' });
  });

  it('on a board at 1970 with no time source, takes the time from the broker (health) and asks with it', async () => {
    const clock = new ManualClock({ wall: 100 * S });
    const start = { mono: clock.monoNow(), wall: Date.UTC(2026, 10, 22, 12, 0, 0) };
    const brokerWall = (): number => start.wall + clock.monoNow() - start.mono;
    const r = await rig({ clock, verdict: UNKNOWN, brokerWall });
    r.tokens.start();
    expect(await r.tokens.current()).toBe('at-1');
    expect(r.health.count).toBe(1);
    // Signed with the broker's time as its Date gave it (to the second), never with 1970.
    expect(Math.abs(r.asked[0]!.ts - brokerWall())).toBeLessThanOrEqual(1000);
    expect(r.tokens.snapshot().clock).toMatchObject({ trusted: true, source: 'server' });
  });
});
