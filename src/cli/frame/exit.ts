/** sysexits.h codes used by every command (DESIGN §3.1). */
export const Exit = {
  OK: 0,
  FAILURE: 1,
  USAGE: 64,
  DATAERR: 65,
  UNAVAILABLE: 69,
  CONFIG: 78,
} as const;

/** A command-line mistake: printed with the usage line, exit 64. */
export class UsageError extends Error {}
