/**
 * Building the page's nodes: every node by createElement, every text by a Text node or textContent, so that what a
 * device sends (a deviceId, a name, a version, a source) is shown as text and never read as markup.
 */

export type Child = Node | string | number | null | undefined | false;
type Props = Record<string, string | number | boolean | EventListener | undefined>;

/** Properties set as such (their attributes say only the first value); the rest are attributes. */
const PROPERTIES = new Set(['value', 'checked', 'disabled', 'hidden', 'tabIndex', 'required']);

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (PROPERTIES.has(name)) Object.assign(el, { [name]: value });
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

let ids = 0;
/** An id unique in the page, for a label's `for`. */
export const uid = (prefix: string): string => `${prefix}-${++ids}`;

/** A labelled control: `<label for>` and the control, in one block. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement): HTMLElement {
  if (control.id === '') control.id = uid('f');
  const wrap = h('div', { class: control instanceof HTMLInputElement && control.type === 'checkbox' ? 'field check' : 'field' });
  const text = h('label', { for: control.id }, label);
  if (control instanceof HTMLInputElement && control.type === 'checkbox') append(wrap, [control, text]);
  else append(wrap, [text, control]);
  return wrap;
}

export function input(name: string, value = '', type = 'text'): HTMLInputElement {
  return h('input', { type, name, value, autocomplete: 'off', spellcheck: 'false' });
}

export function select(name: string, options: readonly (readonly [string, string])[], value = ''): HTMLSelectElement {
  const s = h('select', { name }, ...options.map(([v, label]) => h('option', { value: v }, label)));
  s.value = value;
  return s;
}

export function button(text: string, onclick: () => void, props: Props = {}): HTMLButtonElement {
  return h('button', { type: 'button', ...props, onclick: () => onclick() }, text);
}

/** A form whose submit (a button, or Enter in a field) calls `onsubmit`, never a navigation. */
export function form(label: string, onsubmit: () => void, ...children: Child[]): HTMLFormElement {
  return h(
    'form',
    {
      'aria-label': label,
      novalidate: true,
      onsubmit: (e: Event) => {
        e.preventDefault();
        onsubmit();
      },
    },
    ...children,
  );
}

/** A cell of text; deviceId and keyId (mono) in a monospace font. */
export function td(value: Child, mono = false): HTMLTableCellElement {
  return h('td', { class: mono ? 'mono' : undefined }, value ?? '\u2014');
}

/** A cell of a time (formatTime's text): kept on one line, its date never parted from its clock. */
export function tdTime(text: string): HTMLTableCellElement {
  return h('td', { class: 'time' }, text);
}

/** A list's table: named (aria-label) by its view, a header cell per column, its rows. */
export function table(
  label: string,
  headers: readonly string[],
  rows: readonly HTMLTableRowElement[],
  empty = 'Nothing to show.',
): HTMLElement {
  const head = h('tr', {}, ...headers.map((text) => h('th', { scope: 'col' }, text)));
  const body = h('tbody', {}, ...rows);
  if (rows.length === 0) body.appendChild(h('tr', {}, h('td', { colspan: headers.length }, empty)));
  return h('div', { class: 'scroll' }, h('table', { 'aria-label': label }, h('thead', {}, head), body));
}

/** A definition list of a device's fields. */
export function fields(pairs: readonly (readonly [string, Child, boolean?])[]): HTMLElement {
  const dl = h('dl');
  for (const [name, value, mono] of pairs)
    append(dl, [h('dt', {}, name), h('dd', { class: mono ? 'mono' : undefined }, value ?? '\u2014')]);
  return dl;
}
