// Durations in milliseconds, so a test reads like the schedule it checks (`2 * H`, `30 * S`).
export const S = 1_000;
export const MIN = 60 * S;
export const H = 60 * MIN;
export const D = 24 * H;
