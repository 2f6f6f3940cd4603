import { WireError } from './errors.js';
import { isWsFailure, WS_FAILURE_CODE, WsMessage, type WsFailure } from './codes.js';

// ---- shapes (DESIGN §1.2–1.5) ----

/** botId wins over vendorId when both are present. */
export type Identity = { kind: 'bot'; id: string } | { kind: 'vendor'; id: string };

export interface GetTokenRequest {
  accessKeyId: string;
  accessTimestamp: string;
  accessNonce: string;
  accessVersion: string;
  accessSign: string;
  botId?: string;
  vendorId?: string;
}

export interface GetTokenSuccess {
  accessToken: string;
  expireIn: number;
  refreshToken: string;
  refreshExpireIn: number;
}

export interface RefreshTokenRequest {
  accessKeyId: string;
  refreshToken: string;
  botId?: string;
  vendorId?: string;
}

export interface RefreshTokenSuccess {
  accessToken: string;
  expireIn: number;
}

export const DEVICE_TYPES = ['PHYSICAL_ROBOT', 'APP_ROBOT'] as const;
export type DeviceType = (typeof DEVICE_TYPES)[number];

export interface RegisterDeviceRequest {
  vendorId: string;
  appId: string;
  deviceId: string;
  type: DeviceType;
  name: string;
}

/** A nonzero `code` answer: the service refused, the body was well-formed. */
export interface CodeFailure {
  ok: false;
  code: number;
  msg: string;
}
export type Answer<T> = ({ ok: true } & T) | CodeFailure;

export type RegisterAnswer = { ok: true; botId: string } | { ok: false; code: string; msg: string };

// ---- field readers ----

type Obj = Record<string, unknown>;

function object(value: unknown, field = ''): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new WireError(field, 'expected a JSON object');
  }
  return value as Obj;
}

/** A required string; empty counts as missing. */
function text(o: Obj, key: string): string {
  const v = o[key];
  if (v === undefined || v === null || v === '') throw new WireError(key, 'is required');
  if (typeof v !== 'string') throw new WireError(key, `expected a string, got ${typeName(v)}`);
  return v;
}

/** An optional string; absent, null and empty all read as undefined. */
function optionalText(o: Obj, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new WireError(key, `expected a string, got ${typeName(v)}`);
  return v;
}

/** Tokens travel in an HTTP header: visible ASCII only, bounded, or the header cannot be built. */
const TOKEN_SHAPE = /^[\x21-\x7e]{1,4096}$/;

function token(o: Obj, key: string): string {
  const v = text(o, key);
  if (!TOKEN_SHAPE.test(v)) throw new WireError(key, 'must be 1–4096 visible ASCII characters');
  return v;
}

function integer(o: Obj, key: string, min: number): number {
  const v = o[key];
  if (v === undefined || v === null) throw new WireError(key, 'is required');
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new WireError(key, `expected an integer, got ${typeName(v)}`);
  }
  if (v < min) throw new WireError(key, `must be at least ${min}`);
  return v;
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function identityFields(o: Obj): { botId?: string; vendorId?: string } {
  const botId = optionalText(o, 'botId');
  const vendorId = optionalText(o, 'vendorId');
  if (botId === undefined && vendorId === undefined) throw new WireError('botId', 'botId or vendorId is required');
  return { ...(botId !== undefined && { botId }), ...(vendorId !== undefined && { vendorId }) };
}

/** The identity a request speaks for: botId wins when both are present. */
export function identityOf(req: { botId?: string; vendorId?: string }): Identity {
  if (req.botId) return { kind: 'bot', id: req.botId };
  if (req.vendorId) return { kind: 'vendor', id: req.vendorId };
  throw new WireError('botId', 'botId or vendorId is required');
}

/** The identity fields to send for an identity. */
export function identityFieldsOf(identity: Identity): { botId: string } | { vendorId: string } {
  return identity.kind === 'bot' ? { botId: identity.id } : { vendorId: identity.id };
}

// ---- requests (read by the service) ----

export function parseGetTokenRequest(value: unknown): GetTokenRequest {
  const o = object(value);
  return {
    accessKeyId: text(o, 'accessKeyId'),
    accessTimestamp: text(o, 'accessTimestamp'),
    accessNonce: text(o, 'accessNonce'),
    accessVersion: text(o, 'accessVersion'),
    accessSign: text(o, 'accessSign'),
    ...identityFields(o),
  };
}

