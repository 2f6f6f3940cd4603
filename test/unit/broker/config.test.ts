import { describe, expect, it } from 'vitest';
import { envName, parseBrokerConfig } from '../../../src/broker/config.js';
import { mayWait } from '../../../src/broker/pending-policy.js';

const minimal = { listen: '127.0.0.1:0', baseUrl: 'http://127.0.0.1:1', accessKeyId: 'AK' };

describe('the broker config: auditRetentionDays (DESIGN §3.7)', () => {
  it('defaults to 400 days, takes a whole number of days, and is overridden by BOTLINK_BROKER_AUDIT_RETENTION_DAYS', () => {
    expect(parseBrokerConfig(minimal, {}).auditRetentionDays).toBe(400);
    expect(parseBrokerConfig({ ...minimal, auditRetentionDays: 30 }, {}).auditRetentionDays).toBe(30);
    expect(envName('auditRetentionDays')).toBe('BOTLINK_BROKER_AUDIT_RETENTION_DAYS');
    for (const bad of [0, 1.5, '30']) {
      expect(() => parseBrokerConfig({ ...minimal, auditRetentionDays: bad }, {})).toThrow(
        expect.objectContaining({
          code: 'ERR_CONFIG',
          key: 'auditRetentionDays',
          message: 'auditRetentionDays must be a whole number ≥ 1',
        }),
      );
    }
  });
});

describe('the broker config: pendingEnrollment, pendingPerSource, pendingMax, pendingRetryAfterS (DESIGN §3.7)', () => {
  it('defaults to no vendor, 50 per source, 10,000 per vendor and Retry-After 60; each overridden by its variable', () => {
    const config = parseBrokerConfig(minimal, {});
    expect(config.pendingEnrollment.size).toBe(0);
    expect(config.limits).toMatchObject({ pendingPerSource: 50, pendingMax: 10_000, pendingRetryAfterS: 60 });
    expect(envName('pendingEnrollment')).toBe('BOTLINK_BROKER_PENDING_ENROLLMENT');
    expect(envName('pendingPerSource')).toBe('BOTLINK_BROKER_PENDING_PER_SOURCE');
    expect(envName('pendingRetryAfterS')).toBe('BOTLINK_BROKER_PENDING_RETRY_AFTER_S');
    const raw = {
      ...minimal,
      pendingPerSource: 5,
      pendingMax: 7,
      pendingRetryAfterS: 10,
      pendingEnrollment: '{"V1": {"devicePattern": "SN-[0-9]{4}"}}',
    };
    const from = parseBrokerConfig(raw, {});
    expect(from.limits).toMatchObject({ pendingPerSource: 5, pendingMax: 7, pendingRetryAfterS: 10 });
    expect(() => parseBrokerConfig({ ...minimal, pendingRetryAfterS: 0 }, {})).toThrow(/pendingRetryAfterS must be a whole number/);
    expect(mayWait(from.pendingEnrollment, 'V1', 'SN-0042')).toBe(true);
  });

  it('anchors each pattern: a serial matches whole, under its own vendor only', () => {
    const { pendingEnrollment: policy } = parseBrokerConfig({ ...minimal, pendingEnrollment: { V1: { devicePattern: 'SN-[0-9]+' } } }, {});
    expect(mayWait(policy, 'V1', 'SN-1')).toBe(true);
    expect(mayWait(policy, 'V1', 'XSN-1')).toBe(false);
    expect(mayWait(policy, 'V1', 'SN-1X')).toBe(false);
    expect(mayWait(policy, 'V2', 'SN-1')).toBe(false);
  });

  it.each<[string, unknown, string]>([
    ['a list', [], 'pendingEnrollment must be an object'],
    ['text that is not JSON', '{V1', 'pendingEnrollment must be JSON'],
    ['a vendor without devicePattern', { V1: {} }, 'pendingEnrollment.V1 must be {"devicePattern": "<regex>"}'],
    ['a key beside devicePattern', { V1: { devicePattern: 'x', other: 1 } }, 'pendingEnrollment.V1 must be {"devicePattern": "<regex>"}'],
    [
      'a pattern that does not compile',
      { V1: { devicePattern: 'SN-(' } },
      'pendingEnrollment.V1.devicePattern is not a regular expression',
    ],
  ])('names the key for %s', (_, value, message) => {
    expect(() => parseBrokerConfig({ ...minimal, pendingEnrollment: value }, {})).toThrow(
      expect.objectContaining({ code: 'ERR_CONFIG', key: 'pendingEnrollment', message: expect.stringContaining(message) }),
    );
  });
});

describe('the broker config: adminListen and adminOrigin (DESIGN §3.8)', () => {
  const refused = (raw: Record<string, unknown>, key: string) =>
    expect(() => parseBrokerConfig({ ...minimal, ...raw }, {})).toThrow(expect.objectContaining({ code: 'ERR_CONFIG', key }));

  it('has no admin listener unless adminListen is set; the origin defaults to the address bound', () => {
    expect(parseBrokerConfig(minimal, {}).admin).toBeNull();
    expect(parseBrokerConfig({ ...minimal, adminListen: '127.0.0.1:0' }, {}).admin).toEqual({
      listen: { host: '127.0.0.1', port: 0 },
      origin: null,
    });
    expect(envName('adminListen')).toBe('BOTLINK_BROKER_ADMIN_LISTEN');
  });

  it('takes an origin without a path, and plain http only on loopback', () => {
    const admin = parseBrokerConfig(
      { ...minimal, adminListen: '127.0.0.1:8443', adminOrigin: 'https://broker.example.com:8443' },
      {},
    ).admin;
    expect(admin?.origin).toBe('https://broker.example.com:8443');
    refused({ adminListen: '0.0.0.0:8443' }, 'adminListen');
    refused({ adminListen: 'nowhere' }, 'adminListen');
    refused({ adminOrigin: 'https://broker.example.com' }, 'adminOrigin');
    for (const bad of [
      'https://broker.example.com/admin',
      'ftp://broker.example.com',
      'broker.example.com',
      'https://broker.example.com?x=1',
      42,
    ]) {
      refused({ adminListen: '127.0.0.1:0', adminOrigin: bad }, 'adminOrigin');
    }
  });
});
