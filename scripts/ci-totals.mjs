// The totals of a CI run, for .ci/run: node scripts/ci-totals.mjs <results-dir> <failed-steps> "<N passed, M failed>"
// <results-dir> holds, for each vitest suite, <suite>.rc (its exit code) and <suite>.json (its JSON report);
// the last argument is the runtimes' own totals line. Prints "N passed, M failed" last and exits 1 on any failure.
// Just before it, every failed test of every report in the directory (the runtimes' copies too, which are not
// counted here: their totals line is) is named with the first line of its error, so the tail of a red run says
// what to look at.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The JSON report `name`.json in dir, read once: `{ report }`, or `{ problem }` saying why there is none. */
function readReport(dir, name) {
  const file = join(dir, `${name}.json`);
  if (!existsSync(file) || readFileSync(file).length === 0) return { problem: 'produced no report' };
  try {
    return { report: JSON.parse(readFileSync(file, 'utf8')) };
  } catch (err) {
    return { problem: `wrote an unreadable report (${err.message})` };
  }
}

/** One suite's counts; `note` says why the suite failed as a whole, if it did. */
function suiteTotals(dir, name, { report, problem }) {
  if (problem) return { passed: 0, failed: 1, note: `suite ${name} ${problem}` };
  const rc = Number(readFileSync(join(dir, `${name}.rc`), 'utf8'));
  // A test file that fails to load reports no tests: count it as one failure.
  const unloaded = report.testResults.filter((t) => t.status === 'failed' && t.assertionResults.length === 0).length;
  let failed = report.numFailedTests + unloaded;
  let note;
  // A suite that failed with every test green (an unhandled error) failed as a whole.
  if (rc !== 0 && report.numFailedTests === 0) {
    failed += 1;
    note = `suite ${name} exited ${rc} with no failing test: counted as one failure`;
  }
  return { passed: report.numPassedTests, failed, note };
}

/** The first non-blank line of an error text, trimmed and cut at 300 characters. */
function firstLine(text) {
  const line = (text ?? '').split('\n').find((l) => l.trim() !== '') ?? '';
  return line.trim().slice(0, 300);
}

/** `::: failed …` lines for one report: its failed tests, and its test files that failed to load. */
function failureLines(label, report) {
  const lines = [];
  for (const f of report.testResults ?? []) {
    const where = relative(process.cwd(), f.name ?? '?');
    const failedTests = (f.assertionResults ?? []).filter((a) => a.status === 'failed');
    for (const a of failedTests) lines.push(`::: failed [${label}] ${where} > ${a.fullName}: ${firstLine(a.failureMessages?.[0])}`);
    if (f.status === 'failed' && failedTests.length === 0) lines.push(`::: failed [${label}] ${where}: ${firstLine(f.message)}`);
  }
  return lines;
}

const [dir, steps, runtimes] = process.argv.slice(2);
const counts = /^(\d+) passed, (\d+) failed$/.exec(runtimes ?? '');
if (!dir || !/^\d+$/.test(steps ?? '') || !counts) {
  console.error('usage: node scripts/ci-totals.mjs <results-dir> <failed-steps> "<N passed, M failed>"');
  process.exit(64);
}
let passed = Number(counts[1]);
let failed = Number(counts[2]) + Number(steps);
// Suites have an exit code beside their report; the runtimes' copies are reports only (counted in their totals line).
const files = new Set(readdirSync(dir));
const names = new Set([...files].flatMap((f) => (/\.(rc|json)$/.test(f) ? [f.replace(/\.(rc|json)$/, '')] : [])));
const reports = new Map([...names].sort().map((name) => [name, readReport(dir, name)]));
for (const [name, read] of reports) {
  if (!files.has(`${name}.rc`)) continue;
  const s = suiteTotals(dir, name, read);
  if (s.note) console.log(`::: ${s.note}`);
  passed += s.passed;
  failed += s.failed;
}
for (const [name, { report }] of reports) if (report) for (const line of failureLines(name, report)) console.log(line);
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;
