/**
 * Text from a peer (the cloud, an app, a device, a log file) as a terminal may show it: a byte that
 * drives the terminal (ESC and C1 start escape sequences: a forged title, a cleared screen, OSC 52 to
 * the clipboard) or reorders what a person reads (bidi controls) is shown as an escape instead.
 * Every line the CLI prints from such text goes through here.
 */

/**
 * What is escaped: C0, DEL and C1 (Cc), format characters (Cf: the bidi controls U+061C, U+200E/F,
 * U+202A–E, U+2066–9, zero-width U+200B–D, U+2060–4, U+FEFF, U+FFF9–B, tags), lone surrogates (Cs),
 * and the line and paragraph separators (Zl, Zp) some terminals break lines at.
 */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
/** The same, but for newline and tab: text meant to span lines (a streamed reply). */
const UNPRINTABLE_IN_LINES = /(?![\n\t])[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');

/** `\x1b`, `\x9b`, `\u202e`, `\u{e0001}`: the character's code point, as JavaScript would write it. */
function escaped(ch: string): string {
  const cp = ch.codePointAt(0) ?? 0;
  if (cp <= 0xff) return `\\x${hex(cp, 2)}`;
  return cp <= 0xffff ? `\\u${hex(cp, 4)}` : `\\u{${hex(cp, 1)}}`;
}

/**
 * `text` with every character a terminal would act on shown escaped (`\x1b`, `\u202e`); `lines`
 * keeps newline and tab, for text that spans lines. The one renderer of untrusted text in the CLI.
 */
export function printable(text: string, opts: { lines?: boolean } = {}): string {
  return text.replace(opts.lines === true ? UNPRINTABLE_IN_LINES : UNPRINTABLE, escaped);
}

/**
 * Valid JSON text with C1, DEL, format characters and separators inside its strings written as
 * `\u` escapes (four hex digits), and whitespace between tokens as spaces: it parses to the same value.
 * JSON.stringify escapes only C0 (and lone surrogates); C0 appear in valid JSON text only as
 * whitespace between tokens.
 */
export function printableJsonText(json: string): string {
  return json.replace(UNPRINTABLE, (ch) => {
    if (ch <= '\x1f') return ' ';
    let out = '';
    for (let i = 0; i < ch.length; i++) out += `\\u${hex(ch.charCodeAt(i), 4)}`;
    return out;
  });
}

/** JSON.stringify, then printableJsonText: what `--json` prints. */
export function printableJson(value: unknown): string {
  return printableJsonText(JSON.stringify(value) ?? 'null');
}
