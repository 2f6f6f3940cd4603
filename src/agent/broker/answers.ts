/** The broker's answers (DESIGN §3.7) as the device reads them: a shape that is not the contract's is an error. */

import type { DeviceType } from '../../protocol/wire.js';
import { BrokerError } from './errors.js';

/** `POST /v1/token` → 200. */
export interface IssuedToken {
  botId: string;
  accessToken: string;
  /** Seconds of life left as the broker issued it. */
  expireIn: number;
  /** Wall-clock ms as the cloud (and its broker) sees it. */
  expiresAt: number;
}

/** `POST /v1/enroll`'s body, but the key, which the client adds: a code, or (no code) the vendorId. */
export interface EnrollRequest {
  code?: string;
  /** Required when there is no code (§3.7 "Enrollment with no code"). */
  vendorId?: string;
  deviceId: string;
  appId?: string;
  type?: DeviceType;
  name?: string;
  /** With an --adopt code: the botId this device already has. */
  botId?: string;
}

/** `POST /v1/enroll` → 200. */
export interface Enrolled {
  botId: string;
  vendorId: string;
  keyId: string;
}

/** `POST /v1/check` → 200. */
export interface Checked {
  botId: string;
  keyId: string;
  state: 'active';
}

/** 202 `{state: "pending", keyId}` (enroll with no code, check): the key waits for the vendor's operator. */
export interface Pending {
  state: 'pending';
  keyId: string;
  /** The answer's Retry-After in ms; undefined when it named none. */
  retryAfterMs: number | undefined;
}

/** `POST /v1/enroll`: bound to a botId, or still waiting for an operator. */
export type EnrollAnswer = ({ state: 'active' } & Enrolled) | Pending;

/** `POST /v1/check`: the key active, or still waiting. */
export type CheckAnswer = Checked | Pending;

/** `GET /v1/health` → 200. */
export interface BrokerHealth {
  ok: true;
  store: string;
}

type Obj = Record<string, unknown>;

/** Tokens travel in an HTTP header: visible ASCII only, bounded. */
const TOKEN_SHAPE = /^[\x21-\x7e]{1,4096}$/;
/** An identity goes into a URL and the status file: bounded, no spaces or control characters. */
const ID_SHAPE = /^[^\s\p{Cc}]{1,256}$/u;

function bad(route: string, problem: string): BrokerError {
  return new BrokerError('ERR_BAD_RESPONSE', `${route}: the broker answered with an unexpected shape (${problem})`, 'retry-backoff');
}

function object(route: string, value: unknown): Obj {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Obj;
  throw bad(route, 'expected a JSON object');
}

function matching(route: string, o: Obj, key: string, shape: RegExp): string {
  const v = o[key];
  if (typeof v === 'string' && shape.test(v)) return v;
  throw bad(route, `${key} must be ${shape === TOKEN_SHAPE ? '1–4096 visible ASCII characters' : 'an identifier'}`);
}

function count(route: string, o: Obj, key: string, min: number): number {
  const v = o[key];
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= min) return v;
  throw bad(route, `${key} must be an integer of at least ${min}`);
}

export function parseIssued(value: unknown): IssuedToken {
  const route = 'POST /v1/token';
  const o = object(route, value);
  return {
    botId: matching(route, o, 'botId', ID_SHAPE),
    accessToken: matching(route, o, 'accessToken', TOKEN_SHAPE),
    expireIn: count(route, o, 'expireIn', 0),
    expiresAt: count(route, o, 'expiresAt', 1),
  };
}

export function parseEnrolled(value: unknown): Enrolled {
  const route = 'POST /v1/enroll';
  const o = object(route, value);
  return {
    botId: matching(route, o, 'botId', ID_SHAPE),
    vendorId: matching(route, o, 'vendorId', ID_SHAPE),
    keyId: matching(route, o, 'keyId', KEY_ID),
  };
}

const KEY_ID = /^[0-9a-f]{32}$/;

export function parseChecked(value: unknown): Checked {
  const route = 'POST /v1/check';
  const o = object(route, value);
  if (o.state !== 'active') throw bad(route, 'state must be "active"');
  return { botId: matching(route, o, 'botId', ID_SHAPE), keyId: matching(route, o, 'keyId', KEY_ID), state: 'active' };
}

export function parsePending(route: string, value: unknown, retryAfterMs: number | undefined): Pending {
  const o = object(route, value);
  if (o.state !== 'pending') throw bad(route, 'state must be "pending" in a 202 answer');
  return { state: 'pending', keyId: matching(route, o, 'keyId', KEY_ID), retryAfterMs };
}

export function parseHealth(value: unknown): BrokerHealth {
  const route = 'GET /v1/health';
  const o = object(route, value);
  if (o.ok !== true) throw bad(route, 'ok must be true');
  return { ok: true, store: typeof o.store === 'string' ? o.store : 'unknown' };
}
