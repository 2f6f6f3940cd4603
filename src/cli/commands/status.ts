import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { systemClock, systemRandom } from '../../clock.js';
import { type AgentConfig, DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { runningDaemon } from '../../agent/store/instance.js';
import type { KeyState } from '../../agent/broker/enrollment.js';
import type { LinkState } from '../../agent/link/supervisor.js';
import { resolveIdentity } from '../../agent/daemon/provisioning.js';
import { openRuntime } from '../../agent/daemon/runtime.js';
import { readStatusFile, type StatusDoc } from '../../agent/daemon/status.js';
import { DB_FILE, storeIdentity } from '../../agent/store/token-store.js';
import { checkTimeSync, type TimeSyncResult } from '../../agent/time/timesync.js';
import type { TokenPair } from '../../agent/store/token-store.js';
import { refreshExpiresAt } from '../../agent/token/pairs.js';
import { withFix } from '../../protocol/errors.js';
import { BUILD_TIME_MS } from '../../version.js';
import { defineCommand } from '../frame/command.js';
import { formatAgo, formatDuration, formatLeft, formatOffset, formatTime } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { agentConfig } from './agent-config.js';

const USAGE = `usage: botlink status [--config FILE] [--json]

What the agent holds and whether the daemon runs: the daemon's status.json while it runs,
else the token database, opened read-only. Needs no network and changes nothing.

  --config FILE  agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --json         one JSON object for scripts (status.json's shape plus "daemon" and "source")`;

/** status.json's shape (DESIGN §3.4), with nulls where a stopped daemon leaves nothing to say. */
export interface StatusReport {
  pid: number | null;
  updatedAt: number;
  identity: { kind: 'bot' | 'vendor'; id: string; provisioned?: boolean; mode?: 'sign' | 'broker'; keyId?: string; state?: KeyState };
  clock: { trusted: boolean; source: string; offsetMs: number | null; verdict?: string };
  token: { accessExpiresAt: number | null; refreshExpiresAt: number | null; lastError?: string | null; fix?: string };
  link: {
    state: LinkState;
    since: number | null;
    reconnects: number;
    /** status.json's link.reconnectsByCause, when a daemon runs (or ran) and wrote one. */
    reconnectsByCause?: Record<string, number>;
    lastError: string | null;
    fix?: string;
  };
  /** From the live status.json: whether the daemon's token is saved in stateDir. */
  store?: { persisted: boolean; lastError: string | null };
  daemon: { running: boolean; pid: number | null; lastStatus?: { pid: number; updatedAt: number; linkState: LinkState } };
  /** Where the facts came from: the live daemon's status.json, or the token database. */
  source: 'status-file' | 'database';
}

/** `botlink status`: a short summary, or `--json`; never a token in either. */
export const status = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' }, json: { type: 'boolean' } },
  async run({ flags, stdout, env }) {
    const report = await gather(agentConfig(flags.config, env));
    stdout.write(flags.json === true ? `${printableJson(report)}\n` : summary(report, Date.now()));
  },
});

