import { describe, expect, it } from 'vitest';
import { ServerTime } from '../../../src/agent/time/servertime.js';

/** A settable fake Clock. */
function fakeClock(wall: number, mono: number) {
  return {
    wall,
    mono,
    wallNow() {
      return this.wall;
    },
    monoNow() {
      return this.mono;
    },
  };
}

const SERVER_AT_MONO_0 = Date.parse('2026-12-01T12:00:00.400Z');
/** Sample spacing whose sub-second part (0.618 s) spreads the server's stamping phase evenly. */
const SPACING_MS = 1618;

/**
 * A server whose wall clock is mono + offset. `request` makes the clock pass through a round trip and
 * feeds the resulting Date header to `st`, the server stamping it at fraction `phase` of the trip.
 */
function world(opts: { maxRttMs?: number | undefined; maxSampleAgeMs?: number } = {}) {
  const clock = fakeClock(Date.parse('2020-01-01T00:00:00Z'), 0);
  const st = new ServerTime(clock, opts);
  const server = { offset: SERVER_AT_MONO_0 };
  const trueNow = () => clock.mono + server.offset;
  const request = (rttMs: number, phase = 0.5): boolean => {
    const sent = clock.mono;
    const stamped = Math.floor((sent + rttMs * phase + server.offset) / 1000) * 1000;
    clock.mono = sent + rttMs;
    return st.addSample(new Date(stamped).toUTCString(), sent, clock.mono);
  };
  return { clock, st, server, trueNow, request };
}

