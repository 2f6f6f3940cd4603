// `npm run bench:startup`: `botlink --version` against `node -e 0` (the floor), and for scale a command
// that loads the application bundle, compiled from source and from the code cache.
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { median } from '../lib/stats.js';
import { cleanEnv } from '../lib/env.js';
import { fileAppears } from '../lib/file-appears.js';
import { Child, timeRun } from './child.js';
import { machineLine, ms, printTable, ratioRow, times, verdict } from './report.js';
import { isMain, ROOT } from './root.js';
import { alternate, spread } from './sample.js';
import { Workspace } from './workspace.js';

const GOAL = 1.3;
const RUNS = 10;
const PROFILE_RUNS = 5;

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

interface StartupSamples {
  floor: number[];
  version: number[];
  /** `--help`, which loads the application bundle: compiled from source, and from the code cache. */
  plain: number[];
  cached: number[];
}

async function measure(ws: Workspace): Promise<StartupSamples> {
  const help = (cache: boolean) => () => timeRun([ws.bundle, '--help'], cache ? { CACHE_DIRECTORY: ws.cacheDir } : {});
  // One start that lives long enough to write the code cache the `--help (code cache)` runs use.
  await warmCodeCache(ws);
  const [floor = [], version = [], plain = [], cached = []] = await alternate(RUNS, [
    () => timeRun(['-e', '0']),
    () => timeRun([ws.bundle, '--version']),
    help(false),
    help(true),
  ]);
  return { floor, version, plain, cached };
}

/** The `--version` row of `npm run bench`, on a workspace of its own. */
export async function startupRows(): Promise<string[][]> {
  const ws = await Workspace.create('startup');
  try {
    const { floor, version } = await measure(ws);
    return [ratioRow('`botlink --version` vs `node -e 0`', version, floor, GOAL)];
  } finally {
    ws.remove();
  }
}

async function main(): Promise<void> {
  const ws = await Workspace.create('startup');
  try {
    const { floor, version, plain, cached } = await measure(ws);
    const base = median(floor);
    const ratio = median(version) / base;
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
        row('botlink --version (the entry alone)', version, `≤ ${GOAL}×`, verdict(ratio <= GOAL)),
        row('botlink --help (entry + application bundle)', plain, 'info', ''),
        row('botlink --help, bundle from the code cache', cached, 'info', ''),
      ],
    );
    const kb = (file: string): string => `${(statSync(file).size / 1024).toFixed(0)} KiB`;
    console.log(`\nentry ${kb(ws.bundle)}, application bundle ${kb(ws.bundle.replace(/\.mjs$/, '.cjs'))}`);
    if (ratio > GOAL) {
      console.log(`\ngoal missed: where \`botlink --version\` spends its CPU (self time, mean of ${PROFILE_RUNS} profiled runs)`);
      const top = (await profile(ws.bundle, ws.dir)).slice(0, 12);
      printTable(
        ['where', 'ms'],
        top.map(([k, v]) => [k, v.toFixed(1)]),
      );
    }
  } finally {
    ws.remove();
  }
}

/** `botlink serve` with the workspace's cache directory until it wrote the code cache. */
async function warmCodeCache(ws: Workspace): Promise<void> {
  const written = fileAppears(ws.cacheDir, '.v8cache');
  const child = new Child([ws.bundle, 'serve', '--port', '0'], cleanEnv({ CACHE_DIRECTORY: ws.cacheDir }));
  await Promise.race([written, child.exited.then((code) => Promise.reject(new Error(`serve exited ${code}: ${child.out}`)))]);
  await child.stop('SIGTERM');
}

if (isMain('startup')) await main();
