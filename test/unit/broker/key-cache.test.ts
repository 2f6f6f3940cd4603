import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KeyCache } from '../../../src/broker/key-cache.js';

const { publicKey: key } = generateKeyPairSync('ed25519');
const entry = (name: string) => ({ key, publicKey: name, botId: `bot-${name}`, device: { vendorId: 'V1', deviceId: `SN-${name}` } });

describe('KeyCache: the keys of the devices that asked last', () => {
  it('drops the least recently used past its size; a read or a write makes an entry the newest', () => {
    // Each row: operations on a cache of 3 ('+k' sets k, '?k' reads it, '-k' deletes it), then the keyIds it holds.
    const rows: [string, string, string[]][] = [
      ['three fit', '+a +b +c', ['a', 'b', 'c']],
      ['a fourth drops the first', '+a +b +c +d', ['b', 'c', 'd']],
      ['a read keeps it', '+a +b +c ?a +d', ['a', 'c', 'd']],
      ['a write again keeps it, once', '+a +b +c +a +d', ['a', 'c', 'd']],
      ['a miss changes nothing', '+a +b +c ?z +d', ['b', 'c', 'd']],
      ['delete, and delete of a missing one', '+a +b -a -z', ['b']],
    ];
    for (const [name, ops, held] of rows) {
      const cache = new KeyCache(3);
      for (const op of ops.split(' ')) {
        const k = op.slice(1);
        if (op[0] === '+') cache.set(k, entry(k));
        else if (op[0] === '?') cache.get(k);
        else cache.delete(k);
      }
      // Reading after the last operation: membership only, which reads do not change.
      const present = ['a', 'b', 'c', 'd', 'z'].filter((k) => cache.get(k) !== undefined);
      expect([name, present, cache.size]).toEqual([name, held, held.length]);
    }
  });

  it('answers the entry it was given', () => {
    const cache = new KeyCache();
    cache.set('k', entry('pk'));
    expect(cache.get('k')).toEqual({ key, publicKey: 'pk', botId: 'bot-pk', device: { vendorId: 'V1', deviceId: 'SN-pk' } });
    expect(cache.get('other')).toBeUndefined();
  });
});