describe('ServerTime', () => {
  it('knows nothing before the first sample', () => {
    const { st } = world();
    expect([st.now(), st.offsetMs(), st.errorMs(), st.lastSampleMono()]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('a single sample: midpoint of [D − received, D + 1 s − sent], error half its width', () => {
    const { clock, st, trueNow, request } = world();
    clock.mono = 10_000;
    expect(request(100)).toBe(true);
    // stamped at mono 10 050 → server 12:00:10.450 → D = 12:00:10; bounds width 1 100 ms
    const d = Date.parse('2026-12-01T12:00:10Z');
    expect(st.errorMs()).toBe(550);
    expect(st.now()).toBe(d + 1000 - 10_000 + 10_100 - 550);
    expect(Math.abs(st.now()! - trueNow())).toBeLessThanOrEqual(550);
    expect(st.lastSampleMono()).toBe(10_100);
  });

  it.each([
    { rtt: 10, phase: 0 },
    { rtt: 10, phase: 1 },
    { rtt: 50, phase: 0.5 },
    { rtt: 200, phase: 0.2 },
    { rtt: 800, phase: 0.9 },
  ])('samples at spread sub-second phases narrow the error towards rtt/2 (rtt $rtt, stamped at $phase)', (c) => {
    const { rtt, phase } = c;
    const { clock, st, trueNow, request } = world();
    const errors: number[] = [];
    for (let i = 1; i <= 20; i++) {
      clock.mono = i * SPACING_MS;
      expect(request(rtt, phase)).toBe(true);
      errors.push(st.errorMs()!);
      expect(Math.abs(st.now()! - trueNow())).toBeLessThanOrEqual(st.errorMs()! + 0.5);
    }
    expect(errors[0]).toBeCloseTo(500 + rtt / 2, 2);
    expect(errors.at(-1)!).toBeLessThan(rtt / 2 + 50);
    for (let i = 1; i < errors.length; i++) expect(errors[i]!).toBeLessThanOrEqual(errors[i - 1]! + 3);
  });

  it.each([
    { name: 'RTT above the limit', rtt: 5001, maxRttMs: undefined, accepted: false },
    { name: 'RTT at the limit', rtt: 5000, maxRttMs: undefined, accepted: true },
    { name: 'RTT above a configured limit', rtt: 301, maxRttMs: 300, accepted: false },
    { name: 'zero RTT', rtt: 0, maxRttMs: undefined, accepted: true },
  ])('$name → accepted: $accepted', ({ rtt, maxRttMs, accepted }) => {
    const { st, request } = world({ maxRttMs });
    expect(request(rtt)).toBe(accepted);
    expect(st.now() !== undefined).toBe(accepted);
  });

  it.each([undefined, '', 'not a date', 'Thu, 99 Foo 2026 25:61:00 GMT'])('drops the invalid header %j', (header) => {
    const { st } = world();
    expect(st.addSample(header, 0, 10)).toBe(false);
    expect(st.now()).toBeUndefined();
  });

  it('drops a response received before it was sent', () => {
    const { st } = world();
    expect(st.addSample('Tue, 01 Dec 2026 12:00:00 GMT', 100, 50)).toBe(false);
  });

  it('a dropped sample does not disturb the estimate', () => {
    const { st, request } = world();
    request(40);
    const error = st.errorMs()!;
    expect(request(9000)).toBe(false);
    expect(st.lastSampleMono()).toBe(40);
    expect(st.errorMs()).toBeCloseTo(error + 9000 * 100e-6, 2);
  });

  it.each([
    { name: 'forward by 10 min', step: 600_000 },
    { name: 'back by 3 s', step: -3000 },
    { name: 'forward by 1.5 s', step: 1500 },
  ])('server clock stepped $name: restarts from the newest sample', ({ step }) => {
    const { clock, st, server, trueNow, request } = world();
    for (let i = 1; i <= 10; i++) {
      clock.mono = i * SPACING_MS;
      request(20);
    }
    expect(st.errorMs()!).toBeLessThan(100);
    server.offset += step;
    clock.mono += SPACING_MS;
    expect(request(20)).toBe(true);
    expect(st.errorMs()).toBe(510);
    expect(Math.abs(st.now()! - trueNow())).toBeLessThanOrEqual(510);
  });

  it('a local wall-clock step leaves the estimate alone and moves only the offset', () => {
    const { clock, st, request } = world();
    request(30);
    const server = st.now()!;
    const offset = st.offsetMs()!;
    expect(offset).toBe(server - clock.wall);
    clock.wall += 365 * 86_400_000;
    expect(st.now()).toBe(server);
    expect(st.offsetMs()).toBe(offset - 365 * 86_400_000);
  });

  it('extrapolates along monotonic time, widening the error by the allowed drift', () => {
    const { clock, st, trueNow, request } = world();
    request(100);
    const error = st.errorMs()!;
    clock.mono += 600_000;
    expect(st.errorMs()).toBeCloseTo(error + 60, 2); // 10 min at 100 ppm
    expect(Math.abs(st.now()! - trueNow())).toBeLessThanOrEqual(error);
  });

  it('samples older than maxSampleAgeMs age out', () => {
    const { clock, st, request } = world({ maxSampleAgeMs: 60_000 });
    request(100);
    clock.mono += 60_000;
    expect(st.lastSampleMono()).toBe(100);
    clock.mono += 1;
    expect([st.now(), st.errorMs(), st.lastSampleMono(), st.offsetMs()]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('when the narrowing samples age out, the estimate rests on the newer ones', () => {
    const { clock, st, trueNow, request } = world({ maxSampleAgeMs: 30_000 });
    for (let i = 1; i <= 20; i++) {
      clock.mono = i * SPACING_MS;
      request(10);
    }
    expect(st.errorMs()!).toBeLessThan(60);
    clock.mono += 29_000;
    request(200);
    const lastSent = clock.mono - 200;
    expect(st.lastSampleMono()).toBe(clock.mono);
    clock.mono += 1500; // every earlier sample is now older than 30 s
    expect(st.errorMs()).toBeCloseTo(600 + (clock.mono - lastSent - 200) * 100e-6, 2);
    expect(Math.abs(st.now()! - trueNow())).toBeLessThanOrEqual(st.errorMs()!);
  });

  it('clear() forgets every sample', () => {
    const { st, request } = world();
    request(10);
    st.clear();
    expect([st.now(), st.lastSampleMono()]).toEqual([undefined, undefined]);
  });
});
