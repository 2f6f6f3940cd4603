import { describe, expect, it } from 'vitest';
import {
  type AdmissionRead,
  type AskRead,
  admitEnrollment,
  type Binding,
  bindingOf,
  type Registered,
  refuseAfterRegistering,
  refuseAsk,
  refuseBeforeRegistering,
} from '../../../src/broker/routes/admission.js';
import type { CodeRow, DeviceRow, KeyRow, PreauthRow } from '../../../src/broker/store/types.js';

// DESIGN §3.7's enrollment rules, row by row: who is admitted, and which botId each kind may bind.

const NOW = 1_000_000;
const code = (over: Partial<CodeRow> = {}): CodeRow => ({
  id: 'c0de1d',
  hmac: 'h',
  vendorId: 'V1',
  kind: 'plain',
  deviceId: null,
  usesLeft: 1,
  expiresAt: NOW + 1,
  createdAt: 0,
  ...over,
});
const key: KeyRow = {
  keyId: 'k1',
  publicKey: 'pk',
  botId: 'bot-1',
  deviceId: 'SN-1',
  vendorId: 'V1',
  state: 'active',
  reason: null,
  createdAt: 0,
  lastSeenAt: null,
  revokedAt: null,
};
const preauth = (deviceId: string): PreauthRow => ({ keyId: 'k1', publicKey: 'pk', deviceId, vendorId: 'V1', createdAt: 0 });
const read = (over: Partial<AdmissionRead>): AdmissionRead => ({
  known: undefined,
  deviceId: 'SN-1',
  botId: undefined,
  code: undefined,
  preauth: undefined,
  now: NOW,
  ...over,
});

/** The verdict as one comparable line: what admits, or the refusal's code and message. */
function verdictOf(r: AdmissionRead): string {
  const v = admitEnrollment(r);
  if ('admit' in v) return `admit ${v.admit.by}`;
  const refusal = 'refuse' in v ? v.refuse : v.refuseCounted;
  return `${'refuse' in v ? 'refuse' : 'refuse counted'} ${refusal.code}: ${refusal.message}`;
}

describe('admitEnrollment: which key is admitted, decided from what the store read', () => {
  it.each<[string, Partial<AdmissionRead>, string]>([
    ['the same key again, with no code', { known: key }, 'admit again'],
    ['the same key again, even with a spent code', { known: key, code: code({ usesLeft: 0 }) }, 'admit again'],
    ['no code, pre-authorised for this device', { preauth: preauth('SN-1') }, 'admit preauth'],
    [
      'no code, pre-authorised for another device',
      { preauth: preauth('SN-2') },
      'refuse bad-code: this key is pre-authorised for another device',
    ],
    ['no code, not pre-authorised', {}, 'refuse bad-code: no code, and this key is not pre-authorised for this device'],
    // Enrollment with no code: the vendor named, a pre-authorisation first, else the vendor's leave to wait.
    ['no code, pre-authorised under the vendor named', { preauth: preauth('SN-1'), vendorId: 'V1' }, 'admit preauth'],
    [
      'no code, pre-authorised under another vendor than the one named',
      { preauth: preauth('SN-1'), vendorId: 'V2', mayWait: true },
      'refuse bad-code: this key is pre-authorised for another device',
    ],
    ['no code, a vendor that lets the serial wait', { vendorId: 'V1', mayWait: true }, 'admit ask'],
    [
      'no code, a vendor that does not let the serial wait',
      { vendorId: 'V1', mayWait: false },
      'refuse bad-code: no code, and this vendor lets no such serial wait for an operator',
    ],
    [
      'no code, no vendor named, even where serials may wait',
      { mayWait: true },
      'refuse bad-code: no code, and this key is not pre-authorised for this device',
    ],
    ['the same key again, with no code and a vendor named', { known: key, vendorId: 'V1', mayWait: true }, 'admit again'],
    ['a code that does not exist: counted against the source', { code: 'unknown' }, 'refuse counted bad-code: no such enrollment code'],
    ['a spent code', { code: code({ usesLeft: 0 }) }, 'refuse bad-code: this code is spent'],
    ['an expired code', { code: code({ expiresAt: NOW }) }, 'refuse bad-code: this code has expired'],
    ['a code bound to another device', { code: code({ deviceId: 'SN-2' }) }, 'refuse bad-code: this code is bound to another device'],
    ['a plain code bound to this device', { code: code({ deviceId: 'SN-1' }) }, 'admit code'],
    ['a plain code bound to no device', { code: code() }, 'admit code'],
    ['a plain code with a botId', { code: code(), botId: 'bot-9' }, 'refuse bad-code: only an adopt code takes a botId'],
    [
      'an adopt code without the botId to keep',
      { code: code({ kind: 'adopt', deviceId: 'SN-1' }) },
      'refuse bad-code: an adopt code needs the botId the device keeps',
    ],
    ['an adopt code with the botId to keep', { code: code({ kind: 'adopt', deviceId: 'SN-1' }), botId: 'bot-9' }, 'admit code'],
    ['a replace code for this device', { code: code({ kind: 'replace', deviceId: 'SN-1' }) }, 'admit code'],
    [
      'a replace code for another device',
      { code: code({ kind: 'replace', deviceId: 'SN-2' }) },
      'refuse bad-code: this code is bound to another device',
    ],
  ])('%s', (_, over, expected) => {
    expect(verdictOf(read(over))).toBe(expected);
  });

  it('a pre-authorisation binds as a plain code does, but is no code', () => {
    expect(bindingOf({ by: 'preauth', row: preauth('SN-1') })).toEqual({ kind: 'plain', byCode: false });
    expect(bindingOf({ by: 'code', row: code({ kind: 'replace' }) })).toEqual({ kind: 'replace', byCode: true });
  });
});

