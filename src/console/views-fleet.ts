/** The fleet's views: Summary, Devices, a device's page (by botId, or a key's by keyId) and Audit. */
import { get, post, seg } from './api.js';
import { action, type App, confirmPanel, filters, pager } from './app.js';
import { field, fields, h, input, select, table, td, tdTime } from './dom.js';
import { apiPath, formatTime, pick, type Route, routeHash } from './logic.js';

interface DeviceItem {
  botId: string | null;
  deviceId: string | null;
  vendorId: string | null;
  name: string | null;
  keyId: string;
  state: string;
  lastSeen: number | null;
  agentVersion: string | null;
  lastRefusal: { code: string; at: number } | null;
}

interface AuditEvent {
  at: number;
  action: string;
  actor: string;
  vendorId: string | null;
  deviceId: string | null;
  botId: string | null;
  keyId: string | null;
  codeId: string | null;
  source: string | null;
  outcome: string;
}

interface Summary {
  devices: Record<string, number>;
  versions: Record<string, number>;
  lastHour: { tokens: number; refusals: Record<string, number> };
}

const counts = (label: string, head: string, of: Record<string, number>) =>
  table(
    label,
    [head, 'Count'],
    Object.entries(of).map(([k, n]) => h('tr', {}, td(k), td(n))),
  );

export async function summaryView(app: App): Promise<void> {
  const s = await get<Summary>('/summary');
  app.show(
    'Summary',
    h('h2', {}, 'Devices by state'),
    counts('Devices by state', 'State', s.devices),
    h('h2', {}, 'Agent versions'),
    counts('Agent versions', 'Version', s.versions),
    h('h2', {}, 'Last hour'),
    h('p', {}, `Tokens issued: ${s.lastHour.tokens}`),
    counts('Refusals in the last hour', 'Refusal', s.lastHour.refusals),
  );
}

/** A botId as a link to its device's page; none: a dash. */
function botLink(botId: string | null): HTMLElement | string {
  return botId === null ? '\u2014' : h('a', { href: routeHash('device', botId), class: 'mono' }, botId);
}

export async function devicesView(app: App, route: Route): Promise<void> {
  const q = route.query;
  const page = await get<{ devices: DeviceItem[]; next: string | null }>(
    apiPath('/devices', pick(q, ['state', 'vendorId', 'q', 'cursor'])),
  );
  const state = select(
    'state',
    [
      ['', 'any'],
      ['active', 'active'],
      ['revoked', 'revoked'],
      ['preauthorized', 'preauthorized'],
    ],
    q['state'] ?? '',
  );
  const vendor = input('vendorId', q['vendorId'] ?? '');
  const search = input('q', q['q'] ?? '', 'search');
  const rows = page.devices.map((d) =>
    h(
      'tr',
      {},
      h('td', {}, botLink(d.botId)),
      td(d.deviceId, true),
      td(d.vendorId),
      td(d.name),
      h('td', {}, h('a', { href: routeHash('key', d.keyId), class: 'mono' }, d.keyId)),
      td(d.state),
      tdTime(formatTime(d.lastSeen)),
      td(d.agentVersion),
      td(d.lastRefusal === null ? null : `${d.lastRefusal.code} at ${formatTime(d.lastRefusal.at)}`),
    ),
  );
  app.show(
    'Devices',
    filters(app, 'devices', [
      h('div', { class: 'row' }, field('State', state), field('Vendor', vendor), field('Search (botId or deviceId prefix)', search)),
      state,
      vendor,
      search,
    ]),
    table('Devices', ['botId', 'deviceId', 'vendorId', 'name', 'keyId', 'state', 'last seen', 'agent version', 'last refusal'], rows),
    pager('devices', q, page.next),
  );
}

function eventRows(events: readonly AuditEvent[]): HTMLTableRowElement[] {
  return events.map((e) =>
    h(
      'tr',
      {},
      tdTime(formatTime(e.at)),
      td(e.action),
      td(e.actor),
      td(e.vendorId),
      td(e.deviceId, true),
      h('td', {}, botLink(e.botId)),
      td(e.keyId, true),
      td(e.codeId, true),
      td(e.source),
      td(e.outcome),
    ),
  );
}
const EVENT_HEADERS = ['at', 'action', 'actor', 'vendorId', 'deviceId', 'botId', 'keyId', 'codeId', 'source', 'outcome'];

