/**
 * GET /v1/metrics and metricsFile (DESIGN §3.2, §3.5): the daemon's counters and gauges in the
 * Prometheus text format 0.0.4, written by hand: loading and rendering a scrape with prom-client took
 * 211 ms and +13.5 MiB of RSS, this module alone 30 ms and +2.8 MiB (scripts/bench/metrics.ts), for
 * what is one string built from numbers the daemon keeps anyway.
 */

import type { LinkState } from '../link/supervisor.js';
import type { RelayTraffic } from '../local/relay-port.js';
import type { StatusDoc } from './status.js';
import { type Family, type Labels, renderMetrics } from '../../exposition.js';

export { METRICS_CONTENT_TYPE } from '../../exposition.js';

const LINK_STATES: readonly LinkState[] = ['connecting', 'connected', 'backoff', 'displaced', 'stopped'];

/** Everything a scrape shows, read at the moment of the scrape. */
export interface MetricsInput {
  status: StatusDoc;
  traffic: RelayTraffic;
  /** Token renewals by kind (signed, refreshed) and failures by error code since start. */
  tokens: { renewals: Record<string, number>; failures: Record<string, number> };
  /** Local API requests by path and HTTP status, open connections, those refused at the cap. */
  local: { requests: readonly { path: string; status: number; count: number }[]; open: number; refused: number };
  /** Wall-clock ms now. */
  now: number;
}

const one = (value: number): [Labels, number][] => [[{}, value]];
const byLabel = (label: string, counts: Record<string, number>): [Labels, number][] =>
  Object.entries(counts)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([v, n]) => [{ [label]: v }, n]);

/** The families of a scrape, in a fixed order. */
export function metricFamilies(m: MetricsInput): Family[] {
  const { status, traffic } = m;
  const serverNow = m.now + (status.clock.offsetMs ?? 0);
  const expiresAt = status.token.accessExpiresAt;
  return [
    {
      name: 'botlink_link_state',
      type: 'gauge',
      help: 'The cloud link state: 1 for the current one, 0 for the others.',
      samples: LINK_STATES.map((s) => [{ state: s }, s === status.link.state ? 1 : 0]),
    },
    {
      name: 'botlink_link_reconnects_total',
      type: 'counter',
      help: 'Cloud WebSocket reconnects since start, by cause (app-params and app-reattach: caused by a local app).',
      samples: byLabel('cause', status.link.reconnectsByCause),
    },
    {
      name: 'botlink_token_renewals_total',
      type: 'counter',
      help: 'Access tokens obtained since start, by kind (signed: getToken, refreshed: refreshToken).',
      samples: byLabel('kind', m.tokens.renewals),
    },
    {
      name: 'botlink_token_failures_total',
      type: 'counter',
      help: 'Failed token renewals since start, by error code.',
      samples: byLabel('code', m.tokens.failures),
    },
    {
      name: 'botlink_token_access_seconds_left',
      type: 'gauge',
      help: 'Seconds of life the access token held has left, as the service counts time (absent: none held).',
      samples: expiresAt === null ? [] : one(Math.round((expiresAt - serverNow) / 1000)),
    },
    {
      name: 'botlink_clock_trusted',
      type: 'gauge',
      help: '1 when the clock is trusted for signing.',
      samples: one(status.clock.trusted ? 1 : 0),
    },
    {
      name: 'botlink_store_persisted',
      type: 'gauge',
      help: '1 when the token held is saved in stateDir (0: a full or read-only disk).',
      samples: one(status.store?.persisted === false ? 0 : 1),
    },
    {
      name: 'botlink_relay_attached',
      type: 'gauge',
      help: '1 while an app is attached to the relay.',
      samples: one(status.relay.attached ? 1 : 0),
    },
    {
      name: 'botlink_relay_attaches_total',
      type: 'counter',
      help: 'Apps attached to the relay since start.',
      samples: one(traffic.attaches),
    },
    {
      name: 'botlink_relay_frames_total',
      type: 'counter',
      help: 'Frames the relay carried, by direction (up: app to cloud).',
      samples: [
        [{ direction: 'up' }, status.relay.framesUp],
        [{ direction: 'down' }, status.relay.framesDown],
      ],
    },
    {
      name: 'botlink_relay_bytes_total',
      type: 'counter',
      help: 'Bytes of the frames the relay carried, by direction.',
      samples: [
        [{ direction: 'up' }, traffic.bytesUp],
        [{ direction: 'down' }, traffic.bytesDown],
      ],
    },
    {
      name: 'botlink_relay_dropped_total',
      type: 'counter',
      help: 'Frames dropped: app frames while the cloud socket was not open, cloud frames with no app.',
      samples: one(status.relay.dropped),
    },
    {
      name: 'botlink_relay_observers',
      type: 'gauge',
      help: 'Observers attached now (/v1/observe).',
      samples: one(status.relay.observers),
    },
    {
      name: 'botlink_relay_observer_attaches_total',
      type: 'counter',
      help: 'Observers attached since start.',
      samples: one(traffic.observers.attaches),
    },
    {
      name: 'botlink_relay_observer_frames_total',
      type: 'counter',
      help: 'Cloud frames sent to observers, one for each observer a frame reached.',
      samples: one(traffic.observers.frames),
    },
    {
      name: 'botlink_relay_observer_bytes_total',
      type: 'counter',
      help: 'Bytes of the frames sent to observers.',
      samples: one(traffic.observers.bytes),
    },
    {
      name: 'botlink_relay_observers_closed_total',
      type: 'counter',
      help: 'Observers closed with 1008 for leaving 1 MiB unread.',
      samples: one(traffic.observers.slow),
    },
    {
      name: 'botlink_relay_observers_refused_total',
      type: 'counter',
      help: 'Observers refused (429) because the most allowed were attached.',
      samples: one(traffic.observers.refused),
    },
    {
      name: 'botlink_local_requests_total',
      type: 'counter',
      help: 'Local API HTTP requests, by path and status.',
      samples: m.local.requests.map((r) => [{ path: r.path, status: String(r.status) }, r.count]),
    },
    { name: 'botlink_local_connections', type: 'gauge', help: 'Local API connections open now.', samples: one(m.local.open) },
    {
      name: 'botlink_local_connections_refused_total',
      type: 'counter',
      help: 'Local API connections refused at the localConnectionsMax cap.',
      samples: one(m.local.refused),
    },
  ];
}

/** The text format 0.0.4: HELP and TYPE before each family's samples, one sample a line, a final newline. */
export function metricsText(m: MetricsInput): string {
  return renderMetrics(metricFamilies(m));
}
