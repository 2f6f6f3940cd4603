import { fixOf, messageOf } from '../protocol/errors.js';
import type { Clock } from '../clock.js';
import type { AgentConfig } from '../agent/config/config.js';
import type { ResolvedIdentity } from '../agent/daemon/provisioning.js';
import type { AgentRuntime } from '../agent/daemon/runtime.js';
import type { SecretFileError } from '../agent/config/secret.js';
import type { DeviceKeyError } from '../agent/config/device-key.js';
import type { CheckAnswer } from '../agent/broker/answers.js';
import type { TimeSyncResult } from '../agent/time/timesync.js';

/** One check's answer; a skip (an earlier check failed) does not count as passing. */
export interface Outcome {
  status: 'ok' | 'fail' | 'skip';
  detail: string;
  /** What to do, for a failure. */
  fix?: string;
}

export interface CheckResult extends Outcome {
  name: string;
}

/** What the checks learn and hand on to later ones. */
export interface DoctorContext {
  readonly configFile: string | undefined;
  /** The environment the config is read with: the one the command was given. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly clock: Clock;
  readonly timeoutMs: number;
  config?: AgentConfig;
  secretError?: SecretFileError;
  /** Broker mode: the device key could not be used (the settings were). */
  keyError?: DeviceKeyError;
  rt?: AgentRuntime;
  /** Warnings the token store logged while opening (a corrupt file moved aside). */
  storeTrouble: string[];
  /** undefined: there was no database file before the store opened. */
  dbModeBefore?: number | undefined;
  verdict?: TimeSyncResult;
  reachable?: boolean;
  /** Broker mode: whether the broker answered, and what it answered a signed /v1/check with. */
  broker?: { reachable: boolean; answer?: { ok: true; checked: CheckAnswer } | { ok: false; error: unknown } };
  identity?: ResolvedIdentity;
  /** Held in memory for the WebSocket check only; never stored or printed. */
  token?: string;
}

/** `issuer`: whoever issues the tokens can be reached (the service; in broker mode, the broker). */
export type Need = 'config' | 'runtime' | 'service' | 'issuer';

/** Why a check that needs this cannot run, or undefined when it can. */
export const UNMET: Readonly<Record<Need, (ctx: DoctorContext) => string | undefined>> = {
  config: (ctx) => (ctx.config ? undefined : 'needs a usable configuration (see above)'),
  runtime: (ctx) => (ctx.rt ? undefined : 'needs the token store in the state dir (see above)'),
  service: (ctx) => (ctx.reachable === false ? 'the service cannot be reached (see above)' : undefined),
  issuer: (ctx) =>
    ctx.config?.mode === 'broker'
      ? ctx.broker?.reachable === false
        ? 'the broker cannot be reached (see above)'
        : undefined
      : UNMET.service(ctx),
};

export interface Check {
  name: string;
  needs: readonly Need[];
  run(ctx: DoctorContext, signal: AbortSignal): Outcome | Promise<Outcome>;
}

export const ok = (detail: string): Outcome => ({ status: 'ok', detail });
export const fail = (detail: string, fix: string): Outcome => ({ status: 'fail', detail, fix });
export const skip = (detail: string): Outcome => ({ status: 'skip', detail });

/** A failure from anything thrown: its message, and the fix it carries or else `fallback`. */
export function failWith(err: unknown, fallback: string): Outcome {
  return fail(messageOf(err), fixOf(err) ?? fallback);
}

export const octal = (mode: number): string => (mode & 0o777).toString(8).padStart(4, '0');
