import { describe, expect, it } from 'vitest';
import { BrokerError, MAX_RETRY_AFTER_MS, parseRetryAfter, REFUSALS, refusalError } from '../../../src/agent/broker/errors.js';
import { skewRetryTime, withSkewRetry } from '../../../src/agent/broker/skew.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const ROUTE = 'POST /v1/token';
const ENROLL = 'botlink provision --broker URL --code CODE --device-id SN';

function answer(status: number, body: unknown, retryAfter?: string) {
  return { status, body, retryAfter, atMono: 5_000 };
}

describe('refusalError: every refusal of DESIGN §3.7 as the device reads it', () => {
  it.each([
    [400, 'bad-request', 'ERR_BROKER_BAD_REQUEST', 'needs-config', /brokerUrl/],
    [401, 'bad-signature', 'ERR_BROKER_BAD_SIGNATURE', 'needs-config', /proxy may rewrite/],
    [401, 'unknown-key', 'ERR_BROKER_UNKNOWN_KEY', 'needs-provisioning', new RegExp(`enroll it with \`${ENROLL}\``)],
    [401, 'replayed', 'ERR_BROKER_REPLAYED', 'retry-soon', undefined],
    [401, 'clock-skew', 'ERR_BROKER_CLOCK_SKEW', 'needs-clock', /NTP/],
    [
      403,
      'revoked',
      'ERR_BROKER_REVOKED',
      'needs-provisioning',
      new RegExp(`^this device key was revoked .*re-enroll with \`${ENROLL}\` and a new code from the vendor$`),
    ],
    [403, 'rejected', 'ERR_BROKER_REJECTED', 'needs-provisioning', /rejected this device key: ask the vendor to enroll this device/],
    [403, 'pending', 'ERR_BROKER_PENDING', 'retry-backoff', /waits for the vendor's operator .*botlink status/],
    [403, 'bad-code', 'ERR_BROKER_BAD_CODE', 'needs-provisioning', /ask the vendor for a new one/],
    [409, 'device-exists', 'ERR_BROKER_DEVICE_EXISTS', 'needs-provisioning', /--replace code .*--adopt code/],
    [408, 'timeout', 'ERR_TIMEOUT', 'retry-backoff', undefined],
    [413, 'too-large', 'ERR_BROKER_TOO_LARGE', 'fatal', undefined],
    [
      429,
      'rate-limited',
      'ERR_BROKER_RATE_LIMITED',
      'retry-backoff',
      /asks again on its backoff; the broker's deviceTokensPerHour counts every token request of this botId/,
    ],
    [502, 'cloud-refused', 'ERR_BROKER_CLOUD_REFUSED', 'needs-config', /broker's operator/],
    [503, 'cloud-unreachable', 'ERR_BROKER_CLOUD_UNREACHABLE', 'retry-backoff', undefined],
    [503, 'store-unavailable', 'ERR_BROKER_STORE_UNAVAILABLE', 'retry-backoff', undefined],
  ])('%s %s → %s, %s', (status, refusal, code, retry, fix) => {
    const e = refusalError(ROUTE, answer(status, { code: refusal, msg: 'said so' }));
    expect(e).toBeInstanceOf(BrokerError);
    expect({ code: e.code, retry: e.retry, refusal: e.refusal, status: e.status }).toEqual({ code, retry, refusal, status });
    expect(e.message).toBe(`${ROUTE}: the broker refused: ${refusal} (said so)`);
    if (fix) expect(e.fix).toMatch(fix);
    else expect(e.fix).toBeUndefined();
  });

  it('covers exactly the codes of the contract; not-found is read by its status, as any 404', () => {
    expect(REFUSALS['not-found']).toBe('by-status');
    expect(Object.keys(REFUSALS).sort()).toEqual(
      [
        'not-found',
        'timeout',
        'bad-request',
        'bad-signature',
        'unknown-key',
        'replayed',
        'clock-skew',
        'revoked',
        'rejected',
        'pending',
        'bad-code',
        'device-exists',
        'too-large',
        'rate-limited',
        'cloud-refused',
        'cloud-unreachable',
        'store-unavailable',
      ].sort(),
    );
  });

  it.each([
    [1006, 'retry-backoff'],
    [1004, 'needs-config'],
    [1005, 'needs-config'],
  ])('cloud-refused with cloudCode %s is %s: only a system error may pass by itself', (cloudCode, retry) => {
    const e = refusalError(ROUTE, answer(502, { code: 'cloud-refused', msg: 'the cloud refused', cloudCode }));
    expect(e.retry).toBe(retry);
    expect(e.message).toBe(`${ROUTE}: the broker refused: cloud-refused (the cloud refused; cloud code ${cloudCode})`);
  });

  it('keeps the time a clock-skew answer gives, with the instant it arrived; no other refusal carries one', () => {
    expect(refusalError(ROUTE, answer(401, { code: 'clock-skew', msg: '', serverTime: 1_800_000_000_123 })).serverTime).toEqual({
      ms: 1_800_000_000_123,
      atMono: 5_000,
    });
    expect(refusalError(ROUTE, answer(401, { code: 'clock-skew', msg: '' })).serverTime).toBeUndefined();
    expect(refusalError(ROUTE, answer(401, { code: 'replayed', serverTime: 1_800_000_000_123 })).serverTime).toBeUndefined();
  });

  it.each([
    [302, { code: 'revoked' }, 'ERR_HTTP_REDIRECT', 'needs-config'],
    [404, '<html>', 'ERR_HTTP_STATUS', 'needs-config'],
    [405, undefined, 'ERR_HTTP_STATUS', 'needs-config'],
    [404, { code: 'not-found', msg: 'no route' }, 'ERR_HTTP_STATUS', 'needs-config'],
    [502, undefined, 'ERR_HTTP_STATUS', 'retry-backoff'],
    [500, { code: 17 }, 'ERR_HTTP_STATUS', 'retry-backoff'],
    [401, { code: 'made-up' }, 'ERR_HTTP_STATUS', 'retry-backoff'],
    // A code at another status than the contract's is not the broker's (a proxy's page, say).
    [401, { code: 'revoked' }, 'ERR_HTTP_STATUS', 'retry-backoff'],
  ])('an answer without a known refusal code goes by its status: %s %j → %s', (status, body, code, retry) => {
    const e = refusalError(ROUTE, answer(status, body));
    expect([e.code, e.retry]).toEqual([code, retry]);
    if (status >= 300 && status < 400) expect(e.message).toContain('redirect, not followed');
  });

  it("shows the broker's message without control characters, cut to 200 characters", () => {
    const e = refusalError(ROUTE, answer(403, { code: 'revoked', msg: `line\nbreak\u0007${'x'.repeat(300)}` }));
    expect(e.message).toBe(`${ROUTE}: the broker refused: revoked (line break ${'x'.repeat(189)})`);
  });
});

describe('rate-limited: when the device may ask again, and what spent its quota', () => {
  const at = Date.parse('2026-11-28T12:00:00Z');
  it.each([
    [
      'POST /v1/token',
      '30',
      at,
      /^it may ask again after 2026-11-28T12:00:30\.000Z \(Retry-After\); the broker's deviceTokensPerHour counts every token request of this botId, from all its keys/,
    ],
    ['POST /v1/token', '30', undefined, /^it may ask again in 30 s \(Retry-After\); .*reset-limits BOTID/],
    [
      'POST /v1/check',
      '120',
      at,
      /^it may ask again after 2026-11-28T12:02:00\.000Z \(Retry-After\); the broker allows 60 checks an hour per botId/,
    ],
    ['POST /v1/enroll', undefined, at, /^it asks again on its backoff; too many requests of this key or its code/],
  ])('%s, Retry-After %s', (route, retryAfter, atWall, fix) => {
    const e = refusalError(route, {
      status: 429,
      body: { code: 'rate-limited' },
      retryAfter,
      atMono: 0,
      ...(atWall !== undefined && { atWall }),
    });
    expect(e.fix).toMatch(fix);
  });
});

describe('Retry-After (seconds)', () => {
  it.each([
    ['10', 10_000],
    [' 0 ', 0],
    ['3600', 3_600_000],
    ['86400', MAX_RETRY_AFTER_MS],
    [undefined, undefined],
    ['', undefined],
    ['-1', undefined],
    ['1.5', undefined],
    ['Wed, 21 Oct 2026 07:28:00 GMT', undefined],
    ['12345678901', undefined],
  ])('%j → %s ms', (header, ms) => {
    expect(parseRetryAfter(header)).toBe(ms);
  });

  it('rides on the error of any refusal that carries it', () => {
    expect(refusalError(ROUTE, answer(429, { code: 'rate-limited' }, '30')).retryAfterMs).toBe(30_000);
    expect(refusalError(ROUTE, answer(503, { code: 'cloud-unreachable' }, '10')).retryAfterMs).toBe(10_000);
    expect(refusalError(ROUTE, answer(503, '<html>', '5')).retryAfterMs).toBe(5_000);
    expect(refusalError(ROUTE, answer(429, { code: 'rate-limited' })).retryAfterMs).toBeUndefined();
  });
});

describe('the clock-skew retry rule (DESIGN §3.7: once, with the broker time)', () => {
  const skew = (serverTime?: number) =>
    refusalError(ROUTE, answer(401, { code: 'clock-skew', ...(serverTime !== undefined && { serverTime }) }));

  it.each([
    ['the broker time, moved on by the time since the answer', skew(1_800_000_000_000), 5_250, 1_800_000_000_250],
    ['at once', skew(1_800_000_000_000), 5_000, 1_800_000_000_000],
    ['never earlier than the answer, whatever the clock says', skew(1_800_000_000_000), 4_000, 1_800_000_000_000],
    ['no time in the answer: no retry', skew(), 5_000, undefined],
    ['another refusal: no retry', refusalError(ROUTE, answer(403, { code: 'revoked', serverTime: 1 })), 5_000, undefined],
    ['not a broker error: no retry', new Error('x'), 5_000, undefined],
  ])('%s', (_, err, monoNow, ts) => {
    expect(skewRetryTime(err, monoNow)).toBe(ts);
  });

  it('withSkewRetry retries once with that time, and a second refusal stands', async () => {
    const clock = new ManualClock({ mono: 5_100 });
    const tried: number[] = [];
    const offBy: number[] = [];
    const refuse = async (ts: number): Promise<string> => {
      tried.push(ts);
      throw skew(1_800_000_000_000);
    };
    await expect(withSkewRetry(clock, 1_000_000_000_000, refuse, (ms) => offBy.push(ms))).rejects.toMatchObject({
      code: 'ERR_BROKER_CLOCK_SKEW',
    });
    expect(tried).toEqual([1_000_000_000_000, 1_800_000_000_100]);
    expect(offBy).toEqual([1_000_000_000_000 - 1_800_000_000_100]);
    const once: number[] = [];
    const answered = await withSkewRetry(clock, 1_000_000_000_000, async (ts) => {
      once.push(ts);
      if (once.length === 1) throw skew(1_800_000_000_000);
      return 'token';
    });
    expect([answered, once]).toEqual(['token', [1_000_000_000_000, 1_800_000_000_100]]);
    const other = [] as number[];
    await expect(
      withSkewRetry(clock, 1_000_000_000_000, async (ts) => {
        other.push(ts);
        throw refusalError(ROUTE, answer(429, { code: 'rate-limited' }, '3'));
      }),
    ).rejects.toMatchObject({ code: 'ERR_BROKER_RATE_LIMITED' });
    expect(other).toHaveLength(1);
  });
});
