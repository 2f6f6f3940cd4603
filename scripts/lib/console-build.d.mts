import type { Plugin } from 'esbuild';

export interface ConsoleFile {
  text: string;
  /** The text's gzip, base64. */
  gzip: string;
}
export interface ConsoleAsset extends ConsoleFile {
  type: string;
}
export interface BuiltConsole {
  html: ConsoleFile;
  assets: Record<string, ConsoleAsset>;
}
export declare const CONSOLE_MODULE: string;
export declare function buildConsole(): Promise<BuiltConsole>;
export declare function consoleModuleSource(): Promise<string>;
export declare function consolePlugin(): Plugin;
export declare function consoleVitePlugin(): {
  name: string;
  resolveId(spec: string): string | undefined;
  load(id: string): Promise<string> | undefined;
};
