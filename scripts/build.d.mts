import type { BuildOptions } from 'esbuild';

export declare const BUNDLE: string;
export declare const NATIVE_PACKAGES: readonly string[];
export declare function bundleOptions(): BuildOptions;
export declare function scriptOptions(): BuildOptions;
export declare function buildBundle(outfile?: string): Promise<string>;
export declare function appFileOf(entry: string): string;
export declare function daemonFileOf(entry: string): string;
export declare function appFilesOf(entry: string): string[];
