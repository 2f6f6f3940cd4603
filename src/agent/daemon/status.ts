import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERSION } from '../../version.js';
import { type KeyState, keyState } from '../broker/enrollment.js';
import type { IdentityMode } from '../config/mode.js';
import type { LinkStatus } from '../link/supervisor.js';
import type { RelayCounters } from '../local/relay-port.js';
import type { TokenSnapshot } from '../token/manager-types.js';
import { replaceFile } from './replace-file.js';
import type { Enrollment } from './zero-touch.js';

/** `<runtimeDir>/status.json` (DESIGN §3.4, stable). Tokens never appear in it. */
export interface StatusDoc {
  pid: number;
  updatedAt: number;
  /**
   * `mode`: whether this device signs for itself or asks the vendor's broker (DESIGN §3.7); absent in files
   * of older releases. Broker mode adds the device key's `keyId` and its `state` as the broker last told it.
   */
  identity: { kind: 'bot' | 'vendor'; id: string; mode?: IdentityMode; keyId?: string; state?: KeyState };
  clock: { trusted: boolean; source: string; offsetMs: number | null; verdict?: string };
  token: { accessExpiresAt: number | null; refreshExpiresAt: number | null; lastError?: string | null; fix?: string };
  link: LinkStatus;
  relay: RelayCounters;
  /** Whether the token held is saved in stateDir; false on a full or read-only disk (the daemon retries). */
  store?: { persisted: boolean; lastError: string | null };
  version?: string;
}

/** What each part says of itself now; a part not built yet (before provisioning, say) is undefined. */
export interface StatusParts {
  identity: { kind: 'bot' | 'vendor'; id: string };
  mode: IdentityMode;
  /** Broker mode: the device key, and (zero-touch) where its enrollment stands. */
  broker?: { keyId: string; enrollment: Enrollment | undefined };
  /** Wall-clock ms, or undefined before the runtime exists. */
  now: number | undefined;
  tokens: TokenSnapshot | undefined;
  link: LinkStatus | undefined;
  relay: RelayCounters;
}

/** The status document of DESIGN §3.4, from the parts' snapshots; a missing part reads as not started. */
export function statusDoc(p: StatusParts): StatusDoc {
  const snap = p.tokens;
  const now = p.now ?? 0;
  // Before a botId there is no token manager: the enrollment's error is the one to show.
  const lastError = snap?.lastError ?? p.broker?.enrollment?.error;
  return {
    pid: process.pid,
    updatedAt: now,
    version: VERSION,
    identity: {
      ...p.identity,
      mode: p.mode,
      ...(p.broker && { keyId: p.broker.keyId, state: keyState(p.broker.enrollment?.state, snap?.lastError?.code) }),
    },
    clock: {
      trusted: snap?.clock.trusted ?? false,
      source: snap?.clock.source ?? 'none',
      offsetMs: snap?.clock.offsetMs ?? null,
      verdict: snap?.clock.verdict ?? 'pending',
    },
    token: {
      accessExpiresAt: snap?.accessExpiresAt ?? null,
      refreshExpiresAt: snap?.refreshExpiresAt ?? null,
      lastError: lastError?.message ?? null,
      ...(lastError?.fix !== undefined && { fix: lastError.fix }),
    },
    store: snap?.store ?? { persisted: true, lastError: null },
    link: p.link ?? { state: 'connecting', since: now, reconnects: 0, reconnectsByCause: {}, lastError: null },
    relay: p.relay,
  };
}

export const STATUS_FILE = 'status.json';

/**
 * Replaces the status file atomically: a reader sees the old document or the new one, never half. 0644
 * whatever the unit's UMask=0077: the group and others read it (`botlink status`, doctor). No fsync:
 * runtimeDir is /run (tmpfs, gone at power loss anyway), the file is rewritten on every change, and an
 * fsync cost 1–3 ms of the event loop per write, four times on the way to connected.
 */
export function writeStatusFile(runtimeDir: string, doc: StatusDoc): void {
  mkdirSync(runtimeDir, { recursive: true, mode: 0o755 });
  replaceFile(join(runtimeDir, STATUS_FILE), `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o644, durable: false });
}

export function readStatusFile(runtimeDir: string): StatusDoc | undefined {
  try {
    return JSON.parse(readFileSync(join(runtimeDir, STATUS_FILE), 'utf8')) as StatusDoc;
  } catch {
    return undefined;
  }
}
