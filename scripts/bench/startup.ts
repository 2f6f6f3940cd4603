// `npm run bench:startup`: `botlink --version` from the bundle against `node -e 0` (the floor), against
// the same sources compiled file by file (what bundling buys), and against a code-split bundle.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { median } from '../../test/helpers/stats.js';
import { timeRun } from './child.js';
import { machineLine, ms, printTable, times, verdict } from './report.js';
import { isMain, ROOT, sourceFiles } from './root.js';
import { alternate, spread } from './sample.js';
import { Workspace } from './workspace.js';

const GOAL = 1.3;
const RUNS = 10;
const PROFILE_RUNS = 5;

/** The sources compiled one file each, imports left as they are: the unbundled program. */
async function buildUnbundled(outdir: string): Promise<string> {
  await build({
    entryPoints: sourceFiles(),
    outdir,
    outbase: join(ROOT, 'src'),
    bundle: false,
    platform: 'node',
    format: 'esm',
    target: 'node20.18',
    define: { __BOTLINK_BUILD_TIME__: String(Date.now()) },
    logLevel: 'warning',
  });
  return join(outdir, 'cli', 'botlink.js');
}

/** The bundle as scripts/build.mjs makes it, but with esbuild's code splitting: each command a chunk. */
async function buildSplit(outdir: string): Promise<string> {
  // Loaded at run time, not bundled: build.mjs builds dist/ when it is the main module.
  const { bundleOptions } = (await import(pathToFileURL(join(ROOT, 'scripts', 'build.mjs')).href)) as typeof import('../build.mjs');
  await build({
    ...bundleOptions(),
    entryPoints: { botlink: join(ROOT, 'src', 'cli', 'botlink.ts') },
    outdir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
  });
  return join(outdir, 'botlink.mjs');
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

/** Where each module of the bundle begins: esbuild marks it with a `// path` comment line. */
function bundleSections(bundle: string): { line: number; name: string }[] {
  const sections: { line: number; name: string }[] = [];
  readFileSync(bundle, 'utf8')
    .split('\n')
    .forEach((text, line) => {
      const m = /^\/\/ ((?:node_modules\/(?:@[^/]+\/)?[^/]+)|src\/[^/]+)/.exec(text);
      if (m) sections.push({ line, name: m[1]! });
    });
  return sections;
}

/** Self time of `bundle --version` per bundled package, or per function outside the bundle, over a few profiled runs. */
async function profile(bundle: string, dir: string): Promise<[string, number][]> {
  const profDir = join(dir, 'prof');
  mkdirSync(profDir, { recursive: true });
  for (let i = 0; i < PROFILE_RUNS; i++)
    await timeRun(['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', profDir, bundle, '--version']);
  const sections = bundleSections(bundle);
  const sectionOf = (line: number): string => {
    let name = 'bundle prelude';
    for (const s of sections) {
      if (s.line > line) break;
      name = s.name;
    }
    return name;
  };
  const bundleUrl = pathToFileURL(bundle).href;
  const totals = new Map<string, number>();
  for (const file of readdirSync(profDir)) {
    const prof = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as CpuProfile;
    const bucket = new Map<number, string>();
    for (const n of prof.nodes) {
      const { url, functionName, lineNumber } = n.callFrame;
      if (url === bundleUrl) bucket.set(n.id, `bundle: ${sectionOf(lineNumber)}`);
      else if (url === '') bucket.set(n.id, functionName || '(anonymous)');
      else
        bucket.set(
          n.id,
          `${functionName || '(anonymous)'} (${url.startsWith('node:') ? url : relative(ROOT, url.replace(/^file:\/\//, ''))})`,
        );
    }
    prof.samples.forEach((id, i) => {
      const key = bucket.get(id) ?? '?';
      totals.set(key, (totals.get(key) ?? 0) + (prof.timeDeltas[i] ?? 0) / 1000 / PROFILE_RUNS);
    });
  }
  return [...totals].sort((a, b) => b[1] - a[1]);
}

async function main(): Promise<void> {
  const ws = await Workspace.create('startup');
  try {
    const unbundled = await buildUnbundled(join(ws.dir, 'unbundled'));
    const split = await buildSplit(join(ws.dir, 'split'));
    const [floor = [], bundle = [], perFile = [], chunked = []] = await alternate(RUNS, [
      () => timeRun(['-e', '0']),
      () => timeRun([ws.bundle, '--version']),
      () => timeRun([unbundled, '--version']),
      () => timeRun([split, '--version']),
    ]);
    const base = median(floor);
    const ratio = median(bundle) / base;
    console.log(`botlink startup benchmark — ${machineLine()}`);
    console.log(`spawn → exit, medians of ${RUNS} runs rotating through the four commands\n`);
    const row = (name: string, xs: number[], goal: string, result: string): string[] => [
      name,
      ms(median(xs)),
      times(median(xs) / base),
      goal,
      result,
      spread(xs).toFixed(2),
    ];
    printTable(
      ['command', 'median', 'vs node -e 0', 'goal', 'result', 'IQR/median'],
      [
        row('node -e 0', floor, '', ''),
        row('botlink --version (bundle, dist/botlink.mjs)', bundle, `≤ ${GOAL}×`, verdict(ratio <= GOAL)),
        row('botlink --version (unbundled, one file per module)', perFile, 'info', ''),
        row('botlink --version (bundle with code splitting)', chunked, 'info', ''),
      ],
    );
    const kb = (file: string): string => `${(statSync(file).size / 1024).toFixed(0)} KiB`;
    console.log(`\nbundle vs unbundled: ${times(median(bundle) / median(perFile))}; bundle ${kb(ws.bundle)}, split entry ${kb(split)}`);
    if (ratio > GOAL) {
      console.log(`\ngoal missed: where \`botlink --version\` spends its CPU (self time, mean of ${PROFILE_RUNS} profiled runs)`);
      const top = (await profile(ws.bundle, ws.dir)).slice(0, 12);
      printTable(
        ['where', 'ms'],
        top.map(([k, v]) => [k, v.toFixed(1)]),
      );
      console.log('compileSourceTextModule is V8 compiling an ES module source: the bundle is one module, so all of it.');
    }
  } finally {
    ws.remove();
  }
}

if (isMain('startup')) await main();
