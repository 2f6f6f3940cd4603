/** Where a command writes its lines: a stream of the process, or what a test captures. */
export interface Output {
  write(text: string): unknown;
}

/** The environment a command reads (its config's variables): the process's, or one a caller gives. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * What a command reads and writes besides its arguments, handed to it by the frame: a command never
 * takes process.stdout, process.stderr or process.env itself, so a caller can run it in-process.
 */
export interface CommandIo {
  readonly stdout: Output;
  readonly stderr: Output;
  readonly env: Env;
}

/** The process's own: what `botlink` runs with. */
export function processIo(): CommandIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}
