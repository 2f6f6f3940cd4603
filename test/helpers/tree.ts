import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** `dir` and every folder and file below it, each folder before what it holds; links are not followed. */
export function treeOf(dir: string): string[] {
  return [
    dir,
    ...readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? treeOf(join(dir, e.name)) : [join(dir, e.name)])),
  ];
}

/** Every file below `dir` with its bytes as latin1 text, so that any byte reads back and a secret's text still matches. */
export function filesUnder(dir: string): { path: string; text: string }[] {
  return treeOf(dir)
    .filter((path) => statSync(path).isFile())
    .map((path) => ({ path, text: readFileSync(path, 'latin1') }));
}
