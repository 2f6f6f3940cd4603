import { CHECK_NAMES, DEFAULT_CHECK_TIMEOUT_MS, runDoctor, type CheckResult } from '../doctor/doctor.js';
import { parseFlags } from './common.js';
import { Exit } from './exit.js';

const USAGE = 'usage: botlink doctor [--config FILE]';
const HELP = `${USAGE}

Field diagnostics. Runs these checks in order, each within ${DEFAULT_CHECK_TIMEOUT_MS / 1000} s, one line each:
  ${CHECK_NAMES.join(', ')}

  ok    <check>: <detail>
  FAIL  <check>: <detail> — fix: <what to do>
  skip  <check>: <why it could not run>     (an earlier check failed; counts as not passing)

With a daemon running, the websocket check reports the daemon's link from status.json instead of
opening a second socket, which would displace the daemon's. Doctor never stores a token.

exit status: 0 every check passed; 1 a check failed or was skipped;
             78 the configuration or its secret file cannot be used (the other checks were skipped)`;

const LABEL = { ok: 'ok    ', fail: 'FAIL  ', skip: 'skip  ' } as const;

export function formatResult(r: CheckResult): string {
  const fix = r.status === 'fail' && r.fix ? ` — fix: ${r.fix}` : '';
  return `${LABEL[r.status]}${r.name}: ${r.detail}${fix}`;
}

/** `botlink doctor`: one line per check, a summary, and an exit status for scripts. */
export async function doctor(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, { config: { type: 'string' } }, USAGE);
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return Exit.OK;
  }
  const report = await runDoctor({
    ...(values.config !== undefined && { configFile: values.config }),
    env: process.env,
    onResult: (r) => process.stdout.write(`${formatResult(r)}\n`),
  });
  const failed = report.results.filter((r) => r.status === 'fail').length;
  const skipped = report.results.filter((r) => r.status === 'skip').length;
  process.stdout.write(`${report.results.length} checks, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  const code = failed + skipped === 0 ? Exit.OK : report.configUsable ? Exit.FAILURE : Exit.CONFIG;
  // A check that overran may still wait on a DNS request or a socket: the verdict is out, do not wait for it.
  if (report.timedOut) process.exit(code);
  return code;
}
