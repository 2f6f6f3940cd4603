// How a unit of systemd/ starts its process: the node flags of its ExecStart= and its Environment=, read from
// the unit itself, so the benchmarks and the tests that run a process "as the unit does" cannot drift from it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { environmentOf, execStartOf } from './exec-start.js';

export interface UnitStart {
  nodeFlags: string[];
  env: Record<string, string>;
}

/** `unit` (a file name in `<root>/systemd`) as it starts node. */
export function unitStart(root: string, unit: string): UnitStart {
  const text = readFileSync(join(root, 'systemd', unit), 'utf8');
  return { nodeFlags: execStartOf(text).nodeFlags, env: environmentOf(text) };
}
