import { describe, expect, it } from 'vitest';
import {
  CloudKeepalive,
  isPong,
  KEEPALIVE_INTERVAL_MS,
  KEEPALIVE_PONG_WAIT_MS,
  keepaliveDelay,
} from '../../../src/agent/local/keepalive.js';
import { DOWN, downText } from '../../helpers/guide-frames.js';
import { ManualClock } from '../../helpers/manual-clock.js';

describe('keepaliveDelay', () => {
  it.each([
    { lastUp: 0, now: 0, interval: 30_000, delay: 30_000, why: 'just used: a whole interval' },
    { lastUp: 0, now: 10_000, interval: 30_000, delay: 20_000, why: 'the rest of the interval' },
    { lastUp: 0, now: 30_000, interval: 30_000, delay: 0, why: 'due now' },
    { lastUp: 0, now: 95_000, interval: 30_000, delay: 0, why: 'overdue: now, never negative' },
    { lastUp: 5_000, now: 5_000, interval: 1_000, delay: 1_000, why: 'another interval' },
  ])('$why', ({ lastUp, now, interval, delay }) => {
    expect(keepaliveDelay(lastUp, now, interval)).toBe(delay);
  });
});

describe('isPong', () => {
  it.each([
    { name: "the guide's PONG (no content)", text: downText('PONG'), pong: true },
    { name: 'a PONG with a content after all', text: JSON.stringify({ ...DOWN['PONG'], content: {} }), pong: true },
    { name: 'an AGENT piece that says PONG', text: downText('AGENT', { content: { content: 'PONG' } }), pong: false },
    { name: 'the greeting', text: downText('CFG_BOT_EVENT'), pong: false },
    { name: 'not JSON but mentions PONG', text: 'PONG', pong: false },
    { name: 'JSON null', text: 'null', pong: false },
    { name: 'a frame too large to be a PONG', text: JSON.stringify({ ...DOWN['PONG'], pad: 'x'.repeat(5000) }), pong: false },
  ])('$name → $pong', ({ text, pong }) => {
    expect(isPong(Buffer.from(text))).toBe(pong);
  });
});

const PONG = Buffer.from(downText('PONG'));

function rig(opts: { sendOk?: boolean } = {}) {
  const clock = new ManualClock();
  const sent: { at: number; frame: Record<string, unknown> }[] = [];
  const start = clock.monoNow();
  const ka = new CloudKeepalive({
    clock,
    send: (text) => {
      sent.push({ at: clock.monoNow() - start, frame: JSON.parse(text) as Record<string, unknown> });
      return opts.sendOk ?? true;
    },
  });
  return { clock, sent, ka, at: () => sent.map((s) => s.at) };
}

describe('CloudKeepalive', () => {
  it('with no app: a PING every interval from the connection, each with a fresh mid and no content', async () => {
    const { clock, sent, ka, at } = rig();
    ka.connected();
    await clock.advance(95_000);
    expect(at()).toEqual([30_000, 60_000, 90_000]);
    for (const { frame } of sent) expect(Object.keys(frame).sort()).toEqual(['contentType', 'mid']);
    expect(sent.every(({ frame }) => frame['contentType'] === 'PING' && typeof frame['mid'] === 'string')).toBe(true);
    expect(new Set(sent.map(({ frame }) => frame['mid'])).size).toBe(3);
  });

  it('sends nothing before a connection, nor after it is gone', async () => {
    const { clock, ka, at } = rig();
    await clock.advance(60_000);
    ka.connected();
    await clock.advance(30_000);
    ka.disconnected();
    await clock.advance(120_000);
    expect(at()).toEqual([90_000]);
  });

  it('sends none while an app is attached, however long', async () => {
    const { clock, ka, at } = rig();
    ka.connected();
    ka.appAttached();
    await clock.advance(600_000);
    expect(at()).toEqual([]);
  });

  it("after the app leaves, the next PING is an interval after the app's last frame, not after the detach", async () => {
    const { clock, ka, at } = rig();
    ka.connected();
    ka.appAttached();
    await clock.advance(100_000);
    ka.upFrame(); // at 100 s
    await clock.advance(20_000);
    ka.appDetached(); // at 120 s
    await clock.advance(45_000);
    expect(at()).toEqual([130_000, 160_000]);
  });

  it('an app that left after a long silence: a PING at once', async () => {
    const { clock, ka, at } = rig();
    ka.connected();
    ka.appAttached();
    await clock.advance(200_000);
    ka.appDetached();
    await clock.advance(0);
    expect(at()).toEqual([200_000]);
  });

  it('owns as many PONGs as it has PINGs outstanding, and no more', async () => {
    const { clock, ka } = rig();
    ka.connected();
    await clock.advance(60_000); // two PINGs
    expect(ka.ownsPong(PONG, false)).toBe(true);
    expect(ka.ownsPong(PONG, false)).toBe(true);
    expect(ka.ownsPong(PONG, false)).toBe(false);
  });

  it("a PONG to our PING is ours even after an app attached and pinged: the app's own PONG comes after it", async () => {
    const { clock, ka } = rig();
    ka.connected();
    await clock.advance(30_000);
    ka.appAttached();
    ka.upFrame(); // the app's PING
    expect(ka.ownsPong(PONG, false)).toBe(true);
    expect(ka.ownsPong(PONG, false)).toBe(false);
  });

  it('never owns a frame that is not a PONG, nor a binary frame', async () => {
    const { clock, ka } = rig();
    ka.connected();
    await clock.advance(30_000);
    expect(ka.ownsPong(Buffer.from(downText('AGENT')), false)).toBe(false);
    expect(ka.ownsPong(PONG, true)).toBe(false);
    expect(ka.ownsPong(PONG, false)).toBe(true);
  });

  it('forgets a PING unanswered for KEEPALIVE_PONG_WAIT_MS: a cloud that never answers cannot swallow the PONGs of an app', async () => {
    const { clock, ka } = rig();
    ka.connected();
    await clock.advance(KEEPALIVE_INTERVAL_MS);
    ka.appAttached();
    await clock.advance(KEEPALIVE_PONG_WAIT_MS + 1);
    expect(ka.ownsPong(PONG, false)).toBe(false);
  });

  it('a new connection starts with no PING outstanding', async () => {
    const { clock, ka } = rig();
    ka.connected();
    await clock.advance(30_000);
    ka.disconnected();
    ka.connected();
    expect(ka.ownsPong(PONG, false)).toBe(false);
  });

  it('a PING that could not be sent is not outstanding, and the next one is still due an interval later', async () => {
    const { clock, ka, at } = rig({ sendOk: false });
    ka.connected();
    await clock.advance(60_000);
    expect(at()).toEqual([30_000, 60_000]);
    expect(ka.ownsPong(PONG, false)).toBe(false);
  });

  it('stop() cancels the timer', async () => {
    const { clock, ka, at } = rig();
    ka.connected();
    ka.stop();
    await clock.advance(120_000);
    expect(at()).toEqual([]);
  });
});