const device = (over: Partial<DeviceRow> = {}): DeviceRow => ({ botId: 'bot-1', deviceId: 'SN-1', vendorId: 'V1', keyId: 'k0', ...over });
const plainCode: Binding = { kind: 'plain', byCode: true };
const preauthorised: Binding = { kind: 'plain', byCode: false };
const adopt: Binding = { kind: 'adopt', byCode: true };
const replace: Binding = { kind: 'replace', byCode: true };
const said = (r: { code: string; message: string } | undefined): string => (r === undefined ? 'ok' : `${r.code}: ${r.message}`);

describe('refuseBeforeRegistering: the device as the broker knows it, before the cloud is asked', () => {
  it.each<[string, Binding, DeviceRow | undefined, string]>([
    ['a plain code for a new device', plainCode, undefined, 'ok'],
    [
      'a plain code for a known device',
      plainCode,
      device(),
      'device-exists: this deviceId is enrolled already; a replace code moves it to a new key',
    ],
    [
      'a plain code for a device whose key was revoked',
      plainCode,
      device({ keyId: null }),
      'device-exists: this deviceId is enrolled already; a replace code moves it to a new key',
    ],
    ['a pre-authorisation for a new device', preauthorised, undefined, 'ok'],
    ['an adopt code for a device with no key', adopt, undefined, 'ok'],
    ['an adopt code for a device whose key was revoked', adopt, device({ keyId: null }), 'ok'],
    ['an adopt code for a device with a key', adopt, device(), 'device-exists: this device is enrolled with a key already'],
    ['a replace code for a known device', replace, device(), 'ok'],
    ['a replace code for an unknown device', replace, undefined, 'bad-code: a replace code is for a device the broker knows'],
  ])('%s', (_, binding, known, expected) => {
    expect(said(refuseBeforeRegistering(binding, known))).toBe(expected);
  });
});

describe('refuseAfterRegistering: whether the botId the cloud returned may be bound', () => {
  const registered = (over: Partial<Registered> = {}): Registered => ({
    botId: 'bot-1',
    wanted: undefined,
    known: undefined,
    holder: undefined,
    preauthorized: false,
    ...over,
  });
  it.each<[string, Binding, Partial<Registered>, string]>([
    ['a plain code, a botId nobody holds', plainCode, {}, 'ok'],
    ['a plain code, a botId whose key was revoked', plainCode, { holder: device({ keyId: null }) }, 'ok'],
    [
      'a plain code, a botId bound to a key (a known serial, §1.5)',
      plainCode,
      { holder: device() },
      'device-exists: this botId is bound to another key',
    ],
    [
      'a plain code, a device pre-authorised for another key',
      plainCode,
      { preauthorized: true },
      'device-exists: this device is pre-authorised for another key',
    ],
    ['a pre-authorisation of this device (its own row)', preauthorised, { preauthorized: true }, 'ok'],
    [
      'a pre-authorisation, a botId bound to a key',
      preauthorised,
      { holder: device() },
      'device-exists: this botId is bound to another key',
    ],
    ['an adopt code, the botId the device keeps', adopt, { wanted: 'bot-1' }, 'ok'],
    ['an adopt code, another botId', adopt, { wanted: 'bot-9' }, 'device-exists: the cloud has another botId for this deviceId'],
    [
      'an adopt code, its botId bound to a key',
      adopt,
      { wanted: 'bot-1', holder: device() },
      'device-exists: this botId is bound to another key',
    ],
    ['a replace code, the device’s own botId, still bound', replace, { known: device(), holder: device() }, 'ok'],
    [
      'a replace code, another botId',
      replace,
      { known: device({ botId: 'bot-2' }) },
      'device-exists: the cloud has another botId for this deviceId',
    ],
  ])('%s', (_, binding, over, expected) => {
    expect(said(refuseAfterRegistering(binding, registered(over)))).toBe(expected);
  });
});

describe('refuseAsk: whether a code-less ask admitted by its vendor may wait, from what the store read before its nonce', () => {
  const limits = { pendingPerSource: 50, pendingMax: 10_000 };
  it.each<[string, Partial<AskRead>, string]>([
    ['a device new to the broker, room everywhere', {}, 'waits'],
    ['a device the broker holds (a key in any other state, or a pre-authorisation)', { held: true }, 'device-exists 409'],
    [
      'a device held, and its source full too: the device is told first',
      { held: true, waiting: { source: 50, vendor: 0 } },
      'device-exists 409',
    ],
    ['49 keys waiting from its source', { waiting: { source: 49, vendor: 49 } }, 'waits'],
    ['50 keys waiting from its source', { waiting: { source: 50, vendor: 50 } }, 'rate-limited 429 retry 60'],
    ['the vendor at pendingMax', { waiting: { source: 0, vendor: 10_000 } }, 'rate-limited 429 retry 3600'],
  ])('%s', (_, over, expected) => {
    const refusal = refuseAsk({ held: false, waiting: { source: 0, vendor: 0 }, limits, ...over });
    const said = refusal === undefined ? 'waits' : `${refusal.code} ${refusal.status}`;
    expect(refusal?.retryAfterS === undefined ? said : `${said} retry ${refusal.retryAfterS}`).toBe(expected);
  });
});
