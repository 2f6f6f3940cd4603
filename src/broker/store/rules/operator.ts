/** The operator's rules that take more than one statement (OperatorBook), written once. */
import { type Body, run } from '../sql.js';
import { RESET_WINDOWS } from '../statements.js';

/** OperatorBook.resetLimits: every window of each prefix, in one transaction; how many. */
export function* resetLimitsTx(prefixes: readonly string[]): Body<number> {
  let cleared = 0;
  for (const prefix of prefixes) cleared += yield* run(RESET_WINDOWS, prefix);
  return cleared;
}
