import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BrokerClient } from '../../../src/agent/broker/client.js';
import { CONFLICT_ASK_MS } from '../../../src/agent/broker/enrollment.js';
import { createDeviceKey } from '../../../src/agent/config/device-key.js';
import { type Enrollment, enrollItself } from '../../../src/agent/daemon/zero-touch.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { TOKEN_BACKOFF } from '../../../src/agent/token/backoff.js';
import { keyIdOf } from '../../../src/protocol/device-sig.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';

/**
 * The zero-touch loop (src/agent/daemon/zero-touch.ts) on a ManualClock against a scripted broker: its
 * waits come from the injected Clock and Random, so each pace of DESIGN §3.7 is read off the timers.
 */
const { cleanups, tempDir } = useHarness();

type Answer = { status: number; body: unknown; retryAfter?: string };

async function rig(answers: ((keyId: string) => Answer)[], random = 0.25) {
  const clock = new ManualClock();
  let asked = 0;
  const server = await startScriptedServer((_req, res, body) => {
    const { publicKey } = JSON.parse(body) as { publicKey: string };
    const answer = (answers[Math.min(asked++, answers.length - 1)] as (k: string) => Answer)(keyIdOf(Buffer.from(publicKey, 'base64url')));
    res.setHeader('date', new Date(clock.wallNow()).toUTCString());
    if (answer.retryAfter !== undefined) res.setHeader('retry-after', answer.retryAfter);
    json(res, answer.body, answer.status);
  });
  cleanups.push(() => server.close());
  const dir = tempDir('botlink-zero-touch-');
  const key = createDeviceKey(join(dir, 'device-key.pem'));
  const store = TokenStore.open(join(dir, 'state'));
  cleanups.push(() => store.close());
  const broker = new BrokerClient({ brokerUrl: server.url, ca: null, key, clock });
  cleanups.push(() => broker.close());
  const seen: Enrollment[] = [];
  const abort = new AbortController();
  cleanups.push(() => abort.abort());
  const account = { baseUrl: 'https://api.example.com', accessKeyId: '' };
  const done = enrollItself(
    { clock, backoff: TOKEN_BACKOFF, store, account },
    broker,
    { vendorId: 'V1', deviceId: 'SN-LOOP' },
    {
      random: () => random,
      signal: abort.signal,
      log: pino({ level: 'silent' }),
      onEnrollment: (e) => seen.push(e),
    },
  );
  /** Resolves once the loop has heard `n` answers. */
  const answered = async (n: number): Promise<void> => {
    for (let i = 0; i < 500 && seen.length < n; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen.length).toBeGreaterThanOrEqual(n);
  };
  return { clock, server, store, seen, abort, done, answered, account };
}

const pending = (keyId: string): Answer => ({ status: 202, body: { state: 'pending', keyId } });

describe('enrollItself, zero-touch', () => {
  it('pending with no Retry-After asks again after 60 s ±20 % (drawn from the injected Random), then keeps the botId', async () => {
    const r = await rig([pending, (keyId) => ({ status: 200, body: { botId: 'bot-loop', vendorId: 'V1', keyId } })]);
    await r.answered(1);
    expect(r.seen[0]).toEqual({ state: 'pending', error: undefined });
    // random 0.25: 60 s × (0.8 + 0.4 × 0.25) = 54 s.
    expect(r.clock.pending()).toContain(54_000);
    await r.clock.advance(53_999);
    expect(r.server.requests).toHaveLength(1);
    await r.clock.advance(1);
    expect(await r.done).toBe('bot-loop');
    expect(r.seen.at(-1)).toEqual({ state: 'active', error: undefined });
    expect(r.store.getProvisionedBotId({ ...r.account, vendorId: 'V1', deviceId: 'SN-LOOP' })).toBe('bot-loop');
  });

  it('pending with Retry-After waits that long, stretched by the draw (never sooner)', async () => {
    const r = await rig([(keyId) => ({ ...pending(keyId), retryAfter: '120' })], 0.5);
    await r.answered(1);
    expect(r.clock.pending()).toContain(132_000);
  });

  it('a conflict asks again hourly, with the fix naming the --replace code', async () => {
    const r = await rig([() => ({ status: 409, body: { code: 'device-exists', msg: 'bound' } })]);
    await r.answered(1);
    expect(r.seen[0]!.state).toBe('conflict');
    expect(r.seen[0]!.error?.fix).toContain('--replace code for deviceId SN-LOOP');
    expect(r.clock.pending()).toContain(CONFLICT_ASK_MS);
  });

  it('rejected stops asking: no timer left to ask again, and it ends only when stopped', async () => {
    const r = await rig([() => ({ status: 403, body: { code: 'rejected', msg: 'no' } })]);
    await r.answered(1);
    expect(r.seen[0]!.state).toBe('rejected');
    expect(r.clock.pending()).toEqual([]);
    await r.clock.advance(CONFLICT_ASK_MS * 24);
    expect(r.server.requests).toHaveLength(1);
    r.abort.abort();
    expect(await r.done).toBeUndefined();
  });

  it('a rate limit or an unreachable cloud retries on the backoff, never sooner than Retry-After; the state stays pending', async () => {
    const r = await rig([() => ({ status: 429, body: { code: 'rate-limited', msg: 'slow down' }, retryAfter: '30' })]);
    await r.answered(1);
    expect(r.seen[0]!.state).toBe('pending');
    expect(r.seen[0]!.error?.code).toBe('ERR_BROKER_RATE_LIMITED');
    expect(Math.min(...r.clock.pending())).toBeGreaterThanOrEqual(30_000);
  });
});
