import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { metricFamilies } from '../../../src/agent/daemon/metrics.js';
import { renderMetrics } from '../../../src/exposition.js';
import { ConversationClient, isEvent } from '../../helpers/conversation-client.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { waitFor } from '../../helpers/wait-for.js';

/**
 * GET /v1/metrics and metricsFile (DESIGN §3.2, §3.5), read back by an independent parser: the
 * Prometheus project's own Python client (text_string_to_metric_families), which refuses malformed text.
 */

const { cleanups, service, device, daemon, tempDir } = useHarness();

interface Parsed {
  name: string;
  type: string;
  help: string;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

const PARSE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})
print(json.dumps(out))
`;

/** The text as Prometheus's parser reads it; throws with the parser's complaint on anything malformed. */
function parse(text: string): Parsed[] {
  // Debian's package, whichever python3 comes first on PATH (a pyenv one does not look in dist-packages).
  const packages = dirname(dirname(requireTool('prometheus_client')));
  const r = spawnSync(requireTool('python3'), ['-c', PARSE], {
    input: text,
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: packages },
  });
  if (r.status !== 0) throw new Error(`the Prometheus parser refused the text: ${r.stderr}\n${text}`);
  return JSON.parse(r.stdout) as Parsed[];
}

/** The value of one sample: the family's sample named `sample` with these labels. */
function sampleValue(families: Parsed[], sample: string, labels: Record<string, string> = {}): number | undefined {
  for (const f of families)
    for (const s of f.samples) if (s.name === sample && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return s.value;
  return undefined;
}

function get(socket: string, path: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    request({ socketPath: socket, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    })
      .on('error', reject)
      .end();
  });
}

describe('metrics', () => {
  it('GET /v1/metrics: the text format 0.0.4, botlink_* with HELP and TYPE, counters that move as the daemon works', async () => {
    const svc = await service(DAEMON_SEED);
    const metricsFile = join(tempDir('metrics-'), 'botlink.prom');
    const d = device(svc, { botId: 'bot-1', metricsFile });
    daemon(d);
    await d.waitForLink('connected');
    await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
    const socket = join(d.runtimeDir, 'botlink.sock');

    const first = await get(socket, '/v1/metrics');
    expect(first.status).toBe(200);
    expect(first.type).toBe('text/plain; version=0.0.4; charset=utf-8');
    const before = parse(first.body);
    for (const f of before) expect(f.name).toMatch(/^botlink_/);
    expect(first.body.match(/^# HELP /gm)?.length).toBe(before.length);
    expect(first.body.match(/^# TYPE /gm)?.length).toBe(before.length);
    expect(sampleValue(before, 'botlink_link_state', { state: 'connected' })).toBe(1);
    expect(sampleValue(before, 'botlink_link_state', { state: 'backoff' })).toBe(0);
    expect(sampleValue(before, 'botlink_token_renewals_total', { kind: 'signed' })).toBe(1);
    expect(sampleValue(before, 'botlink_token_access_seconds_left')).toBeGreaterThan(0);
    expect(sampleValue(before, 'botlink_store_persisted')).toBe(1);
    expect(sampleValue(before, 'botlink_relay_attaches_total')).toBe(0);

    // An observer beside the app: counted in status.json and the metrics, fed every cloud frame.
    const observer = new WebSocket(`ws+unix://${socket}:/v1/observe`);
    cleanups.push(() => observer.terminate());
    await new Promise((resolve, reject) => {
      observer.once('message', resolve);
      observer.once('error', reject);
    });
    expect(d.status()?.relay.observers).toBe(1);

    // A round through the relay, a drop and the reconnect, a request that is no route.
    const app = await ConversationClient.local(socket);
    cleanups.push(() => app.terminate());
    app.send({
      mid: 'cfg',
      contentType: 'EVENT',
      content: { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: { binary: false } } },
    });
    await app.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'), 0, 'the config acknowledged');
    const from = app.frames.length;
    app.send({ mid: 'ask', contentType: 'TEXT', content: { input: 'count me' } });
    await app.round(from);
    app.ws.close();
    await app.closed;
    svc.faults.dropAllSockets();
    await waitFor(() => (d.status()?.link.reconnects ?? 0) > 0 && d.status()?.link.state === 'connected', 15_000, 'reconnected');
    expect((await get(socket, '/no/such/path')).status).toBe(404);

    const after = parse((await get(socket, '/v1/metrics')).body);
    expect(sampleValue(after, 'botlink_relay_attaches_total')).toBe(1);
    expect(sampleValue(after, 'botlink_relay_frames_total', { direction: 'up' })).toBe(2);
    expect(sampleValue(after, 'botlink_relay_frames_total', { direction: 'down' })).toBeGreaterThan(3);
    expect(sampleValue(after, 'botlink_relay_bytes_total', { direction: 'up' })).toBeGreaterThan(100);
    expect(sampleValue(after, 'botlink_relay_observers')).toBe(1);
    expect(sampleValue(after, 'botlink_relay_observer_attaches_total')).toBe(1);
    expect(sampleValue(after, 'botlink_relay_observer_frames_total')).toBeGreaterThan(3);
    expect(sampleValue(after, 'botlink_relay_observers_closed_total')).toBe(0);
    // One reconnect, under the cause the link saw (a close, or a reset: the service cuts the socket).
    const reconnects = after.find((f) => f.name === 'botlink_link_reconnects')!.samples;
    expect(reconnects).toEqual([
      { name: 'botlink_link_reconnects_total', labels: { cause: expect.stringMatching(/^(closed|network)$/) }, value: 1 },
    ]);
    expect(sampleValue(after, 'botlink_local_requests_total', { path: '/v1/metrics', status: '200' })).toBe(1);
    expect(sampleValue(after, 'botlink_local_requests_total', { path: 'other', status: '404' })).toBe(1);
    expect(sampleValue(after, 'botlink_local_connections')).toBeGreaterThanOrEqual(1);

    // metricsFile: the same text, written at start (and every 60 s), parsed the same way.
    const file = parse(readFileSync(metricsFile, 'utf8'));
    expect(file.map((f) => f.name)).toEqual(before.map((f) => f.name));
  });

  it('escapes label values and help text as the format says, so any cause or code parses', () => {
    const text = renderMetrics([
      {
        name: 'botlink_test_total',
        type: 'counter',
        help: 'a back\\slash and a\nnew line',
        samples: [[{ code: 'quote " back \\ line \n end' }, 3]],
      },
    ]);
    const [family] = parse(text);
    expect(family).toMatchObject({ name: 'botlink_test', type: 'counter', help: 'a back\\slash and a\nnew line' });
    expect(family!.samples[0]).toEqual({ name: 'botlink_test_total', labels: { code: 'quote " back \\ line \n end' }, value: 3 });
  });

  it('every family of a scrape before any token is held still parses (no token: no seconds left)', () => {
    const families = metricFamilies({
      status: {
        pid: 1,
        updatedAt: 0,
        identity: { kind: 'bot', id: 'b' },
        clock: { trusted: false, source: 'none', offsetMs: null },
        token: { accessExpiresAt: null, refreshExpiresAt: null },
        link: { state: 'connecting', since: 0, reconnects: 0, reconnectsByCause: {}, lastError: null },
        relay: { attached: false, framesUp: 0, framesDown: 0, dropped: 0, observers: 0 },
      },
      traffic: { attaches: 0, bytesUp: 0, bytesDown: 0, observers: { attaches: 0, frames: 0, bytes: 0, slow: 0, refused: 0 } },
      tokens: { renewals: {}, failures: { ERR_NETWORK: 2 } },
      local: { requests: [], open: 0, refused: 0 },
      now: 0,
    });
    const parsed = parse(renderMetrics(families));
    expect(parsed.map((f) => f.name)).toContain('botlink_token_access_seconds_left');
    expect(sampleValue(parsed, 'botlink_token_failures_total', { code: 'ERR_NETWORK' })).toBe(2);
    expect(sampleValue(parsed, 'botlink_token_access_seconds_left')).toBeUndefined();
  });
});
