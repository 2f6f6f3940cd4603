import type { Env } from '../../src/cli/frame/io.js';
import { main } from '../../src/cli/main.js';
import { capturedIo } from './captured-io.js';

/** `botlink …argv` run in this process with `env` (none by default): its exit code and what it wrote. */
export async function botlinkInProcess(argv: readonly string[], env: Env = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = capturedIo(env);
  const code = await main(argv, io);
  return { code, stdout: io.stdout.text, stderr: io.stderr.text };
}
