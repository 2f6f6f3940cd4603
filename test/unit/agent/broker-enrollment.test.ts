import { describe, expect, it } from 'vitest';
import {
  ASK_JITTER,
  CONFLICT_ASK_MS,
  conflictError,
  keyState,
  PENDING_ASK_MS,
  pendingWaitMs,
  refusedEnrollment,
  replaceCodeFix,
} from '../../../src/agent/broker/enrollment.js';
import { BrokerError, refusalError } from '../../../src/agent/broker/errors.js';

const ENROLL = 'POST /v1/enroll';
const refused = (status: number, code: string, extra: Record<string, unknown> = {}) =>
  refusalError(ENROLL, { status, body: { code, msg: 'm', ...extra }, retryAfter: undefined, atMono: 0 });

describe('pendingWaitMs: a pending key asks again as Retry-After says, else every 60 s ±20 %', () => {
  it.each([
    [undefined, 0, PENDING_ASK_MS * (1 - ASK_JITTER)],
    [undefined, 0.5, PENDING_ASK_MS],
    [undefined, 1, PENDING_ASK_MS * (1 + ASK_JITTER)],
    [30_000, 0, 30_000],
    [30_000, 0.5, 33_000],
    [30_000, 1, 36_000],
    [undefined, Number.NaN, PENDING_ASK_MS * (1 - ASK_JITTER)],
    [undefined, -3, PENDING_ASK_MS * (1 - ASK_JITTER)],
  ])('Retry-After %s ms, draw %s → %s ms', (retryAfterMs, random, expected) => {
    expect(pendingWaitMs(retryAfterMs, random)).toBe(expected);
  });

  it('never asks sooner than the Retry-After, nor outside 48–72 s without one', () => {
    for (let r = 0; r <= 1; r += 0.05) {
      expect(pendingWaitMs(90_000, r)).toBeGreaterThanOrEqual(90_000);
      const plain = pendingWaitMs(undefined, r);
      expect(plain).toBeGreaterThanOrEqual(48_000);
      expect(plain).toBeLessThanOrEqual(72_000);
    }
  });

  it('a conflict asks hourly', () => {
    expect(CONFLICT_ASK_MS).toBe(3_600_000);
  });
});

describe('refusedEnrollment: what a refusal leaves a device that enrolls itself to do', () => {
  it.each([
    [403, 'rejected', {}, 'rejected'],
    [403, 'revoked', {}, 'revoked'],
    [409, 'device-exists', {}, 'conflict'],
    [403, 'bad-code', {}, 'conflict'],
    [502, 'cloud-refused', { cloudCode: 1004 }, 'conflict'],
    // The cloud's system error passes: asked again on the schedule.
    [502, 'cloud-refused', { cloudCode: 1006 }, 'retry'],
    [429, 'rate-limited', {}, 'retry'],
    [503, 'cloud-unreachable', {}, 'retry'],
    [503, 'store-unavailable', {}, 'retry'],
    [401, 'clock-skew', {}, 'retry'],
  ] as const)('%s %s → %s', (status, code, extra, verdict) => {
    expect(refusedEnrollment(refused(status, code, extra))).toBe(verdict);
  });

  it('anything not the broker’s (a network failure) is retried', () => {
    expect(refusedEnrollment(new Error('ECONNREFUSED'))).toBe('retry');
    expect(refusedEnrollment(new BrokerError('ERR_NETWORK', 'down', 'retry-backoff'))).toBe('retry');
  });
});

describe('the fix of a conflict names the --replace code to ask for', () => {
  it('for the device, under its vendor', () => {
    const fix = replaceCodeFix('V1', 'SN-7');
    expect(fix).toContain('ask the vendor for a --replace code for deviceId SN-7');
    expect(fix).toContain('botlink broker code --vendor-id V1 --device-id SN-7 --replace');
    expect(fix).toContain('botlink provision --broker URL --code CODE --device-id SN-7');
  });

  it('a device-exists refusal keeps its code and message, and takes that fix', () => {
    const e = conflictError(refused(409, 'device-exists'), 'V1', 'SN-7');
    expect(e.code).toBe('ERR_BROKER_DEVICE_EXISTS');
    expect(e.message).toBe(`${ENROLL}: the broker refused: device-exists (m)`);
    expect(e.fix).toBe(replaceCodeFix('V1', 'SN-7'));
  });

  it("a cloud refusal says to tell the broker's operator first", () => {
    const e = conflictError(refused(502, 'cloud-refused', { cloudCode: 1004 }), 'V1', 'SN-7');
    expect(e.fix).toMatch(/^the cloud refused the broker: tell the broker's operator.*; or ask the vendor for a --replace code/);
  });
});

describe("keyState: status's identity.state in broker mode", () => {
  it.each([
    [undefined, undefined, 'active'],
    ['pending', undefined, 'pending'],
    ['conflict', undefined, 'conflict'],
    ['rejected', undefined, 'rejected'],
    [undefined, 'ERR_BROKER_REVOKED', 'revoked'],
    [undefined, 'ERR_BROKER_REJECTED', 'rejected'],
    [undefined, 'ERR_BROKER_PENDING', 'pending'],
    // A token refusal is newer than the enrollment that led to it.
    ['active', 'ERR_BROKER_REVOKED', 'revoked'],
    [undefined, 'ERR_BROKER_RATE_LIMITED', 'active'],
    [undefined, 'ERR_NETWORK', 'active'],
  ] as const)('enrollment %s, token error %s → %s', (enrollment, tokenError, state) => {
    expect(keyState(enrollment, tokenError)).toBe(state);
  });
});