export function parseRefreshTokenRequest(value: unknown): RefreshTokenRequest {
  const o = object(value);
  return { accessKeyId: text(o, 'accessKeyId'), refreshToken: text(o, 'refreshToken'), ...identityFields(o) };
}

const MAX_FIELD = 128;

function bounded(o: Obj, key: string, fallback?: string): string {
  const v = fallback === undefined ? text(o, key) : (optionalText(o, key) ?? fallback);
  if (v.length > MAX_FIELD) throw new WireError(key, `longer than ${MAX_FIELD} characters`);
  return v;
}

export function parseRegisterDeviceRequest(value: unknown): RegisterDeviceRequest {
  const o = object(value);
  const type = text(o, 'type');
  if (!(DEVICE_TYPES as readonly string[]).includes(type)) {
    throw new WireError('type', `must be one of ${DEVICE_TYPES.join(', ')}`);
  }
  const deviceId = bounded(o, 'deviceId');
  return {
    vendorId: bounded(o, 'vendorId'),
    appId: bounded(o, 'appId', ''),
    deviceId,
    type: type as DeviceType,
    name: bounded(o, 'name', deviceId),
  };
}

// ---- responses (read by the agent) ----

function codeOf(o: Obj): CodeFailure | undefined {
  const code = integer(o, 'code', Number.MIN_SAFE_INTEGER);
  if (code === 0) return undefined;
  const msg = o['msg'];
  return { ok: false, code, msg: typeof msg === 'string' ? msg : '' };
}

export function parseGetTokenResponse(value: unknown): Answer<GetTokenSuccess> {
  const o = object(value);
  const failure = codeOf(o);
  if (failure) return failure;
  return {
    ok: true,
    accessToken: token(o, 'accessToken'),
    expireIn: integer(o, 'expireIn', 1),
    refreshToken: token(o, 'refreshToken'),
    refreshExpireIn: integer(o, 'refreshExpireIn', 1),
  };
}

export function parseRefreshTokenResponse(value: unknown): Answer<RefreshTokenSuccess> {
  const o = object(value);
  const failure = codeOf(o);
  if (failure) return failure;
  return { ok: true, accessToken: token(o, 'accessToken'), expireIn: integer(o, 'expireIn', 1) };
}

export function parseRegisterDeviceResponse(value: unknown): RegisterAnswer {
  const o = object(value);
  const state = text(o, 'state');
  if (state === 'SUCCESS') return { ok: true, botId: text(o, 'data') };
  if (state !== 'FAILURE') throw new WireError('state', 'expected SUCCESS or FAILURE');
  const code = o['code'];
  const msg = o['msg'];
  return {
    ok: false,
    code: typeof code === 'string' || typeof code === 'number' ? String(code) : '',
    msg: typeof msg === 'string' ? msg : '',
  };
}

/**
 * Recognises a WebSocket failure in any of its carriers: a JSON `{code: 400, msg}` (handshake body
 * or text frame), the guide's displacement event (below), or the bare message (close reason,
 * handshake body). A text frame must be a JSON form (`bare: false`): a chat line that merely says
 * "Unauthorized" is not a failure.
 */
export function parseWsFailure(payload: string, opts: { bare?: boolean } = {}): WsFailure | undefined {
  const trimmed = payload.trim();
  if (isWsFailure(trimmed)) return opts.bare === false ? undefined : trimmed;
  if (!trimmed.startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  if (isDisplacementEvent(parsed as Obj)) return WsMessage.REPEAT_SESSION;
  const { code, msg } = parsed as Obj;
  if ((code === WS_FAILURE_CODE || code === String(WS_FAILURE_CODE) || code === 401) && typeof msg === 'string' && isWsFailure(msg)) {
    return msg;
  }
  return undefined;
}

/**
 * The public guide's displacement marker (DESIGN §1.4): an `EVENT` envelope of §1.7 whose
 * `content.eventType` is REPEAT_CLIENT_SESSION, whatever its `code`. The eventType is the marker, so
 * an absent contentType still counts; another contentType is conversation, never a marker.
 */
function isDisplacementEvent(o: Obj): boolean {
  const { contentType, content } = o;
  if (contentType !== undefined && contentType !== 'EVENT') return false;
  if (typeof content !== 'object' || content === null) return false;
  return (content as Obj)['eventType'] === WsMessage.REPEAT_SESSION;
}

export function wsFailureBody(msg: WsFailure): string {
  return JSON.stringify({ code: WS_FAILURE_CODE, msg });
}
