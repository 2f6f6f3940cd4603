import { describe, expect, it } from 'vitest';
import { envName, parseBrokerConfig } from '../../../src/broker/config.js';

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
