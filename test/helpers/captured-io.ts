import type { CommandIo, Env } from '../../src/cli/frame/io.js';

/** An output that keeps what is written to it. */
export class Captured {
  text = '';

  write(text: string): void {
    this.text += text;
  }
}

/** The io of a command run in-process: its stdout and stderr kept, the environment given (none by default). */
export function capturedIo(env: Env = {}): CommandIo & { readonly stdout: Captured; readonly stderr: Captured } {
  return { stdout: new Captured(), stderr: new Captured(), env };
}
