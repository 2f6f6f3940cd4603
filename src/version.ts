declare const __BOTLINK_BUILD_TIME__: number | undefined;

export const VERSION = '0.2.0';

/** Wall-clock ms of this build (injected by scripts/build.mjs); a wall clock earlier than this is wrong. */
export const BUILD_TIME_MS: number =
  typeof __BOTLINK_BUILD_TIME__ === 'number' ? __BOTLINK_BUILD_TIME__ : Date.parse('2026-11-21T00:00:00Z');
