import { describe, expect, it } from 'vitest';
import type { TokenRow } from '../../../src/broker/store/types.js';
import { cacheServes, cloudRefusal } from '../../../src/broker/tokens.js';
import { CloudError } from '../../../src/cloud/errors.js';

const NOW = 10_000_000;
const row = (leftS: number, lifetimeS: number): TokenRow => ({
  botId: 'bot-1',
  accessSealed: Buffer.alloc(0),
  accessExpiresAt: NOW + leftS * 1000,
  accessLifetimeS: lifetimeS,
  refreshSealed: null,
  refreshExpiresAt: null,
  updatedAt: 0,
});

describe('cacheServes: a cached access token is handed out while more than minValidityS is left', () => {
  it.each<[string, TokenRow | undefined, number, boolean]>([
    ['no token', undefined, 1800, false],
    ['2 h token, 1 h left, device asks 30 min', row(3600, 7200), 1800, true],
    ['2 h token, exactly 30 min left', row(1800, 7200), 1800, false],
    ['2 h token, 29 min left', row(1740, 7200), 1800, false],
    ['expired', row(-1, 7200), 0, false],
    ['a device asking nothing takes any token still alive', row(1, 7200), 0, true],
    // Capped at half the lifetime the cloud gave: a device never loops on short lifetimes.
    ['10 min token, 6 min left, device asks 30 min: the cap is 5 min', row(360, 600), 1800, true],
    ['10 min token, 5 min left, device asks 30 min', row(300, 600), 1800, false],
    ['a day asked of a 2 h token with 90 min left: capped at 1 h', row(5400, 7200), 86_400, true],
  ])('%s → %s', (_, token, minValidityS, serves) => {
    expect(cacheServes(token, minValidityS, NOW)).toBe(serves);
  });
});

describe('cloudRefusal: a failed cloud call as the device is told of it', () => {
  it('a cloud code is 502 cloud-refused with that code; no answer is 503 cloud-unreachable with Retry-After', () => {
    const refused = cloudRefusal(new CloudError('ERR_CLOUD_1004', 'no such vendor', 'needs-provisioning', { serviceCode: 1004 }));
    expect([refused.code, refused.status, refused.extra]).toEqual(['cloud-refused', 502, { cloudCode: 1004 }]);
    const unreachable = cloudRefusal(new Error('ECONNREFUSED'));
    expect([unreachable.code, unreachable.status, unreachable.retryAfterS]).toEqual(['cloud-unreachable', 503, 10]);
  });
});
