/** GET /metrics of the broker (DESIGN §3.7): names botlink_broker_*, labels from closed sets only — no botId, key, code or token. */
import { type Family, renderMetrics } from '../exposition.js';
import type { GateStats } from './cloud-gate.js';
import type { ConnectionStats } from './connections.js';
import { isRefusalCode, REFUSAL_STATUS, type RefusalCode } from '../protocol/broker.js';
import type { AuditStats } from './audit/trail.js';
import { LIMIT_KINDS, type LimitKind } from './auth/limits.js';
import type { CodeKind, DeviceCounts } from './store/types.js';

export const ROUTE_NAMES = ['enroll', 'token', 'rotate', 'check', 'health', 'metrics', 'other'] as const;
export type RouteName = (typeof ROUTE_NAMES)[number];
type Outcome = 'ok' | RefusalCode | 'abandoned' | 'error';
const SOURCES = ['cache', 'refresh', 'sign'] as const;
const KINDS: readonly CodeKind[] = ['plain', 'adopt', 'replace'];
const REFUSAL_CODES = Object.keys(REFUSAL_STATUS) as RefusalCode[];
const DEVICE_STATES: readonly (keyof DeviceCounts)[] = ['active', 'revoked', 'preauthorized', 'pending', 'rejected'];

/** What a scrape reads of the broker's parts, besides its own counters. */
export interface MetricsSources {
  gate: GateStats;
  store: string;
  connections: ConnectionStats;
  audit: AuditStats;
  /** Undefined while the store has never answered the count. */
  devices: DeviceCounts | undefined;
}

export class BrokerMetrics {
  readonly #requests = new Map<string, number>();
  readonly #issued = new Map<string, number>();
  readonly #enrolled = new Map<string, number>();
  readonly #limited = new Map<string, number>();
  readonly #refused = new Map<RefusalCode, number>();

  request(route: RouteName, outcome: Outcome): void {
    const key = `${route}\u0000${outcome}`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
    if (isRefusalCode(outcome)) this.#refused.set(outcome, (this.#refused.get(outcome) ?? 0) + 1);
  }

  issued(source: (typeof SOURCES)[number]): void {
    this.#issued.set(source, (this.#issued.get(source) ?? 0) + 1);
  }

  enrolled(kind: CodeKind): void {
    this.#enrolled.set(kind, (this.#enrolled.get(kind) ?? 0) + 1);
  }

  rateLimited(limit: LimitKind): void {
    this.#limited.set(limit, (this.#limited.get(limit) ?? 0) + 1);
  }

  text({ gate, store, connections, audit, devices }: MetricsSources): string {
    const families: Family[] = [
      {
        name: 'botlink_broker_requests_total',
        type: 'counter',
        help: 'Requests, by route and outcome: ok, the refusal code, abandoned (the client went before its request arrived whole), or error.',
        samples: [...this.#requests].sort().map(([k, n]) => {
          const [route = '', outcome = ''] = k.split('\u0000');
          return [{ route, outcome }, n] as const;
        }),
      },
      {
        name: 'botlink_broker_refusals_total',
        type: 'counter',
        help: 'Requests refused, by code (every route; signed or not).',
        samples: REFUSAL_CODES.map((c) => [{ code: c }, this.#refused.get(c) ?? 0] as const),
      },
      {
        name: 'botlink_broker_devices',
        type: 'gauge',
        help: "Devices by state, as the store counted them at most 30 s ago ('broker devices' lines).",
        samples: devices === undefined ? [] : DEVICE_STATES.map((s) => [{ state: s }, devices[s]] as const),
      },
      {
        name: 'botlink_broker_audit_rows_queued',
        type: 'gauge',
        help: 'Audit rows waiting for the store in this replica.',
        samples: [[{}, audit.queued]],
      },
      {
        name: 'botlink_broker_audit_rows_dropped_total',
        type: 'counter',
        help: 'Audit rows this replica dropped because too many waited for the store (their log lines were written).',
        samples: [[{}, audit.dropped]],
      },
      {
        name: 'botlink_broker_tokens_issued_total',
        type: 'counter',
        help: 'Access tokens handed to devices, by where they came from.',
        samples: SOURCES.map((s) => [{ source: s }, this.#issued.get(s) ?? 0] as const),
      },
      {
        name: 'botlink_broker_enrollments_total',
        type: 'counter',
        help: 'Devices enrolled, by the kind of admission (pre-authorised ones count as plain).',
        samples: KINDS.map((k) => [{ kind: k }, this.#enrolled.get(k) ?? 0] as const),
      },
      {
        name: 'botlink_broker_rate_limited_total',
        type: 'counter',
        help: 'Requests refused by a rate limit, by limit (bot: tokens per botId, check: checks per botId, rotate: rotations per botId, code: enroll per code, addr: unknown codes per address).',
        samples: LIMIT_KINDS.map((l) => [{ limit: l }, this.#limited.get(l) ?? 0] as const),
      },
      {
        name: 'botlink_broker_cloud_in_flight',
        type: 'gauge',
        help: 'Cloud calls in flight in this replica.',
        samples: [[{}, gate.inFlight]],
      },
      {
        name: 'botlink_broker_cloud_queued',
        type: 'gauge',
        help: 'Cloud calls waiting for a slot in this replica.',
        samples: [[{}, gate.queued]],
      },
      {
        name: 'botlink_broker_cloud_in_flight_peak',
        type: 'gauge',
        help: 'The most cloud calls this replica has had in flight at once.',
        samples: [[{}, gate.peakInFlight]],
      },
      { name: 'botlink_broker_store_info', type: 'gauge', help: 'The store this replica uses.', samples: [[{ store }, 1]] },
      {
        name: 'botlink_broker_connections_open',
        type: 'gauge',
        help: 'Connections open on this replica.',
        samples: [[{}, connections.open]],
      },
      {
        name: 'botlink_broker_connections_closed_total',
        type: 'counter',
        help: 'Connections this replica closed, by why: refused (its source held its share, or all were at work), evicted (room made at connectionsMax), idle, timeout (408).',
        samples: [
          [{ reason: 'refused' }, connections.refused],
          [{ reason: 'evicted' }, connections.evicted],
          [{ reason: 'idle' }, connections.idleClosed],
          [{ reason: 'timeout' }, connections.timedOut],
        ],
      },
    ];
    return renderMetrics(families);
  }
}
