// The operator's console, built from src/console by scripts/lib/console-build.mjs and embedded in the CLI bundle
// (scripts/build.mjs; vitest's configs for in-process tests): the page and its assets, each with its gzip (base64).
declare module 'botlink:console' {
  export const page: { text: string; gzip: string };
  export const assets: Record<string, { type: string; text: string; gzip: string }>;
}
