import { describe, expect, it } from 'vitest';
import { type IdentityField, isIdentity } from '../../../src/protocol/broker.js';

// The identity fields of DESIGN §3.7, as broker and operator take them: each row a value and its verdict.
describe('identity fields', () => {
  it.each<[IdentityField, unknown, boolean]>([
    ['deviceId', 'SN-0042', true],
    ['deviceId', '10000000abcdef01', true],
    ['deviceId', 'rack:3/slot.7', false],
    ['deviceId', 'rack:3.slot_7-b', true],
    ['deviceId', '', false],
    ['deviceId', 'x'.repeat(64), true],
    ['deviceId', 'x'.repeat(65), false],
    ['deviceId', 'SN 1', false],
    ['deviceId', 'SN\u202e1', false],
    ['deviceId', 42, false],
    ['vendorId', 'V1', true],
    ['vendorId', 'acme_robots-eu', true],
    ['vendorId', 'acme.robots', false],
    ['appId', 'app-1', true],
    ['appId', 'app:1', false],
    ['name', 'Kitchen speaker', true],
    ['name', 'Ünïcødé 🤖 name', true],
    ['name', 'a'.repeat(64), true],
    ['name', 'a'.repeat(65), false],
    ['name', 'tab\there', false],
    ['name', 'bidi \u202e override', false],
    ['name', 'zero\u200bwidth', false],
    ['name', 'lone \ud800 surrogate', false],
    ['version', '0.2.0', true],
    ['version', '1.0.0-rc.1+build_7', true],
    ['version', '1.0 beta', false],
    ['version', '9'.repeat(33), false],
  ])('%s %j → %s', (field, value, ok) => {
    expect(isIdentity(field, value)).toBe(ok);
  });
});
