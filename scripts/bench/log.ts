// The cost of one log line: ns per `logger.info({…nested…}, msg)` through createLogger (redaction and
// all) against bare pino writing the same line to the same kind of destination, alternating rounds.
// `node scripts/bench/run.mjs log [calls]`; writes to a scratch file (as the daemon does) and /dev/null.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { createLogger } from '../../src/log.js';
import { median } from '../lib/stats.js';
import { scratchDir } from './root.js';

const CALLS = Number(process.argv[2] ?? 100_000);
const ROUNDS = 7;
const WARM_UP = 10_000;

/** A line like the link's: a few scalars, a nested object, an array; no secret, so nothing is cut. */
const fields = (i: number) => ({
  botId: 'bot-1',
  attempt: i,
  link: { url: 'wss://voice.example/v1/chat', timing: { connectMs: 12.5, tls: true }, state: 'connected' },
  counts: [1, 2, 3],
});

interface Subject {
  log(i: number): void;
  flush(): Promise<void>;
  close(): void;
}

function botlink(file: string): Subject {
  const logging = createLogger({ file, level: 'info', name: 'bench' });
  return { log: (i) => logging.logger.info(fields(i), 'link connected'), flush: logging.flush, close: logging.close };
}

function barePino(file: string): Subject {
  const dest = pino.destination({ dest: file, sync: false, mkdir: true });
  const logger = pino({ level: 'info', name: 'bench', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
  return {
    log: (i) => logger.info(fields(i), 'link connected'),
    flush: () => new Promise((resolve, reject) => dest.flush((err) => (err ? reject(err) : resolve()))),
    close: () => dest.end(),
  };
}

/** ns per call: `call` while the calls are made (what the caller pays), `written` until the last byte is out. */
async function round(subject: Subject, calls: number): Promise<{ call: number; written: number }> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) subject.log(i);
  const issued = process.hrtime.bigint();
  await subject.flush();
  const done = process.hrtime.bigint();
  return { call: Number(issued - start) / calls, written: Number(done - start) / calls };
}

async function measure(target: (name: string) => string, label: string): Promise<void> {
  const subjects = { botlink: botlink(target('botlink')), pino: barePino(target('pino')) };
  const results: Record<keyof typeof subjects, { call: number[]; written: number[] }> = {
    botlink: { call: [], written: [] },
    pino: { call: [], written: [] },
  };
  for (const s of Object.values(subjects)) await round(s, WARM_UP);
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of ['botlink', 'pino'] as const) {
      const { call, written } = await round(subjects[name], CALLS);
      results[name].call.push(call);
      results[name].written.push(written);
    }
  }
  for (const s of Object.values(subjects)) s.close();
  const b = results.botlink;
  const p = results.pino;
  const ratio = median(b.call) / median(p.call);
  process.stdout.write(
    `${label}: botlink ${median(b.call).toFixed(0)} ns/call (${median(b.written).toFixed(0)} to written), ` +
      `bare pino ${median(p.call).toFixed(0)} ns/call (${median(p.written).toFixed(0)}), ${ratio.toFixed(2)}× ` +
      `[medians of ${ROUNDS} rounds of ${CALLS} calls]\n`,
  );
}

const dir = scratchDir('bench-log');
try {
  await measure((name) => join(dir, `${name}.log`), 'file');
  await measure(() => '/dev/null', '/dev/null');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
