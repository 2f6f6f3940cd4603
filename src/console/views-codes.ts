/** Codes (make one, shown once; the list; Cancel) and Preauth (paste lines, Import; the list; Remove). */
import { del, get, post, seg } from './api.js';
import { action, type App, faultText, filters, pager } from './app.js';
import { button, field, form, h, input, select, table, td, tdTime } from './dom.js';
import { apiPath, codeBody, formatTime, pick, preauthLines, type Route } from './logic.js';

interface CodeItem {
  id: string;
  vendorId: string;
  deviceId: string | null;
  kind: string;
  usesLeft: number;
  expiresAt: number;
}

interface PreauthItem {
  vendorId: string;
  deviceId: string;
  keyId: string;
  addedAt: number;
}

/** A list drawn into `into`, again after each action, so what the page shows once (a new code) stays. */
async function fill(into: HTMLElement, load: () => Promise<HTMLElement[]>): Promise<void> {
  into.replaceChildren(...(await load()));
}

export async function codesView(app: App, route: Route): Promise<void> {
  const q = route.query;
  const list = h('div');
  const load = async (): Promise<HTMLElement[]> => {
    const page = await get<{ codes: CodeItem[]; next: string | null }>(apiPath('/codes', pick(q, ['vendorId', 'cursor'])));
    const columns = ['id', 'vendorId', 'deviceId', 'kind', 'uses left', 'expires'];
    const rows = page.codes.map((c) => {
      const tr = h(
        'tr',
        {},
        td(c.id, true),
        td(c.vendorId),
        td(c.deviceId ?? 'any device', c.deviceId !== null),
        td(c.kind),
        td(c.usesLeft),
        tdTime(formatTime(c.expiresAt)),
      );
      if (app.canAct)
        tr.append(
          h(
            'td',
            {},
            action(app, 'Cancel', async () => {
              await del(`/codes/${seg(c.id)}`);
              app.say(`Cancelled the code ${c.id}.`);
              await fill(list, load);
            }),
          ),
        );
      return tr;
    });
    return [table('Codes', app.canAct ? [...columns, 'actions'] : columns, rows, 'No live code.'), pager('codes', q, page.next)];
  };
  await fill(list, load);
  const vendorFilter = input('vendorId', q['vendorId'] ?? '');
  app.show(
    'Codes',
    app.canAct && makeCode(app, () => fill(list, load)),
    h('h2', {}, 'Live codes'),
    filters(app, 'codes', [h('div', { class: 'row' }, field('Vendor', vendorFilter)), vendorFilter]),
    list,
  );
}

function makeCode(app: App, reload: () => Promise<void>): HTMLElement {
  const vendorId = input('vendorId');
  const deviceId = input('deviceId');
  const anyDevice = input('anyDevice', '', 'checkbox');
  const uses = input('uses');
  const ttl = input('ttlS');
  uses.inputMode = 'numeric';
  ttl.inputMode = 'numeric';
  const kind = select('kind', [
    ['plain', 'plain'],
    ['adopt', 'adopt'],
    ['replace', 'replace'],
  ]);
  const wrong = h('p', { class: 'error', 'aria-live': 'polite' });
  const shown = h('div', { class: 'shown' });
  const submit = h('button', { type: 'submit' }, 'Make code');
  const made = form(
    'Make code',
    async () => {
      wrong.textContent = '';
      const asked = codeBody({
        vendorId: vendorId.value,
        deviceId: deviceId.value,
        anyDevice: anyDevice.checked,
        uses: uses.value,
        ttlS: ttl.value,
        kind: kind.value,
      });
      if ('error' in asked) {
        wrong.textContent = asked.error;
        return;
      }
      submit.disabled = true;
      try {
        const c = await post<{ id: string; code: string; expiresAt: number; uses: number }>('/codes', asked.body);
        shown.replaceChildren(codeShown(app, c));
        app.say(`Made the code ${c.id}: it is shown once, below the form.`);
        await reload();
      } catch (err) {
        app.fail(err);
      } finally {
        submit.disabled = false;
      }
    },
    h('div', { class: 'row' }, field('vendorId', vendorId), field('deviceId', deviceId), field('Any device', anyDevice)),
    h('div', { class: 'row' }, field('Uses', uses), field('Lifetime (seconds)', ttl), field('Kind', kind)),
    wrong,
    submit,
  );
  return h('section', { 'aria-label': 'Make code' }, h('h2', {}, 'Make code'), made, shown);
}

