/** The admin API's reading routes (DESIGN §3.8): me, summary, devices (a page, one by botId, one key) and the audit. */
import { type AuditItem, DEVICE_STATES } from '../store/admin-types.js';
import { type AdminContext, type AdminRequest, type AdminRoute, ok } from './context.js';
import { notFound } from './errors.js';
import { QueryReader } from './input.js';
import { deviceItem } from './items.js';

const TOP_VERSIONS = 20;
const EVENTS_OF_DEVICE = 50;
const HOUR_MS = 3600_000;

const BOT_ID = '(?<botId>[A-Za-z0-9._:@-]{1,128})';
const KEY_ID = '(?<keyId>[0-9a-f]{32})';

const me: AdminRoute = {
  method: 'GET',
  path: /^\/me$/,
  role: 'viewer',
  async handle(_ctx, req) {
    new QueryReader(req.query, []);
    return ok({ name: req.caller.name, role: req.caller.role, expiresAt: req.caller.expiresAt });
  },
};

/** Counts the store keeps (no scan): devices by state and version, the last hour's tokens and refusals by minute. */
const summary: AdminRoute = {
  method: 'GET',
  path: /^\/summary$/,
  role: 'viewer',
  async handle(ctx, req) {
    new QueryReader(req.query, []);
    const devices: Record<string, number> = Object.fromEntries(DEVICE_STATES.map((s) => [s, 0]));
    const versions: [string, number][] = [];
    for (const c of await ctx.store.admin.keptCounts()) {
      if (c.kind === 'state') devices[c.name] = c.n;
      else if (c.kind === 'version' && c.n > 0) versions.push([c.name === '' ? 'unknown' : c.name, c.n]);
    }
    versions.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const top = Object.fromEntries(versions.slice(0, TOP_VERSIONS));
    const rest = versions.slice(TOP_VERSIONS).reduce((sum, [, n]) => sum + n, 0);
    if (rest > 0) top['other'] = rest;
    let tokens = 0;
    const refusals: Record<string, number> = {};
    for (const row of await ctx.store.admin.auditCountsSince(ctx.clock.wallNow() - HOUR_MS)) {
      if (row.action === 'token') tokens += row.n;
      else refusals[row.outcome] = (refusals[row.outcome] ?? 0) + row.n;
    }
    return ok({ devices, versions: top, lastHour: { tokens, refusals } });
  },
};

const devices: AdminRoute = {
  method: 'GET',
  path: /^\/devices$/,
  role: 'viewer',
  async handle(ctx, req) {
    const query = new QueryReader(req.query, ['state', 'vendorId', 'q', 'cursor', 'limit']);
    const filters = { state: query.oneOf('state', DEVICE_STATES), vendorId: query.identity('vendorId', 'vendorId'), q: query.prefix('q') };
    const { rows, next } = await ctx.cursors.page(
      'devices',
      filters,
      query.page(),
      (key, limit) =>
        ctx.store.admin.pageDevices(
          filters,
          key === null ? null : { vendorId: String(key[0]), deviceId: String(key[1]), keyId: String(key[2]) },
          limit,
        ),
      (last) => [last.vendorId, last.deviceId, last.keyId],
    );
    return ok({ devices: rows.map(deviceItem), next });
  },
};

async function eventsOf(ctx: AdminContext, filter: { botId: string } | { keyId: string }): Promise<ReturnType<typeof auditItem>[]> {
  return (await ctx.store.admin.pageAudit(filter, null, EVENTS_OF_DEVICE)).map(auditItem);
}

const device: AdminRoute = {
  method: 'GET',
  path: new RegExp(`^/devices/${BOT_ID}$`),
  role: 'viewer',
  async handle(ctx, req) {
    new QueryReader(req.query, []);
    const botId = req.params['botId'] ?? '';
    const keys = await ctx.store.admin.keysOfBot(botId);
    const newest = keys[0] && (await ctx.store.admin.deviceItemOfKey(keys[0].keyId));
    if (!newest) throw notFound(`no device with botId ${botId}`);
    return ok({ ...deviceItem(newest), keys, events: await eventsOf(ctx, { botId }) });
  },
};

/** Any key: its row, a pre-authorised key's, or a tombstone's (the device's fields gone with the row). */
const key: AdminRoute = {
  method: 'GET',
  path: new RegExp(`^/keys/${KEY_ID}$`),
  role: 'viewer',
  async handle(ctx, req: AdminRequest) {
    new QueryReader(req.query, []);
    const keyId = req.params['keyId'] ?? '';
    const row = await ctx.store.admin.deviceItemOfKey(keyId);
    const events = await eventsOf(ctx, { keyId });
    if (row) return ok({ ...deviceItem(row), events });
    const known = await ctx.store.findKey(keyId);
    if (!known) throw notFound(`no key ${keyId} is known to this broker`);
    const tomb = { botId: null, deviceId: null, vendorId: null, name: null, keyId, lastSeen: null, agentVersion: null, lastRefusal: null };
    return ok({ ...tomb, state: known.state, events });
  },
};

export function auditItem(e: AuditItem): Omit<AuditItem, 'id'> {
  const { id: _id, ...item } = e;
  return item;
}

const audit: AdminRoute = {
  method: 'GET',
  path: /^\/audit$/,
  role: 'viewer',
  async handle(ctx, req) {
    const query = new QueryReader(req.query, ['botId', 'keyId', 'action', 'cursor', 'limit']);
    const filters = { botId: query.prefix('botId'), keyId: query.prefix('keyId'), action: query.prefix('action') };
    const { rows, next } = await ctx.cursors.page(
      'audit',
      filters,
      query.page(),
      (key, limit) => ctx.store.admin.pageAudit(filters, key === null ? null : { at: Number(key[0]), id: Number(key[1]) }, limit),
      (last) => [last.at, last.id],
    );
    return ok({ events: rows.map(auditItem), next });
  },
};

export const FLEET_ROUTES: readonly AdminRoute[] = [me, summary, devices, device, key, audit];
