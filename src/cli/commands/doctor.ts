import { CHECK_NAMES, DEFAULT_CHECK_TIMEOUT_MS, runDoctor, type CheckResult } from '../../doctor/doctor.js';
import { defineCommand } from '../frame/command.js';
import { Exit } from '../frame/exit.js';
import { printable } from '../printable.js';

const USAGE = 'usage: botlink doctor [--config FILE]';
const HELP = `Field diagnostics. Runs these checks in order, each within ${DEFAULT_CHECK_TIMEOUT_MS / 1000} s, one line each:
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

/**
 * The last line, saying why the exit status is what it is: `13 checks, 0 failed, 1 skipped: exit 1,
 * a check was skipped (websocket), and a skipped check has not passed`.
 */
export function doctorSummary(
  results: readonly Pick<CheckResult, 'name' | 'status'>[],
  configUsable: boolean,
): { line: string; code: number } {
  const named = (status: CheckResult['status']): string[] => results.filter((r) => r.status === status).map((r) => r.name);
  const failed = named('fail');
  const skipped = named('skip');
  const counts = `${results.length} checks, ${failed.length} failed${skipped.length ? `, ${skipped.length} skipped` : ''}`;
  const list = (names: string[]): string => (names.length > 3 ? `${names.slice(0, 3).join(', ')}, …` : names.join(', '));
  if (failed.length + skipped.length === 0) return { line: `${counts}: exit 0, every check passed`, code: Exit.OK };
  if (!configUsable) {
    return { line: `${counts}: exit 78, the configuration or its secret file cannot be used (${list(failed)})`, code: Exit.CONFIG };
  }
  const why =
    failed.length > 0
      ? `${failed.length === 1 ? 'a check' : 'checks'} failed (${list(failed)})`
      : `${skipped.length === 1 ? 'a check was' : 'checks were'} skipped (${list(skipped)}), and a skipped check has not passed`;
  return { line: `${counts}: exit 1, ${why}`, code: Exit.FAILURE };
}

/** `botlink doctor`: one line per check, a summary, and an exit status for scripts: its verdict is its answer. */
export const doctor = defineCommand({
  usage: USAGE,
  help: HELP,
  flags: { config: { type: 'string' } },
  // A check that overran may still wait on a DNS request or a socket: the verdict is out, do not wait for it.
  exitAtOnce: true,
  async run({ flags, stdout, env }) {
    const report = await runDoctor({
      ...(flags.config !== undefined && { configFile: flags.config }),
      env,
      // A check's detail may quote the cloud, the broker or the config: printable.
      onResult: (r) => stdout.write(`${printable(formatResult(r))}\n`),
    });
    const { line, code } = doctorSummary(report.results, report.configUsable);
    stdout.write(`${line}\n`);
    return code;
  },
});
