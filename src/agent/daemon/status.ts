import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
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

/**
 * Replaces the status file atomically: a reader sees the old document or the new one, never half.
 * No fsync: runtimeDir is /run (tmpfs, gone at power loss anyway), the file is rewritten on every
 * change, and an fsync cost 1–3 ms of the event loop per write, four times on the way to connected.
 */
export function writeStatusFile(runtimeDir: string, doc: StatusDoc): void {
  mkdirSync(runtimeDir, { recursive: true, mode: 0o755 });
  const target = join(runtimeDir, STATUS_FILE);
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o644 });
  renameSync(tmp, target);
}

/** Replaces the metrics file atomically (temp file beside it, then rename): the collector never reads half. */
export function writeMetricsFile(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, file);
}

export function readStatusFile(runtimeDir: string): StatusDoc | undefined {
  try {
    return JSON.parse(readFileSync(join(runtimeDir, STATUS_FILE), 'utf8')) as StatusDoc;
  } catch {
    return undefined;
  }
}
