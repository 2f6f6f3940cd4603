// The admin API at 100,000 devices (DESIGN §3.8, issue 34 item 6), on PostgreSQL: a broker process's admin
// listener (HTTP, an operator's Bearer token, re-read from the store on every request as §3.8 says) against a
// floor — node-postgres in this process over one connection, running the very statements the store issues
// (admin-statements.ts: the devices page's keyset query, the kept counts and the last hour's minutes), behind a
// minimal node:http server, so it pays HTTP and JSON too but no authentication, no cursor MAC and no item mapping.
//   devices pages of 100 walked by cursor (one after another, from a random depth) and fetched at random depths
//   (cursors gathered by a first walk of the whole list), with and without state=active; the summary.
// Each figure's cells alternate broker and floor round by round; rates are medians over rounds, latencies pooled.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { pino } from 'pino';
import { Pool } from 'undici';
import { createAdminToken } from '../../src/broker/admin/admin-tokens.js';
import { AuditTrail } from '../../src/broker/audit/trail.js';
import { brokerKeys, readTokenKey } from '../../src/broker/keys.js';
import { AUDIT_MINUTES_SINCE, devicePageQuery, KEPT_COUNTS } from '../../src/broker/store/admin-statements.js';
import { openStore } from '../../src/broker/store/open.js';
import { systemClock } from '../../src/clock.js';
import type { PostgresServer } from '../lib/postgres-server.js';
import { median, quantile } from '../lib/stats.js';
import { fleetFill, fleetShape } from './admin-fleet.js';
import type { BrokerRig } from './broker-rig.js';
import { spreads, times, verdict } from './report.js';

/** Each admin figure's rate vs the floor's (issue 34 item 6). */
export const ADMIN_GOAL = 0.5;
const PAGE = 100;
/** Pages walked one after another in a walk cell. */
const WALK_PAGES = 40;
/** Requests in a random-depth or summary cell. */
const CELL_REQUESTS = 200;
const HOUR_MS = 3600_000;

export interface AdminOptions {
  devices: number;
  rounds: number;
  /** Requests in flight in the random-depth and summary cells. */
  concurrency: number;
}

/** One figure: each round's rate (requests/s) and every request's latency (ms), broker and floor. */
export interface AdminFigure {
  name: string;
  broker: { rates: number[]; ms: number[] };
  floor: { rates: number[]; ms: number[] };
}

export interface AdminMeasured {
  devices: number;
  fillS: number;
  lines: number;
  figures: AdminFigure[];
}

interface Target {
  name: string;
  pool: Pool;
  headers: Record<string, string>;
}

interface Cell {
  rate: number;
  ms: number[];
}

async function get(t: Target, path: string): Promise<{ ms: number; json: Record<string, unknown> }> {
  const started = performance.now();
  const res = await t.pool.request({ path, method: 'GET', headers: t.headers });
  const text = await res.body.text();
  const ms = performance.now() - started;
  if (res.statusCode !== 200) throw new Error(`${t.name} GET ${path}: ${res.statusCode} ${text.slice(0, 200)}`);
  return { ms, json: JSON.parse(text) as Record<string, unknown> };
}