/** The new code, this once, with Copy (the clipboard; failing that, the code selected for the user to copy). */
function codeShown(app: App, c: { id: string; code: string; expiresAt: number; uses: number }): HTMLElement {
  const code = h('code', { class: 'mono code', 'data-testid': 'new-code' }, c.code);
  const copy = button('Copy', () => {
    const selectIt = (): void => {
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(range);
      app.say('The code is selected: copy it with Ctrl+C.');
    };
    if (!navigator.clipboard) return selectIt();
    navigator.clipboard.writeText(c.code).then(() => app.say('The code is copied.'), selectIt);
  });
  return h(
    'div',
    { class: 'new-code' },
    h('p', {}, 'The new code, shown this once: keep it now.'),
    h('p', {}, code, ' ', copy),
    h('p', {}, `id ${c.id}, ${c.uses} use(s), expires ${formatTime(c.expiresAt)}`),
  );
}

export async function preauthView(app: App, route: Route): Promise<void> {
  const q = route.query;
  const list = h('div');
  const load = async (): Promise<HTMLElement[]> => {
    const page = await get<{ preauth: PreauthItem[]; next: string | null }>(apiPath('/preauth', pick(q, ['vendorId', 'cursor'])));
    const columns = ['vendorId', 'deviceId', 'keyId', 'added'];
    const rows = page.preauth.map((p) => {
      const tr = h('tr', {}, td(p.vendorId), td(p.deviceId, true), td(p.keyId, true), tdTime(formatTime(p.addedAt)));
      if (app.canAct)
        tr.append(
          h(
            'td',
            {},
            action(app, 'Remove', async () => {
              await del(`/preauth/${seg(p.vendorId)}/${seg(p.deviceId)}`);
              app.say(`Removed the pre-authorisation of ${p.deviceId}.`);
              await fill(list, load);
            }),
          ),
        );
      return tr;
    });
    return [
      table('Preauth', app.canAct ? [...columns, 'actions'] : columns, rows, 'No pre-authorised key.'),
      pager('preauth', q, page.next),
    ];
  };
  await fill(list, load);
  const vendorFilter = input('vendorId', q['vendorId'] ?? '');
  app.show(
    'Preauth',
    app.canAct && importForm(app, () => fill(list, load)),
    h('h2', {}, 'Pre-authorised keys'),
    filters(app, 'preauth', [h('div', { class: 'row' }, field('Vendor', vendorFilter)), vendorFilter]),
    list,
  );
}

function importForm(app: App, reload: () => Promise<void>): HTMLElement {
  const vendorId = input('vendorId');
  const lines = h('textarea', { name: 'lines', rows: 6, spellcheck: 'false' });
  const result = h('div', { class: 'result' });
  const submit = h('button', { type: 'submit' }, 'Import');
  const imported = form(
    'Import',
    async () => {
      submit.disabled = true;
      try {
        const r = await post<{ added: number; rejected: { line: number; msg: string }[] }>('/preauth', {
          vendorId: vendorId.value.trim(),
          lines: preauthLines(lines.value),
        });
        app.say(`Imported ${r.added} line(s); ${r.rejected.length} rejected.`);
        result.replaceChildren(
          h('p', {}, `Added ${r.added}.`),
          ...(r.rejected.length === 0
            ? []
            : [
                table(
                  'Rejected lines',
                  ['line', 'why'],
                  r.rejected.map((x) => h('tr', {}, td(x.line), td(x.msg))),
                ),
              ]),
        );
        await reload();
      } catch (err) {
        app.fail(err);
        result.textContent = faultText(err);
      } finally {
        submit.disabled = false;
      }
    },
    field('vendorId', vendorId),
    field('Lines: deviceId,publicKey (Ctrl+Enter imports)', lines),
    submit,
  );
  // Enter in a textarea is a new line: Ctrl+Enter (or Cmd+Enter) submits, as Enter does in the other forms.
  lines.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      imported.requestSubmit();
    }
  });
  return h('section', { 'aria-label': 'Import' }, h('h2', {}, 'Import pre-authorised keys'), imported, result);
}
