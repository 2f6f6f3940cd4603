import { existsSync, readdirSync, readFileSync } from 'node:fs';
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

describe('src/DESIGN.md agrees with the code', () => {
  const design = readFileSync(join(ROOT, 'src/DESIGN.md'), 'utf8');

  it('the error model names every code of ERROR_CODES', async () => {
    const { ERROR_CODES } = await import('../../../src/protocol/errors.js');
    const model = design.slice(design.indexOf('#### The error model'), design.indexOf('#### The composition root'));
    expect(ERROR_CODES.filter((code) => !model.includes(`\`${code}\``))).toEqual([]);
  });

  it('the error model names every BotlinkError subclass of src', () => {
    const model = design.slice(design.indexOf('#### The error model'), design.indexOf('#### The composition root'));
    const classes = filesBelow('src').flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/export class (\w+) extends BotlinkError/g)].map((m) => m[1] as string),
    );
    expect(classes.length).toBeGreaterThan(10);
    expect(classes.filter((name) => !model.includes(`\`${name}\``))).toEqual([]);
  });

  it('the rooms table names every shared leaf, src/*.ts', () => {
    const leaves = readdirSync(join(ROOT, 'src')).filter((name) => name.endsWith('.ts'));
    const row = design.split('\n').find((line) => line.startsWith('| `src/*.ts` |')) ?? '';
    expect(leaves.filter((name) => !row.includes(`\`${name}\``) && !design.includes(`| \`src/${name}\` |`))).toEqual([]);
  });

  it('every file path it names under src/ exists', () => {
    const named = [...design.matchAll(/`(src\/[\w./-]+\.(?:ts|mts|md))`/g)].map((m) => m[1] as string);
    expect(named.length).toBeGreaterThan(20);
    expect([...new Set(named)].filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it('§3.1 shows every flag of every command and subcommand', async () => {
    const { COMMANDS } = await import('../../../src/cli/main.js');
    const block = design.slice(design.indexOf('### 3.1 Commands'), design.indexOf('### 3.2'));
    const missing: string[] = [];
    for (const [name, load] of Object.entries(COMMANDS)) {
      if (name === 'demo-app') continue; // hidden: the demo's own app
      const command = await load();
      const all: [string, typeof command][] = [[name, command]];
      for (const [sub, loadSub] of Object.entries(command.subcommands ?? {})) all.push([`${name} ${sub}`, await loadSub()]);
      for (const [full, c] of all) {
        const lines = synopsisOf(block, full);
        for (const [flag, spec] of Object.entries(c.flags)) {
          const short = 'short' in spec ? spec.short : undefined;
          const shown = (line: string) => line.includes(`--${flag}`) || (short !== undefined && line.includes(`[-${short}]`));
          if (!lines.some(shown)) missing.push(`botlink ${full} --${flag}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

/** The lines of a usage block that show `botlink <command>`: its own, and the indented ones that continue it. */
function synopsisOf(block: string, command: string): string[] {
  const lines: string[] = [];
  let inside = false;
  for (const line of block.split('\n')) {
    if (line.startsWith('botlink ')) inside = line === `botlink ${command}` || line.startsWith(`botlink ${command} `);
    else if (!line.startsWith(' ')) inside = false;
    if (inside) lines.push(line);
  }
  return lines;
}
