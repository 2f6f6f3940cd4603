import { describe, expect, it } from 'vitest';
import { FaultState } from '../../../src/service/faults.js';
import { StatsRecorder } from '../../../src/service/stats.js';

describe('FaultState', () => {
  it('serves queued broken answers in order, each n times, honouring the route filter', () => {
    const faults = new FaultState();
    faults.breakNext('http-503-html', 2, '/auth/refreshToken');
    faults.breakNext('malformed-json', 1);
    expect(faults.takeBroken('/auth/getToken')).toBe('malformed-json');
    expect(faults.takeBroken('/auth/getToken')).toBeUndefined();
    expect(faults.takeBroken('/auth/refreshToken')).toBe('http-503-html');
    expect(faults.takeBroken('/auth/refreshToken')).toBe('http-503-html');
    expect(faults.takeBroken('/auth/refreshToken')).toBeUndefined();
  });

  it('ignores n ≤ 0 and refuses unknown kinds', () => {
    const faults = new FaultState();
    faults.breakNext('wrong-types', 0);
    expect(faults.takeBroken('/auth/getToken')).toBeUndefined();
    expect(() => faults.breakNext('bogus' as never, 1)).toThrow(TypeError);
  });

  it('counts down forced 1006 answers', () => {
    const faults = new FaultState();
    faults.getTokenFailures = 2;
    expect([faults.takeGetTokenFailure(), faults.takeGetTokenFailure(), faults.takeGetTokenFailure()]).toEqual([true, true, false]);
  });

  it('reset clears every knob', () => {
    const faults = new FaultState();
    faults.getTokenFailures = 3;
    faults.latencyMs = 5;
    faults.clockShiftMs = 7;
    faults.wsRefusal = { msg: 'Unauthorized', form: 'frame' };
    faults.breakNext('oversize-body', 4);
    faults.reset();
    expect(faults).toMatchObject({ getTokenFailures: 0, latencyMs: 0, clockShiftMs: 0, wsRefusal: undefined });
    expect(faults.takeBroken('/auth/getToken')).toBeUndefined();
  });
});

describe('StatsRecorder', () => {
  it('counts per route and per code', () => {
    const recorder = new StatsRecorder();
    recorder.received('/auth/getToken', { accessTimestamp: '1700000000000' });
    recorder.answered('/auth/getToken', { code: 0 });
    recorder.received('/auth/getToken', undefined);
    recorder.answered('/auth/getToken', { code: 1001, msg: '' });
    recorder.received('/auth/refreshToken', {});
    recorder.answered('/auth/refreshToken', { code: 1007 });
    recorder.received('/device/register', {});
    recorder.answered('/device/register', { state: 'SUCCESS' });
    const { stats } = recorder;
    expect(stats.getToken).toEqual({ total: 2, ok: 1, byCode: { 0: 1, 1001: 1 }, timestamps: ['1700000000000'] });
    expect(stats.refreshToken).toEqual({ total: 1, ok: 0 });
    expect(stats.register).toEqual({ total: 1, ok: 1 });
  });

  it('keeps a bounded tail of timestamps', () => {
    const recorder = new StatsRecorder();
    for (let i = 0; i < 25_000; i++) recorder.received('/auth/getToken', { accessTimestamp: String(1_700_000_000_000 + i) });
    const { timestamps } = recorder.stats.getToken;
    expect(timestamps.length).toBeLessThanOrEqual(20_000);
    expect(timestamps.at(-1)).toBe('1700000024999');
    expect(recorder.stats.getToken.total).toBe(25_000);
  });

  it.each([
    ['16 KB of text', 'x'.repeat(16_000)],
    ['16 KB of digits', '1'.repeat(16_000)],
    ['12 digits', '170000000000'],
    ['14 digits', '17000000000000'],
    ['a signed number', '-700000000000'],
    ['digits and a newline', '1700000000000\n'],
  ])('counts but does not keep a timestamp that is %s', (_name, accessTimestamp) => {
    const recorder = new StatsRecorder();
    recorder.received('/auth/getToken', { accessTimestamp });
    expect(recorder.stats.getToken).toMatchObject({ total: 1, timestamps: [] });
  });

  it('tracks open sockets per bot and the highest concurrency seen', () => {
    const recorder = new StatsRecorder();
    const first = recorder.wsOpened('a', {});
    recorder.wsOpened('a', { sessionId: 's2' });
    recorder.wsOpened('b', {});
    recorder.wsClosed(first);
    const { ws } = recorder.stats;
    expect(ws).toMatchObject({ open: 2, total: 3, maxConcurrentPerBot: 2 });
    expect(ws.connections.map((c) => [c.botId, c.params, c.open])).toEqual([
      ['a', {}, false],
      ['a', { sessionId: 's2' }, true],
      ['b', {}, true],
    ]);
    expect(ws.perBotOpen('a')).toBe(1);
    expect(ws.perBotOpen('b')).toBe(1);
    expect(ws.perBotOpen('c')).toBe(0);
  });
});
