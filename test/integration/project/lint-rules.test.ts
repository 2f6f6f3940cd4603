import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../../helpers/harness.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const { tempDir } = useHarness();

/** biome.jsonc as the project has it, less what ties it to the checkout (its schema path and git). */
function projectConfig(): string {
  return readFileSync(join(ROOT, 'biome.jsonc'), 'utf8')
    .replace(/"\$schema":[^\n]*\n/, '')
    .replace(/"vcs":[^\n]*\n/, '');
}

/** The files and rules Biome flags in a tree of sources linted with the project's config. */
function flagged(tree: Record<string, string>): string[] {
  const dir = tempDir('botlink-lint-rules-');
  writeFileSync(join(dir, 'biome.jsonc'), projectConfig());
  mkdirSync(join(dir, 'scripts', 'lint'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'lint', 'console-markup.grit'), readFileSync(join(ROOT, 'scripts', 'lint', 'console-markup.grit')));
  for (const [file, text] of Object.entries(tree)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const r = spawnSync(join(ROOT, 'node_modules', '.bin', 'biome'), ['lint', '--reporter=json', 'src'], { cwd: dir, encoding: 'utf8' });
  const report = JSON.parse(r.stdout) as { diagnostics: { category: string; location: { path: { file: string } | string } }[] };
  return report.diagnostics
    .map((d) => `${typeof d.location.path === 'string' ? d.location.path : d.location.path.file} ${d.category}`)
    .sort();
}

const TIME_AND_CHANCE = [
  'export const wall = Date.now();',
  'export const chance = Math.random();',
  'export const mono = performance.now();',
  'setTimeout(() => undefined, 1);',
].join('\n');

describe('biome.jsonc keeps time and chance behind the Clock (DESIGN §2)', () => {
  it('flags Date.now, Math.random, performance and timer globals in agent, broker and cloud only', () => {
    const found = flagged({
      'src/agent/time/x.ts': TIME_AND_CHANCE,
      'src/broker/y.ts': TIME_AND_CHANCE,
      'src/cloud/z.ts': 'export const wall = Date.now();\n',
      'src/clock.ts': TIME_AND_CHANCE,
      'src/service/s.ts': TIME_AND_CHANCE,
      'src/agent/ok.ts': 'export const at = new Date(0).toISOString();\nexport const n = Math.max(1, 2);\n',
    });
    const rules = (file: string) => found.filter((f) => f.startsWith(file)).map((f) => f.slice(file.length + 1));
    const expected = [
      'lint/nursery/noJsRestrictedProperties',
      'lint/nursery/noJsRestrictedProperties',
      'lint/style/noRestrictedGlobals',
      'lint/style/noRestrictedGlobals',
    ];
    expect(rules('src/agent/time/x.ts')).toEqual(expected);
    expect(rules('src/broker/y.ts')).toEqual(expected);
    expect(rules('src/cloud/z.ts')).toEqual(['lint/nursery/noJsRestrictedProperties']);
    expect(rules('src/clock.ts')).toEqual([]);
    expect(rules('src/service/s.ts')).toEqual([]);
    expect(rules('src/agent/ok.ts')).toEqual([]);
  });
});

describe('biome.jsonc keeps markup out of the console (DESIGN §3.8)', () => {
  it('flags innerHTML and outerHTML (read or assigned), insertAdjacentHTML, createContextualFragment and document.write in src/console only', () => {
    const markup = [
      "const el = document.createElement('p');",
      "el.innerHTML = '<b>x</b>';",
      'export const o = el.outerHTML;',
      "el.insertAdjacentHTML('beforeend', '<i>y</i>');",
      "export const f = document.createRange().createContextualFragment('<i>z</i>');",
      "document.write('<p>w</p>');",
    ].join('\n');
    const found = flagged({
      'src/console/views.ts': markup,
      'src/console/ok.ts': "const el = document.createElement('p');\nel.textContent = '<img src=x>';\nexport { el };\n",
      'src/service/page.ts': markup,
    });
    const rules = (file: string) => found.filter((f) => f.startsWith(file)).map((f) => f.slice(file.length + 1));
    expect(rules('src/console/views.ts')).toEqual([...Array(4).fill('lint/nursery/noJsRestrictedProperties'), 'plugin']);
    expect(rules('src/console/ok.ts')).toEqual([]);
    expect(rules('src/service/page.ts')).toEqual([]);
  });
});
