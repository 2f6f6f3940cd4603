// The daemon as systemd/botlink.service starts it: ExecStart (node, its flags, the bundle, the CLI args) and Environment=.

export interface ExecStart {
  program: string;
  /** The options node itself reads (V8 flags among them): what the benchmarks give their baselines too. */
  nodeFlags: string[];
  script: string;
  args: string[];
}

/** Splits an ExecStart= value (no quoting: the unit uses none) into node, its flags, the script and its args. */
export function parseExecStart(commandLine: string): ExecStart {
  const [program = '', ...rest] = commandLine.trim().split(/\s+/);
  const at = rest.findIndex((word) => !word.startsWith('-'));
  if (!program.endsWith('/node') || at < 0) {
    throw new Error(`ExecStart=${commandLine} is not "node [--flags] <script> [args]": update parseExecStart with the unit`);
  }
  return { program, nodeFlags: rest.slice(0, at), script: rest[at]!, args: rest.slice(at + 1) };
}

/** The one ExecStart= line of a unit file's text. */
export function execStartOf(unitText: string): ExecStart {
  const lines = [...unitText.matchAll(/^ExecStart=(.*)$/gm)];
  if (lines.length !== 1) throw new Error(`expected one ExecStart= line in the unit, found ${lines.length}`);
  return parseExecStart(lines[0]![1]!);
}

/** The variables of a unit's Environment= lines (unquoted NAME=value words, as the unit writes them). */
export function environmentOf(unitText: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [, line = ''] of unitText.matchAll(/^Environment=(.*)$/gm)) {
    for (const word of line.trim().split(/\s+/)) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=([^"'\s]*)$/.exec(word);
      if (!m) throw new Error(`Environment=${line}: "${word}" is not an unquoted NAME=value: update environmentOf with the unit`);
      env[m[1]!] = m[2]!;
    }
  }
  return env;
}