const pagePath = (filter: string, cursor: string): string =>
  `/admin/v1/devices?${filter}limit=${PAGE}${cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;

/** Every page's cursor ('' the first's), by a walk of the whole list; and how many lines it held. */
async function cursorsOf(t: Target, filter: string): Promise<{ cursors: string[]; lines: number }> {
  const cursors = [''];
  let lines = 0;
  for (;;) {
    const { json } = await get(t, pagePath(filter, cursors.at(-1) ?? ''));
    lines += (json['devices'] as unknown[]).length;
    if (json['next'] === null) return { cursors, lines };
    cursors.push(String(json['next']));
  }
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)] as T;

/** WALK_PAGES pages one after another, each from the cursor of the one before, from a random depth. */
async function walkCell(t: Target, filter: string, cursors: readonly string[]): Promise<Cell> {
  const ms: number[] = [];
  let cursor = pick(cursors.slice(0, Math.max(1, cursors.length - WALK_PAGES)));
  const started = performance.now();
  for (let i = 0; i < WALK_PAGES; i++) {
    const r = await get(t, pagePath(filter, cursor));
    ms.push(r.ms);
    if (r.json['next'] === null) break;
    cursor = String(r.json['next']);
  }
  return { rate: (ms.length * 1000) / (performance.now() - started), ms };
}

/** CELL_REQUESTS requests of `path()`, `concurrency` in flight. */
async function burstCell(t: Target, path: () => string, concurrency: number): Promise<Cell> {
  const ms: number[] = [];
  let left = CELL_REQUESTS;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) ms.push((await get(t, path())).ms);
    }),
  );
  return { rate: (ms.length * 1000) / (performance.now() - started), ms };
}

/**
 * The floor: the devices page's statement (devicePageQuery, sent unnamed as the store sends it: planned for its
 * values) and the summary's two reads, over one connection, the rows as JSON; its cursor the last line's key in
 * base64url, unsigned.
 */
async function startFloor(url: string): Promise<{ url: string; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // One connection answers one statement at a time: requests in flight wait their turn, as on any single connection.
  let turn: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const mine = turn.then(fn, fn);
    turn = mine.catch(() => undefined);
    return mine;
  };
  const answer = async (path: string): Promise<unknown> => {
    const u = new URL(path, 'http://floor');
    if (u.pathname === '/admin/v1/summary') {
      const devices = (await client.query(KEPT_COUNTS)).rows;
      const minute = Math.floor((Date.now() - HOUR_MS) / 60_000) * 60_000;
      return { devices, lastHour: (await client.query(AUDIT_MINUTES_SINCE, [minute])).rows };
    }
    const cursor = u.searchParams.get('cursor');
    const after =
      cursor === null
        ? null
        : (JSON.parse(Buffer.from(cursor, 'base64url').toString()) as { vendorId: string; deviceId: string; keyId: string });
    const limit = Number(u.searchParams.get('limit'));
    const q = devicePageQuery({ state: u.searchParams.get('state') ?? undefined, after, limit }, '"C"');
    const rows = (await client.query<{ vendorId: string; deviceId: string; keyId: string }>(q.sql, q.params)).rows;
    const last = rows.length === limit ? rows.at(-1) : undefined;
    const key = last && { vendorId: last.vendorId, deviceId: last.deviceId, keyId: last.keyId };
    return { devices: rows, next: key ? Buffer.from(JSON.stringify(key)).toString('base64url') : null };
  };
  const server = createServer((req, res) => {
    serial(() => answer(req.url ?? '/')).then(
      (body) => {
        const text = JSON.stringify(body);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
      (err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await client.end();
    },
  };
}

/** Fills a fresh store with the fleet through the product's own schema, and makes an operator's admin token. */
async function prepare(rig: BrokerRig, pgServer: PostgresServer, url: string, n: number): Promise<{ token: string; fillS: number }> {
  const started = performance.now();
  const store = await openStore(url, { clock: systemClock });
  try {
    for (const sql of fleetFill(n)) await pgServer.query(url, sql);
    const audit = new AuditTrail({ store, log: pino({ level: 'silent' }), clock: systemClock });
    const keys = brokerKeys(readTokenKey(rig.tokenKeyFile));
    const made = await createAdminToken(store, keys, { name: 'bench', role: 'operator', ttlS: 3600 }, Date.now(), {
      actor: 'bench',
      audit,
    });
    await audit.close();
    return { token: made.token, fillS: (performance.now() - started) / 1000 };
  } finally {
    await store.close();
  }
}

export async function measureAdmin(
  rig: BrokerRig,
  pgServer: PostgresServer,
  o: AdminOptions,
  progress: (what: string) => void,
): Promise<AdminMeasured> {
  const url = await pgServer.freshDatabase();
  progress(`admin: filling PostgreSQL with ${o.devices.toLocaleString('en-US')} devices (bulk INSERT … SELECT through the store's schema)`);
  const { token, fillS } = await prepare(rig, pgServer, url, o.devices);
  // The broker never calls the cloud here: nothing enrolls, and the admin reads need none.
  const broker = await rig.broker({ name: 'admin', cloud: 'http://127.0.0.1:9', store: url, extra: { adminListen: '127.0.0.1:0' } });
  const floor = await startFloor(url);
  const targets = {
    broker: {
      name: 'broker',
      pool: new Pool(broker.adminUrl ?? '', { connections: o.concurrency }),
      headers: { authorization: `Bearer ${token}` },
    },
    floor: { name: 'floor', pool: new Pool(floor.url, { connections: o.concurrency }), headers: {} },
  };
  try {
    const shape = fleetShape(o.devices);
    const summary = (await get(targets.broker, '/admin/v1/summary')).json['devices'] as Record<string, number>;
    if (Object.entries(shape).some(([state, n]) => summary[state] !== n))
      throw new Error(`the summary counts ${JSON.stringify(summary)}, the fleet holds ${JSON.stringify(shape)}`);
    progress('admin: every page walked once on both sides, for the cursors of the random depths');
    const filters = ['', 'state=active&'];
    const cursors = { broker: new Map<string, string[]>(), floor: new Map<string, string[]>() };
    let lines = 0;
    for (const filter of filters)
      for (const side of ['broker', 'floor'] as const) {
        const walked = await cursorsOf(targets[side], filter);
        cursors[side].set(filter, walked.cursors);
        if (side === 'broker' && filter === '') lines = walked.lines;
      }
    if (lines !== o.devices) throw new Error(`the devices pages listed ${lines} lines of ${o.devices} devices`);
    const cells: { name: string; run(side: 'broker' | 'floor'): Promise<Cell> }[] = [
      ...filters.flatMap((filter) => {
        const label = filter === '' ? '' : `, ${filter.slice(0, -1)}`;
        const of = (side: 'broker' | 'floor'): string[] => cursors[side].get(filter) ?? [''];
        return [
          { name: `devices page walked by cursor${label}`, run: (side: 'broker' | 'floor') => walkCell(targets[side], filter, of(side)) },
          {
            name: `devices page at random depths${label}`,
            run: (side: 'broker' | 'floor') => burstCell(targets[side], () => pagePath(filter, pick(of(side))), o.concurrency),
          },
        ];
      }),
      { name: 'summary', run: (side: 'broker' | 'floor') => burstCell(targets[side], () => '/admin/v1/summary', o.concurrency) },
    ];
    const figures: AdminFigure[] = cells.map((c) => ({ name: c.name, broker: { rates: [], ms: [] }, floor: { rates: [], ms: [] } }));
    progress(`admin: ${o.rounds} rounds, broker and floor alternating`);
    for (let round = 0; round < o.rounds; round++)
      for (const [i, c] of cells.entries()) {
        const order = round % 2 === 0 ? (['broker', 'floor'] as const) : (['floor', 'broker'] as const);
        for (const side of order) {
          const cell = await c.run(side);
          figures[i]![side].rates.push(cell.rate);
          figures[i]![side].ms.push(...cell.ms);
        }
      }
    return { devices: o.devices, fillS, lines, figures };
  } finally {
    await Promise.all([targets.broker.pool.close(), targets.floor.pool.close()]);
    await floor.close();
    await broker.stop();
  }
}

const rateOf = (s: { rates: number[]; ms: number[] }): string =>
  `${median(s.rates).toFixed(0)}/s (p50 ${quantile(s.ms, 0.5).toFixed(1)}, p99 ${quantile(s.ms, 0.99).toFixed(1)} ms)`;

/** The table's rows: each figure's rate against the floor's, goal ≥ ADMIN_GOAL×. */
export function adminRows(m: AdminMeasured, concurrency: number): string[][] {
  const at = `${m.devices.toLocaleString('en-US')} devices, PostgreSQL`;
  return m.figures.map((f) => {
    const ratio = median(f.broker.rates) / median(f.floor.rates);
    const c = f.name.includes('walked') ? 'c=1' : `c=${concurrency}`;
    return [
      `admin: ${f.name}, ${c}, ${at}`,
      rateOf(f.broker),
      rateOf(f.floor),
      times(ratio),
      `≥ ${ADMIN_GOAL}×`,
      verdict(ratio >= ADMIN_GOAL),
      spreads(f.broker.rates, f.floor.rates),
      '',
    ];
  });
}