interface DevicePage extends DeviceItem {
  keys?: { keyId: string; state: string; createdAt: number; retiredAt: number | null }[];
  events: AuditEvent[];
}

/** A device's page (`#/device/<botId>`): its fields, keys and events, and the operator's Revoke and Reset limits. */
export async function deviceView(app: App, route: Route): Promise<void> {
  const id = route.id ?? '';
  const byBot = route.view === 'device';
  const d = await get<DevicePage>(byBot ? `/devices/${seg(id)}` : `/keys/${seg(id)}`);
  const actions = h('div', { class: 'actions' });
  const parts = [
    fields([
      ['botId', d.botId, true],
      ['deviceId', d.deviceId, true],
      ['vendorId', d.vendorId],
      ['name', d.name],
      ['keyId', d.keyId, true],
      ['state', d.state],
      ['last seen', formatTime(d.lastSeen)],
      ['agent version', d.agentVersion],
      ['last refusal', d.lastRefusal === null ? null : `${d.lastRefusal.code} at ${formatTime(d.lastRefusal.at)}`],
    ]),
    actions,
  ];
  const botId = d.botId;
  if (app.canAct && botId !== null) {
    // Revoke while a key is active (the API answers 409 when none is); Reset limits whatever the state.
    const live = (d.keys ?? []).some((k) => k.state === 'active');
    const revoke: HTMLButtonElement = h('button', { type: 'button', 'aria-expanded': 'false' }, 'Revoke');
    revoke.addEventListener('click', () => {
      const displace = input('displace', '', 'checkbox');
      displace.checked = true;
      const { panel, close } = confirmPanel(
        app,
        'Confirm revoke',
        revoke,
        [
          h('p', {}, 'Revoke every active key of botId ', h('span', { class: 'mono' }, botId), '? The device must enroll again.'),
          field('Displace: close the connection the device holds, now and when its last token ends', displace),
        ],
        async () => {
          const r = await post<{ revoked: number }>(`/devices/${seg(botId)}/revoke`, { displace: displace.checked });
          close();
          app.reload(`Revoked ${r.revoked} key(s) of ${botId}.`);
        },
      );
      actions.after(panel);
      displace.focus();
    });
    const reset = action(app, 'Reset limits', async () => {
      await post(`/devices/${seg(botId)}/reset-limits`);
      app.say(`The rate limits of ${botId} are reset.`);
    });
    actions.append(...(live ? [revoke] : []), reset);
  }
  if (d.keys)
    parts.push(
      h('h2', {}, 'Keys'),
      table(
        'Keys',
        ['keyId', 'state', 'created', 'retired'],
        d.keys.map((k) => h('tr', {}, td(k.keyId, true), td(k.state), tdTime(formatTime(k.createdAt)), tdTime(formatTime(k.retiredAt)))),
      ),
    );
  parts.push(h('h2', {}, 'Events'), table('Events', EVENT_HEADERS, eventRows(d.events), 'No events.'));
  app.show(byBot ? `Device ${id}` : `Key ${id}`, ...parts);
}

export async function auditView(app: App, route: Route): Promise<void> {
  const q = route.query;
  const page = await get<{ events: AuditEvent[]; next: string | null }>(apiPath('/audit', pick(q, ['botId', 'keyId', 'action', 'cursor'])));
  const botId = input('botId', q['botId'] ?? '');
  const keyId = input('keyId', q['keyId'] ?? '');
  const act = input('action', q['action'] ?? '');
  app.show(
    'Audit',
    filters(app, 'audit', [
      h('div', { class: 'row' }, field('botId', botId), field('keyId', keyId), field('Action', act)),
      botId,
      keyId,
      act,
    ]),
    table('Audit', EVENT_HEADERS, eventRows(page.events)),
    pager('audit', q, page.next),
  );
}
