import type { RetryClass } from './errors.js';

/** Result codes of /auth/getToken (DESIGN §1.2). Failures arrive as HTTP 200 with one of these. */
export const Code = {
  OK: 0,
  ILLEGAL_PARAMETERS: 1001,
  WRONG_VERSION: 1002,
  WRONG_TIMESTAMP: 1003,
  UNKNOWN_IDENTITY: 1004,
  INVALID_SIGNATURE: 1005,
  SYSTEM_ERROR: 1006,
} as const;
export type KnownCode = (typeof Code)[keyof typeof Code];

export interface CodeInfo {
  /** Message the service sends in `msg`. */
  msg: string;
  /** What the agent does about it. */
  retry: RetryClass;
  /** One line a person can act on. */
  fix: string;
}

export const CODE_TABLE: Readonly<Record<KnownCode, CodeInfo>> = Object.freeze({
  [Code.OK]: { msg: '', retry: 'retry-soon', fix: '' },
  [Code.ILLEGAL_PARAMETERS]: {
    msg: 'illegal parameters',
    retry: 'fatal',
    fix: 'a required parameter is missing: check accessKeyId and botId/vendorId in the config',
  },
  [Code.WRONG_VERSION]: {
    msg: 'wrong version',
    retry: 'fatal',
    fix: 'the service no longer accepts signature V2: upgrade botlink',
  },
  [Code.WRONG_TIMESTAMP]: {
    msg: 'wrong timestamp',
    retry: 'needs-clock',
    fix: 'the device clock is off by more than the service allows: check NTP (timedatectl status)',
  },
  [Code.UNKNOWN_IDENTITY]: {
    msg: 'enterprise or device does not exist',
    retry: 'needs-provisioning',
    fix: 'the botId or vendorId is not registered under this access key: run botlink provision or fix the config',
  },
  [Code.INVALID_SIGNATURE]: {
    msg: 'invalid signature',
    retry: 'needs-config',
    fix: 'the signature was refused: check accessKeyId and the secret-key file',
  },
  [Code.SYSTEM_ERROR]: {
    msg: 'system error',
    retry: 'retry-backoff',
    fix: 'the service failed while signing: it is retried automatically',
  },
});

export function isKnownCode(code: number): code is KnownCode {
  return Object.hasOwn(CODE_TABLE, code);
}

/** Table entry for any code; codes outside the table are treated as transient service faults. */
export function describeCode(code: number): CodeInfo {
  if (isKnownCode(code)) return CODE_TABLE[code];
  return { msg: `unknown code ${code}`, retry: 'retry-backoff', fix: 'unexpected answer from the service: retried with backoff' };
}

/** WebSocket failures ride as "code 400 with a message" (DESIGN §1.4). */
export const WS_FAILURE_CODE = 400;
export const WsMessage = {
  BOT_INVALID: 'botId not found or invalid',
  UNAUTHORIZED: 'Unauthorized',
  REPEAT_SESSION: 'REPEAT_CLIENT_SESSION',
} as const;
export type WsFailure = (typeof WsMessage)[keyof typeof WsMessage];

/** What a person does about each refusal: the link reports it, botlink doctor prints it. */
export const WS_FAILURE_FIXES: Readonly<Record<WsFailure, string>> = Object.freeze({
  [WsMessage.BOT_INVALID]: 'check botId in the config or run botlink provision',
  [WsMessage.UNAUTHORIZED]: 'the account configuration may be incomplete: check it with the service provider',
  [WsMessage.REPEAT_SESSION]:
    'make sure no other device or agent uses the same botId; after an SD card swap the old card keeps its token until it ends (2–8 h): power it off, or have the vendor revoke it with --displace',
});

const WS_FAILURES: readonly string[] = Object.values(WsMessage);

export function isWsFailure(msg: string): msg is WsFailure {
  return WS_FAILURES.includes(msg);
}
