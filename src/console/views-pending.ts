/**
 * Pending: the keys that wait for an operator (code-less enrollment). Accept asks for the keyId as the technician
 * reads it from the device and sends nothing unless all 32 characters are the row's; Reject all is confirmed.
 */
import { get, post, seg } from './api.js';
import { action, type App, confirmPanel, filters, pager } from './app.js';
import { field, h, input, table, td, tdTime } from './dom.js';
import { apiPath, formatTime, keyIdMatches, pick, type Route, rejectAllBody } from './logic.js';

interface PendingItem {
  keyId: string;
  deviceId: string;
  vendorId: string;
  name: string | null;
  source: string;
  firstAsked: number;
  lastAsked: number;
  duplicates: number;
}

const HEADERS = ['keyId', 'deviceId', 'vendorId', 'name', 'source', 'first asked', 'last asked', 'duplicates'];

export async function pendingView(app: App, route: Route): Promise<void> {
  const q = route.query;
  const page = await get<{ pending: PendingItem[]; next: string | null }>(
    apiPath('/pending', pick(q, ['vendorId', 'q', 'source', 'cursor'])),
  );
  const columns = app.canAct ? [...HEADERS, 'actions'] : HEADERS;
  const rows = page.pending.map((p) => row(app, p, columns.length));
  const vendor = input('vendorId', q['vendorId'] ?? '');
  const serial = input('q', q['q'] ?? '', 'search');
  const source = input('source', q['source'] ?? '');
  const top = h('div', { class: 'actions' });
  if (app.canAct) top.append(rejectAll(app, route, top));
  app.show(
    'Pending',
    filters(app, 'pending', [
      h('div', { class: 'row' }, field('Vendor', vendor), field('Serial prefix', serial), field('Source (address or block)', source)),
      vendor,
      serial,
      source,
    ]),
    top,
    table('Pending', columns, rows.flat(), 'No key waits.'),
    pager('pending', q, page.next),
  );
}

function row(app: App, p: PendingItem, width: number): HTMLTableRowElement[] {
  const dup = p.duplicates > 0;
  const tr = h(
    'tr',
    { class: dup ? 'dup' : undefined },
    td(p.keyId, true),
    td(p.deviceId, true),
    td(p.vendorId),
    td(p.name),
    td(p.source),
    tdTime(formatTime(p.firstAsked)),
    tdTime(formatTime(p.lastAsked)),
    h('td', {}, dup ? h('strong', { class: 'flag' }, `${p.duplicates} other key(s) ask as this deviceId`) : 'none'),
  );
  if (!app.canAct) return [tr];
  const accept: HTMLButtonElement = h('button', { type: 'button', 'aria-expanded': 'false' }, 'Accept');
  accept.addEventListener('click', () => {
    const typed = input('keyId');
    const typedField = field('keyId', typed);
    const wrong = h('p', { class: 'error', id: `${typed.id}-error`, 'aria-live': 'polite' });
    typed.setAttribute('aria-describedby', wrong.id);
    const { panel, close } = confirmPanel(
      app,
      `Accept ${p.deviceId}`,
      accept,
      [
        h('p', {}, 'Type the keyId the device shows (all 32 characters) to accept it as ', h('span', { class: 'mono' }, p.deviceId), '.'),
        typedField,
        wrong,
      ],
      async () => {
        if (!keyIdMatches(typed.value, p.keyId)) {
          wrong.textContent = "That is not this row's keyId (all 32 characters must match): nothing was sent.";
          typed.setAttribute('aria-invalid', 'true');
          typed.focus();
          return;
        }
        wrong.textContent = '';
        typed.removeAttribute('aria-invalid');
        const r = await post<{ botId: string }>(`/pending/${seg(p.keyId)}/accept`, { deviceId: p.deviceId });
        close();
        app.reload(`Accepted ${p.deviceId}: botId ${r.botId}.`);
      },
    );
    tr.after(h('tr', { class: 'panel' }, h('td', { colspan: width }, panel)));
    typed.focus();
  });
  const reject = action(app, 'Reject', async () => {
    await post(`/pending/${seg(p.keyId)}/reject`);
    app.reload(`Rejected the key ${p.keyId} of ${p.deviceId}.`);
  });
  tr.append(h('td', { class: 'actions' }, accept, reject));
  return [tr];
}

/** Reject all: every key of the filter's vendor and source, in one transaction, once confirmed. */
function rejectAll(app: App, route: Route, where: HTMLElement): HTMLButtonElement {
  const b: HTMLButtonElement = h('button', { type: 'button', 'aria-expanded': 'false' }, 'Reject all');
  b.addEventListener('click', () => {
    const which = rejectAllBody(route.query);
    if ('error' in which) {
      app.fail(new Error(which.error));
      return;
    }
    const said = [which.body.vendorId && `of vendor ${which.body.vendorId}`, which.body.source && `from ${which.body.source}`]
      .filter(Boolean)
      .join(' ');
    const { panel, close } = confirmPanel(app, 'Confirm reject all', b, [h('p', {}, `Reject every pending key ${said}?`)], async () => {
      const r = await post<{ rejected: number }>('/pending/reject', which.body);
      close();
      app.reload(`Rejected ${r.rejected} pending key(s).`);
    });
    where.after(panel);
    panel.querySelector('button')?.focus();
  });
  return b;
}
