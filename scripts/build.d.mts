export declare const BUNDLE: string;
export declare function buildBundle(outfile?: string): Promise<string>;
