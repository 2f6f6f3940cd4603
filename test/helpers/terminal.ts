/**
 * What a terminal would act on in a program's output, found by code point from an explicit list (not
 * by the CLI's own regular expression): the tests' independent check that output is printable.
 */

/** Bidi controls and the other format characters the CLI must show escaped. */
const FORMAT = new Set([
  0x00ad, 0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064,
  0x2066, 0x2067, 0x2068, 0x2069, 0xfeff, 0xfff9, 0xfffa, 0xfffb, 0x2028, 0x2029,
]);

/** Each character of `text` a terminal would act on, as `U+XXXX`; newline and tab are text. */
export function terminalHazards(text: string): string[] {
  const found: string[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    const c0 = cp < 0x20 && cp !== 0x0a && cp !== 0x09;
    const c1 = cp >= 0x7f && cp <= 0x9f;
    const surrogate = cp >= 0xd800 && cp <= 0xdfff;
    if (c0 || c1 || surrogate || FORMAT.has(cp) || (cp >= 0xe0000 && cp <= 0xe007f))
      found.push(`U+${cp.toString(16).toUpperCase().padStart(4, '0')}`);
  }
  return found;
}

/**
 * The same for bytes as written to a terminal: a raw ESC or other C0 byte, and, once decoded as
 * UTF-8, C1 code points and format characters.
 */
export function terminalHazardsInBytes(bytes: Buffer): string[] {
  const raw = [...bytes].filter((b) => (b < 0x20 && b !== 0x0a && b !== 0x09) || b === 0x7f).map((b) => `byte 0x${b.toString(16)}`);
  return [...raw, ...terminalHazards(bytes.toString('utf8'))];
}