async function gather(config: AgentConfig): Promise<StatusReport> {
  // Broker mode: the key's id from the config; its state only as the daemon last heard it from the broker.
  const key = config.mode === 'broker' ? { keyId: config.deviceKey.keyId } : {};
  const fromConfig = {
    kind: config.botId ? 'bot' : 'vendor',
    id: config.botId ?? config.vendorId ?? '',
    mode: config.mode,
    ...key,
  } as const;
  // No database means no daemon ever ran here.
  if (!existsSync(join(config.stateDir, DB_FILE))) {
    const verdict = await checkTimeSync({ clock: systemClock, floorMs: () => BUILD_TIME_MS });
    return fromDatabase(fromConfig, verdict, undefined, undefined, undefined);
  }
  // Read-only: run as root, status must not create, move or convert a file the daemon's user then cannot open.
  const rt = openRuntime(config, { log: pino({ level: 'silent' }), clock: systemClock, random: systemRandom, readOnlyStore: true });
  try {
    const daemon = await runningDaemon(rt.store);
    const doc = readStatusFile(config.runtimeDir);
    // A status.json is live only when the daemon that holds the instance lock wrote it.
    if (daemon && doc && doc.pid === daemon.pid) {
      return { ...doc, link: { ...doc.link }, daemon: { running: true, pid: daemon.pid }, source: 'status-file' };
    }
    let identity: StatusReport['identity'] = fromConfig;
    try {
      const resolved = resolveIdentity(rt);
      const heard = doc?.identity.state === undefined ? {} : { state: doc.identity.state };
      identity =
        resolved.kind === 'bot'
          ? { kind: 'bot', id: resolved.id, provisioned: resolved.provisioned, mode: config.mode, ...key, ...heard }
          : { kind: 'vendor', id: resolved.id, mode: config.mode, ...key, ...heard };
    } catch {
      // No deviceId and no board serial: the config's identity is all there is to show.
    }
    const pair = rt.store.pairFor(storeIdentity(config, identity));
    return fromDatabase(identity, await rt.checkTimeSync(), pair, daemon?.pid, daemon ? undefined : doc);
  } finally {
    await rt.close();
  }
}

function fromDatabase(
  identity: StatusReport['identity'],
  verdict: TimeSyncResult,
  pair: TokenPair | undefined,
  daemonPid: number | undefined,
  stale: StatusDoc | undefined,
): StatusReport {
  const running = daemonPid !== undefined;
  const cleanStop = stale?.link.state === 'stopped';
  return {
    pid: daemonPid ?? null,
    updatedAt: Date.now(),
    identity,
    clock: { trusted: verdict.verdict === 'synced', source: verdict.source, offsetMs: null, verdict: verdict.verdict },
    token: {
      accessExpiresAt: pair?.accessExpiresAt ?? null,
      // A broker's pair holds no refresh token (DESIGN §3.7): nothing expires there.
      refreshExpiresAt: refreshExpiresAt(pair) ?? null,
      lastError: stale?.token.lastError ?? null,
      ...(stale?.token.fix !== undefined && { fix: stale.token.fix }),
    },
    link: {
      // A daemon without a status.json of its own is still starting.
      state: running ? 'connecting' : 'stopped',
      since: cleanStop ? stale.link.since : null,
      reconnects: stale?.link.reconnects ?? 0,
      ...(stale?.link.reconnectsByCause !== undefined && { reconnectsByCause: stale.link.reconnectsByCause }),
      lastError: stale?.link.lastError ?? null,
      ...(stale?.link.fix !== undefined && { fix: stale.link.fix }),
    },
    daemon: {
      running,
      pid: daemonPid ?? null,
      ...(stale && { lastStatus: { pid: stale.pid, updatedAt: stale.updatedAt, linkState: stale.link.state } }),
    },
    source: 'database',
  };
}

const MODE_LINES = {
  sign: 'sign (this device holds the account secret and signs getToken)',
  broker: "broker (the vendor's broker signs; no account secret on this device)",
} as const;

