// A systemd unit file read as systemd reads its settings, and systemd-analyze run on one.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { requireTool } from '../../scripts/lib/tools.js';

/** Section → key → every assignment, in order (systemd's list settings accumulate). */
export type Unit = Map<string, Map<string, string[]>>;

export function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = new Map();
      unit.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (!section || eq < 0) throw new Error(`unparsable unit line: ${line}`);
    const key = line.slice(0, eq);
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1)]);
  }
  return unit;
}

/** The last assignment of a key (what systemd uses for a scalar setting); throws when it is not set. */
export function required(unit: Unit, section: string, key: string): string {
  const value = unit.get(section)?.get(key)?.at(-1);
  if (value === undefined) throw new Error(`[${section}] ${key}= is not set`);
  return value;
}

/** A systemd time span in seconds ("30s", "2min", "120"). */
export function seconds(span: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?$/.exec(span.trim());
  if (!m) throw new Error(`unsupported time span: ${span}`);
  const factor = { ms: 0.001, s: 1, sec: 1, m: 60, min: 60, h: 3600 }[m[2] ?? 's']!;
  return Number(m[1]) * factor;
}

/** Runs systemd-analyze on the unit `text` saved as `name` in a fresh folder (verify needs ExecStart's program: a host without /usr/bin/node gets this node). */
function analyze(args: string[], name: string, text: string): { status: number | null; stdout: string; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'botlink-unit-'));
  try {
    const file = join(dir, basename(name));
    writeFileSync(file, existsSync('/usr/bin/node') ? text : text.replaceAll('/usr/bin/node', process.execPath));
    const r = spawnSync(requireTool('systemd-analyze'), [...args, file], {
      encoding: 'utf8',
      env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
    });
    return { status: r.status, stdout: r.stdout, output: (r.stdout + r.stderr).trim() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `systemd-analyze verify`: status and every message it printed. */
export function verifyUnit(name: string, text: string): { status: number | null; output: string } {
  const { status, output } = analyze(['verify', '--man=no'], name, text);
  return { status, output };
}

/** `systemd-analyze security --offline`: the overall exposure (0 best, 10 worst); the command fails above 20 (here: never). */
export function exposureOf(name: string, text: string): { status: number | null; exposure: number | undefined; output: string } {
  const r = analyze(['security', '--offline=yes', '--threshold=20', '--no-pager'], name, text);
  const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(r.stdout);
  return { status: r.status, exposure: m ? Number(m[1]) : undefined, output: r.output };
}
