// The npm packages a Debian package of botlink needs, read from the checkout's node_modules:
//   node scripts/package/modules.mjs runtime     the packages whose addons ship (NATIVE_PACKAGES) and what they require at run time
//   node scripts/package/modules.mjs build       those plus what compiling their addons needs (nan)
//   node scripts/package/modules.mjs copyright   the third-party notice: every package whose code ships, with its licence text
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NATIVE_PACKAGES } from '../build.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const modules = join(root, 'node_modules');

// Needed only to compile an addon (nan: C++ headers), or not at all (prebuild-install: the downloader
// better-sqlite3's install script tries first; the package build compiles from source instead).
const COMPILE_ONLY = new Set(['nan']);
const BUILD_ONLY = new Set([...COMPILE_ONLY, 'prebuild-install']);

function manifest(name) {
  const file = join(modules, name, 'package.json');
  if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm ci\` first`);
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** `roots` and everything they depend on (npm installs this tree flat), skipping `skip`. */
function closure(roots, skip) {
  const seen = new Set();
  const visit = (name) => {
    if (seen.has(name) || skip.has(name)) return;
    seen.add(name);
    const m = manifest(name);
    for (const dep of Object.keys(m.dependencies ?? {})) visit(dep);
    // An optional dependency that npm did not install is absent at run time too.
    for (const dep of Object.keys(m.optionalDependencies ?? {})) if (existsSync(join(modules, dep))) visit(dep);
  };
  roots.forEach(visit);
  return [...seen].sort();
}

const production = Object.keys(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).dependencies ?? {});

function licenceText(name) {
  const dir = join(modules, name);
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  return file ? readFileSync(join(dir, file), 'utf8').trim() : undefined;
}

const command = process.argv[2];
if (command === 'runtime') {
  console.log(closure(NATIVE_PACKAGES, BUILD_ONLY).join('\n'));
} else if (command === 'build') {
  const runtime = closure(NATIVE_PACKAGES, BUILD_ONLY);
  const headers = [...COMPILE_ONLY].filter((name) => runtime.some((r) => Object.hasOwn(manifest(r).dependencies ?? {}, name)));
  console.log([...runtime, ...headers].sort().join('\n'));
} else if (command === 'copyright') {
  // Bundled into dist/botlink.mjs or shipped in node_modules: the production tree without the build-only part.
  for (const name of closure(production, BUILD_ONLY)) {
    const m = manifest(name);
    // The licence field is an SPDX string, or { type } in older manifests.
    const licence = typeof m.license === 'object' ? m.license?.type : m.license;
    console.log(`\n--- ${name} ${m.version} (${licence ?? 'no licence field'}) ---\n`);
    console.log(licenceText(name) ?? `No licence file ships with ${name}; its package.json says: ${licence ?? 'nothing'}.`);
  }
} else {
  console.error('usage: node scripts/package/modules.mjs runtime|build|copyright');
  process.exit(64);
}
