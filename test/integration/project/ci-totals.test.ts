import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../../helpers/harness.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/ci-totals.mjs', import.meta.url));
const { tempDir } = useHarness();

/** The fields of a vitest JSON report the totals read; `unloaded` test files failed before running any test. */
function report(passed: number, failed: number, unloaded = 0): string {
  const failures = Array.from({ length: failed }, (_, i) => ({ fullName: `t${i}`, status: 'failed', failureMessages: ['Error: no'] }));
  const loaded = {
    name: join(process.cwd(), 'test/unit/loaded.test.ts'),
    status: failed > 0 ? 'failed' : 'passed',
    assertionResults: [{ fullName: 'ok', status: 'passed', failureMessages: [] }, ...failures],
  };
  const broken = Array.from({ length: unloaded }, (_, i) => ({
    name: join(process.cwd(), `test/unit/broken-${i}.test.ts`),
    status: 'failed',
    message: 'Error: cannot load',
    assertionResults: [],
  }));
  return JSON.stringify({ numPassedTests: passed, numFailedTests: failed, testResults: [loaded, ...broken] });
}

/** A results dir as .ci/run leaves it: per suite an exit code and, unless undefined, a report. */
function results(suites: Record<string, { rc: number; report: string | undefined }>): string {
  const dir = tempDir('botlink-ci-totals-');
  for (const [name, s] of Object.entries(suites)) {
    writeFileSync(join(dir, `${name}.rc`), `${s.rc}\n`);
    if (s.report !== undefined) writeFileSync(join(dir, `${name}.json`), s.report);
  }
  // .ci/run keeps other files there too: they are not suites.
  writeFileSync(join(dir, 'runtimes.txt'), '1 passed, 0 failed\n');
  return dir;
}

function totals(dir: string, steps: string, runtimes: string) {
  const r = spawnSync(process.execPath, [SCRIPT, dir, steps, runtimes], { encoding: 'utf8' });
  return { status: r.status, lines: r.stdout.trim().split('\n'), stderr: r.stderr };
}

describe('scripts/ci-totals.mjs (the last line of .ci/run)', () => {
  it('adds the suites to the runtimes and exits 0 when all passed', () => {
    const dir = results({ test: { rc: 0, report: report(300, 0) }, 'test:long': { rc: 0, report: report(40, 0) } });
    const r = totals(dir, '0', '600 passed, 0 failed');
    expect(r).toEqual({ status: 0, lines: ['940 passed, 0 failed'], stderr: '' });
  });

  it('counts failed tests, unloaded files, failed steps, and a suite that failed whole, and exits 1', () => {
    const dir = results({
      test: { rc: 1, report: report(290, 3, 1) },
      'test:long': { rc: 1, report: report(40, 0) },
      'test:package': { rc: 1, report: undefined },
      empty: { rc: 0, report: '' },
      torn: { rc: 1, report: '{"numPassedTests": 4' },
    });
    const r = totals(dir, '2', '500 passed, 1 failed');
    expect(r.status).toBe(1);
    expect(r.lines.slice(0, -1).sort()).toEqual([
      '::: failed [test] test/unit/broken-0.test.ts: Error: cannot load',
      '::: failed [test] test/unit/loaded.test.ts > t0: Error: no',
      '::: failed [test] test/unit/loaded.test.ts > t1: Error: no',
      '::: failed [test] test/unit/loaded.test.ts > t2: Error: no',
      '::: suite empty produced no report',
      '::: suite test:long exited 1 with no failing test: counted as one failure',
      '::: suite test:package produced no report',
      expect.stringMatching(/^::: suite torn wrote an unreadable report \(.+\)$/),
    ]);
    // 1 (runtimes) + 2 (steps) + 3 + 1 unloaded (test) + 1 (test:long) + 1 (test:package) + 1 (empty) + 1 (torn)
    expect(r.lines.at(-1)).toBe('830 passed, 11 failed');
  });

  it("names every failed test of every report, the runtimes' uncounted copies too, with the first line of its error", () => {
    const failing = (file: string, tests: { fullName: string; status: string; failureMessages: string[] }[], message = '') => ({
      name: join(process.cwd(), file),
      status: 'failed',
      message,
      assertionResults: tests,
    });
    const dir = results({
      test: {
        rc: 1,
        report: JSON.stringify({
          numPassedTests: 1,
          numFailedTests: 1,
          testResults: [
            failing('test/unit/a.test.ts', [
              { fullName: 'a works', status: 'passed', failureMessages: [] },
              { fullName: 'a fails', status: 'failed', failureMessages: ['\nAssertionError: expected 1 to be 2\n    at x.ts:1'] },
            ]),
            failing('test/unit/b.test.ts', [], 'SyntaxError: Unexpected token\nmore'),
          ],
        }),
      },
    });
    // test-runtimes.sh's report for Node 20, copied beside them by .ci/run: listed, not counted (its totals line is).
    writeFileSync(
      join(dir, 'node-20.json'),
      JSON.stringify({
        numPassedTests: 0,
        numFailedTests: 1,
        testResults: [
          failing('test/x.test.ts', [{ fullName: 'x times out', status: 'failed', failureMessages: ['Error: Test timed out in 5000ms.'] }]),
        ],
      }),
    );
    const r = totals(dir, '0', '0 passed, 1 failed');
    expect(r.status).toBe(1);
    expect(r.lines).toEqual([
      '::: failed [node-20] test/x.test.ts > x times out: Error: Test timed out in 5000ms.',
      '::: failed [test] test/unit/a.test.ts > a fails: AssertionError: expected 1 to be 2',
      '::: failed [test] test/unit/b.test.ts: SyntaxError: Unexpected token',
      '1 passed, 3 failed',
    ]);
  });

  it('refuses arguments it cannot read, naming the usage', () => {
    const r = totals(tempDir('botlink-ci-totals-'), '0', 'test-runtimes printed nothing');
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('usage: node scripts/ci-totals.mjs <results-dir> <failed-steps> "<N passed, M failed>"');
  });
});
