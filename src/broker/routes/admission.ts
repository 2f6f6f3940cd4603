/**
 * Who may enroll (DESIGN §3.7), as pure functions of what the store read: the admission of a key (the same
 * key again, a code of its kind, a pre-authorisation, or a code-less ask to wait for an operator), then the
 * binding rules of each kind before and after the cloud registers the device — plain (bound to a device or
 * not), adopt, replace, pre-authorised, accepted.
 */
import { Refusal } from '../refusal.js';
import type { CodeKind, CodeRow, DeviceRow, KeyRow, PreauthRow } from '../store/types.js';

/** What admits a key: itself, enrolled before (a retry), a code's row, its pre-authorisation, or its vendor's leave to wait for an operator. */
export type Admitted =
  | { by: 'again'; key: KeyRow }
  | { by: 'code'; row: CodeRow }
  | { by: 'preauth'; row: PreauthRow }
  | { by: 'ask'; vendorId: string };

export interface AdmissionRead {
  /** The key the request carries, as the store knows it (a revoked one was refused at the key stage). */
  known: KeyRow | undefined;
  deviceId: string;
  /** The botId the device asks to keep (adopt). */
  botId: string | undefined;
  /** No code given (undefined), the code's row, or 'unknown': no code of that shape is stored. */
  code: CodeRow | 'unknown' | undefined;
  /** The key's pre-authorisation, read when no code is given. */
  preauth: PreauthRow | undefined;
  /** The vendorId a code-less enrollment names. */
  vendorId?: string | undefined;
  /** Whether pendingEnrollment lets that vendor's serial wait for an operator. */
  mayWait?: boolean;
  now: number;
}

/** Admitted; refused before anything is written; or (a code that does not exist) refused once counted against the source. */
export type AdmissionVerdict = { admit: Admitted } | { refuse: Refusal } | { refuseCounted: Refusal };

export function admitEnrollment(r: AdmissionRead): AdmissionVerdict {
  if (r.known) return { admit: { by: 'again', key: r.known } };
  if (r.code === undefined) {
    const p = r.preauth;
    if (p !== undefined && p.deviceId === r.deviceId && (r.vendorId === undefined || p.vendorId === r.vendorId))
      return { admit: { by: 'preauth', row: p } };
    if (p !== undefined) return badCode('this key is pre-authorised for another device');
    if (r.vendorId === undefined) return badCode('no code, and this key is not pre-authorised for this device');
    if (r.mayWait !== true) return badCode('no code, and this vendor lets no such serial wait for an operator');
    return { admit: { by: 'ask', vendorId: r.vendorId } };
  }
  // Guessing codes counts against the guesser's source.
  if (r.code === 'unknown') return { refuseCounted: new Refusal('bad-code', 'no such enrollment code') };
  const row = r.code;
  if (row.usesLeft < 1) return badCode('this code is spent');
  if (row.expiresAt <= r.now) return badCode('this code has expired');
  if (row.deviceId !== null && row.deviceId !== r.deviceId) return badCode('this code is bound to another device');
  if ((row.kind === 'adopt') !== (r.botId !== undefined))
    return badCode(row.kind === 'adopt' ? 'an adopt code needs the botId the device keeps' : 'only an adopt code takes a botId');
  return { admit: { by: 'code', row } };
}

function badCode(msg: string): { refuse: Refusal } {
  return { refuse: new Refusal('bad-code', msg) };
}

/** How a new key binds: its code's kind; a pre-authorisation binds as a plain code does. */
export interface Binding {
  kind: CodeKind;
  byCode: boolean;
}

/** The broker's hold on a device, and the keys waiting, as a code-less ask's admission read them. */
export interface AskRead {
  /** A key of the device in a state other than pending, or its pre-authorisation. */
  held: boolean;
  waiting: { source: number; vendor: number };
  limits: { pendingPerSource: number; pendingMax: number };
}

/** How long a source or a vendor whose keys fill their limit is told to wait. */
const SOURCE_FULL_RETRY_S = 60;
const VENDOR_FULL_RETRY_S = 3600;

/** Why a code-less ask may not wait: the device is held (409), or a limit of waiting keys is full (429). */
export type AskRefused = 'device-exists' | 'source-full' | 'vendor-full';

export function askRefusal(why: AskRefused): Refusal {
  if (why === 'device-exists')
    return new Refusal('device-exists', 'this device is known to the broker already: a --replace code moves it to a new key');
  if (why === 'source-full')
    return new Refusal('rate-limited', 'too many keys wait for an operator from this source', { retryAfterS: SOURCE_FULL_RETRY_S });
  return new Refusal('rate-limited', 'too many keys wait for an operator for this vendor', { retryAfterS: VENDOR_FULL_RETRY_S });
}

/** A code-less ask admitted to wait, judged on what the store read before its nonce. */
export function refuseAsk(r: AskRead): Refusal | undefined {
  if (r.held) return askRefusal('device-exists');
  if (r.waiting.source >= r.limits.pendingPerSource) return askRefusal('source-full');
  if (r.waiting.vendor >= r.limits.pendingMax) return askRefusal('vendor-full');
  return undefined;
}

export function bindingOf(a: Exclude<Admitted, { by: 'again' } | { by: 'ask' }>): Binding {
  return a.by === 'code' ? { kind: a.row.kind, byCode: true } : { kind: 'plain', byCode: false };
}

/** Before the cloud registers the device: `known` is the device (vendorId, deviceId) as the broker knows it. */
export function refuseBeforeRegistering(b: Binding, known: DeviceRow | undefined): Refusal | undefined {
  if (b.kind === 'plain' && b.byCode && known)
    return new Refusal('device-exists', 'this deviceId is enrolled already; a replace code moves it to a new key');
  if (b.kind === 'adopt' && known?.keyId) return new Refusal('device-exists', 'this device is enrolled with a key already');
  if (b.kind === 'replace' && !known) return new Refusal('bad-code', 'a replace code is for a device the broker knows');
  return undefined;
}

export interface Registered {
  /** The botId the cloud returned for the deviceId (§1.5: a known serial's own). */
  botId: string;
  /** The botId the device asked to keep (adopt). */
  wanted: string | undefined;
  known: DeviceRow | undefined;
  /** The device that holds the returned botId, if any. */
  holder: DeviceRow | undefined;
  /** Whether the device is pre-authorised (for another key). */
  preauthorized: boolean;
}

/** After the cloud registered it: whether the botId it returned may be bound to the new key. */
export function refuseAfterRegistering(b: Binding, r: Registered): Refusal | undefined {
  if (b.kind === 'adopt' && r.botId !== r.wanted) return new Refusal('device-exists', 'the cloud has another botId for this deviceId');
  if (b.kind === 'replace' && r.botId !== r.known?.botId)
    return new Refusal('device-exists', 'the cloud has another botId for this deviceId');
  if (b.kind !== 'replace' && r.holder?.keyId) return new Refusal('device-exists', 'this botId is bound to another key');
  if (b.kind === 'plain' && b.byCode && r.preauthorized)
    return new Refusal('device-exists', 'this device is pre-authorised for another key');
  return undefined;
}
