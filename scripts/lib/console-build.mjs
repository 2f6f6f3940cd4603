// The operator's console (src/console, DESIGN §3.8) built into strings the product embeds: one minified JS file and
// one CSS file, named by their content's hash, and the page that loads them (no inline script or style: the
// listener's Content-Security-Policy allows neither). scripts/build.mjs puts the result into the CLI bundle through
// the `botlink:console` module (consolePlugin), and the vitest configs into in-process tests (consoleVitePlugin).
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const SOURCE = fileURLToPath(new URL('../../src/console/', import.meta.url));
/** The browsers an operator is expected to use: a few years back, ES2020 and CSS nesting lowered. */
const TARGET = ['es2020', 'chrome110', 'firefox110', 'safari16'];
/** The virtual module's name, as src/broker/admin/console-route.ts imports it (src/types/botlink-console.d.ts). */
export const CONSOLE_MODULE = 'botlink:console';

const TYPES = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

/** The page: the stylesheet and the script by their hashed names, the rest made by the script. */
function page(css, js) {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="same-origin">',
    '<title>botlink console</title>',
    `<link rel="stylesheet" href="/admin/${css}">`,
    `<script defer src="/admin/${js}"></script>`,
    '</head>',
    '<body>',
    '<noscript><p>The botlink console needs JavaScript. The admin API (/admin/v1) answers scripts without it.</p></noscript>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/**
 * Builds the console: `{html, assets}`, where assets maps each file name (`console.<hash>.js`, `.css`) to its
 * Content-Type and text. Each text comes with its gzip, base64 (ASCII, so the bundle that embeds it stays ASCII).
 */
export async function buildConsole() {
  const result = await build({
    entryPoints: [join(SOURCE, 'main.ts'), join(SOURCE, 'console.css')],
    bundle: true,
    minify: true,
    format: 'iife',
    target: TARGET,
    charset: 'ascii',
    legalComments: 'none',
    outdir: 'console',
    entryNames: '[name]',
    write: false,
    logLevel: 'warning',
    tsconfig: join(SOURCE, 'tsconfig.json'),
  });
  const assets = {};
  const names = {};
  for (const file of result.outputFiles) {
    const ext = file.path.endsWith('.css') ? 'css' : 'js';
    const text = file.text;
    const name = `console.${createHash('sha256').update(text).digest('hex').slice(0, 12)}.${ext}`;
    names[ext] = name;
    assets[name] = { type: TYPES[ext], text, gzip: gzipSync(text, { level: 9 }).toString('base64') };
  }
  const html = page(names.css, names.js);
  return { html: { text: html, gzip: gzipSync(html, { level: 9 }).toString('base64') }, assets };
}

/** The virtual module's source: the built console as constants. */
export async function consoleModuleSource() {
  const built = await buildConsole();
  return `export const page = ${JSON.stringify(built.html)};\nexport const assets = ${JSON.stringify(built.assets)};\n`;
}

/** An esbuild plugin that resolves `botlink:console` to the built console (the CLI bundle, scripts run with node). */
export function consolePlugin() {
  return {
    name: 'botlink-console',
    setup(b) {
      b.onResolve({ filter: /^botlink:console$/ }, () => ({ path: CONSOLE_MODULE, namespace: 'botlink-console' }));
      b.onLoad({ filter: /.*/, namespace: 'botlink-console' }, async () => ({ loader: 'js', contents: await consoleModuleSource() }));
    },
  };
}

/** The same module for vite (vitest's in-process tests), built once per run. */
export function consoleVitePlugin() {
  const id = `\0${CONSOLE_MODULE}`;
  let source;
  return {
    name: 'botlink-console',
    resolveId: (spec) => (spec === CONSOLE_MODULE ? id : undefined),
    load(loaded) {
      if (loaded !== id) return undefined;
      source ??= consoleModuleSource();
      return source;
    },
  };
}