function summary(r: StatusReport, wallNow: number): string {
  // Expiries are on the server's clock: compare them with our best estimate of it.
  const now = wallNow + (r.clock.offsetMs ?? 0);
  const rows: [string, string][] = [
    ['identity', `${r.identity.kind} ${r.identity.id}${identityNote(r)}`],
    ...(r.identity.mode === undefined ? [] : [['mode', MODE_LINES[r.identity.mode]] as [string, string]]),
    ...(r.identity.keyId === undefined ? [] : [['device key', keyLine(r.identity.keyId, r.identity.state)] as [string, string]]),
    ['daemon', daemonLine(r, wallNow)],
    ['clock', clockLine(r)],
    [
      'access',
      r.token.accessExpiresAt === null
        ? 'no token cached'
        : `${formatLeft(r.token.accessExpiresAt, now)} (until ${formatTime(r.token.accessExpiresAt)})`,
    ],
    [
      'refresh',
      r.token.refreshExpiresAt === null
        ? 'no token cached'
        : `${formatLeft(r.token.refreshExpiresAt, now)} (until ${formatTime(r.token.refreshExpiresAt)})`,
    ],
    ['link', linkLine(r, wallNow)],
    [
      'last error',
      [
        r.token.lastError && `token: ${withFix(r.token.lastError, r.token.fix)}`,
        r.link.lastError && `link: ${withFix(r.link.lastError, r.link.fix)}`,
      ]
        .filter(Boolean)
        .join('; ') || 'none',
    ],
  ];
  if (r.store?.persisted === false) {
    rows.push([
      'state',
      `not persisted: ${r.store.lastError ?? 'unknown error'} (the daemon keeps its token in memory and saves it once the disk takes it)`,
    ]);
  }
  // The daemon's status.json quotes the cloud (lastError, close reasons): each row printable.
  return rows.map(([k, v]) => `${`${k}:`.padEnd(12)}${printable(v)}\n`).join('');
}

const KEY_STATES: Readonly<Record<KeyState, string>> = {
  active: 'active',
  pending: 'pending: read this keyId to the vendor, who accepts it',
  rejected: 'rejected by the vendor',
  revoked: 'revoked',
  conflict: 'refused: the broker holds this device under another key',
};

function keyLine(keyId: string, state: KeyState | undefined): string {
  return `keyId ${keyId}${state === undefined ? '' : ` (${KEY_STATES[state]})`}`;
}

function identityNote(r: StatusReport): string {
  if (r.identity.kind === 'vendor' && r.identity.mode === 'broker')
    return ' (no botId yet: the daemon enrolls this device key with the broker)';
  if (r.identity.kind === 'vendor') return ' (no botId yet: the daemon registers this device, or run botlink provision)';
  return r.identity.provisioned ? ' (provisioned)' : '';
}

function daemonLine(r: StatusReport, wallNow: number): string {
  if (r.daemon.running) {
    return `running (pid ${r.daemon.pid})${r.source === 'status-file' ? `, status updated ${formatAgo(wallNow - r.updatedAt)}` : ', starting'}`;
  }
  const last = r.daemon.lastStatus;
  if (!last) return 'not running';
  const how = last.linkState === 'stopped' ? 'it stopped cleanly' : `link ${last.linkState}: it did not stop cleanly, killed or crashed`;
  return `not running (last status from pid ${last.pid} ${formatAgo(wallNow - last.updatedAt)}, ${how})`;
}

function clockLine(r: StatusReport): string {
  const { verdict = r.clock.trusted ? 'synced' : 'unknown', source, offsetMs } = r.clock;
  const from = source === 'none' ? 'no time source' : `source ${source}`;
  const offset = offsetMs === null ? 'offset to the service not measured' : `${formatOffset(offsetMs)} from the service`;
  const trust = r.clock.trusted
    ? 'trusted for signing'
    : r.source === 'status-file'
      ? 'no server time sample yet (the daemon takes one before it signs)'
      : "not trusted: the daemon signs with the service's time";
  return `${verdict} (${from}), ${offset}, ${trust}`;
}

function linkLine(r: StatusReport, wallNow: number): string {
  const since = r.link.since === null ? '' : ` since ${formatTime(r.link.since)} (for ${formatDuration(wallNow - r.link.since)})`;
  const reconnects = `${r.link.reconnects} reconnect${r.link.reconnects === 1 ? '' : 's'}`;
  const causes = Object.entries(r.link.reconnectsByCause ?? {}).map(([cause, n]) => `${cause} ${n}`);
  return `${r.link.state}${since}, ${reconnects}${causes.length ? ` (${causes.join(', ')})` : ''}`;
}
