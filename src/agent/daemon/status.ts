import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { LinkStatus } from '../link/supervisor.js';
import type { RelayCounters } from '../local/relay-port.js';

/** `<runtimeDir>/status.json` (DESIGN §3.4, stable). Tokens never appear in it. */
export interface StatusDoc {
  pid: number;
  updatedAt: number;
  identity: { kind: 'bot' | 'vendor'; id: string };
  clock: { trusted: boolean; source: string; offsetMs: number | null; verdict?: string };
  token: { accessExpiresAt: number | null; refreshExpiresAt: number | null; lastError?: string | null; fix?: string };
  link: LinkStatus;
  relay: RelayCounters;
  /** Whether the token held is saved in stateDir; false on a full or read-only disk (the daemon retries). */
  store?: { persisted: boolean; lastError: string | null };
  version?: string;
}

export const STATUS_FILE = 'status.json';

/** Replaces the status file atomically: a reader sees the old document or the new one, never half. */
export function writeStatusFile(runtimeDir: string, doc: StatusDoc): void {
  mkdirSync(runtimeDir, { recursive: true, mode: 0o755 });
  const target = join(runtimeDir, STATUS_FILE);
  const tmp = `${target}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o644);
  try {
    writeSync(fd, `${JSON.stringify(doc, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, target);
}

export function readStatusFile(runtimeDir: string): StatusDoc | undefined {
  try {
    return JSON.parse(readFileSync(join(runtimeDir, STATUS_FILE), 'utf8')) as StatusDoc;
  } catch {
    return undefined;
  }
}
