import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// A clone holds every document its code cites (issue 26): the design in src/DESIGN.md, by section.
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

function filesBelow(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs|cjs|sh|service|json|md)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

/** The section numbers src/DESIGN.md has: "## 2." gives 2, "### 3.7" gives 3.7. */
function designSections(): Set<string> {
  const design = readFileSync(join(ROOT, 'src/DESIGN.md'), 'utf8');
  return new Set([...design.matchAll(/^#{2,3} (\d+(?:\.\d+)?)\.? /gm)].map((m) => m[1] as string));
}

describe('the documents a clone must hold', () => {
  it('every "DESIGN §n" in src, test, scripts and systemd names a section src/DESIGN.md has', () => {
    const sections = designSections();
    expect(sections.has('3.7')).toBe(true);
    const missing: string[] = [];
    for (const file of ['src', 'test', 'scripts', 'systemd'].flatMap(filesBelow)) {
      for (const m of readFileSync(file, 'utf8').matchAll(/DESIGN(?:\.md)? §(\d+(?:\.\d+)?)/g)) {
        if (!sections.has(m[1] as string)) missing.push(`${relative(ROOT, file)}: §${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('nothing in the repository points at a design outside it', () => {
    const outside = ['src', 'test', 'scripts', 'systemd']
      .flatMap(filesBelow)
      .concat([join(ROOT, 'README.md')])
      .filter((file) => /\.\.\/shared\/DESIGN/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(ROOT, file));
    expect(outside).toEqual([]);
  });

  it('the README stays a README: at most 400 lines, with set-up, install, broker mode, app and technician sections', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length - 1).toBeLessThanOrEqual(400);
    const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    for (const section of [/^Set-up/, /^Install/, /^Broker mode/, /^Writing an app/, /technician/]) {
      expect(
        headings.some((h) => section.test(h as string)),
        `a section matching ${section} in ${headings.join(' | ')}`,
      ).toBe(true);
    }
  });
});
