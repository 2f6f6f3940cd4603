import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { METRICS_FILE_MS, MetricsFile } from '../../../src/agent/daemon/metrics-file.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const { tempDir } = useHarness();

describe('metricsFile (DESIGN §3.2)', () => {
  it('is written at start, every 60 s on the Clock, and once more at stop, through a temp file renamed over it', async () => {
    const dir = tempDir('metrics-file-');
    const file = join(dir, 'botlink.prom');
    const clock = new ManualClock();
    let scrape = 0;
    const writer = new MetricsFile(file, clock, pino({ level: 'silent' }), () => `botlink_test ${++scrape}\n`);
    writer.start();
    expect(readFileSync(file, 'utf8')).toBe('botlink_test 1\n');
    await clock.advance(METRICS_FILE_MS - 1);
    expect(readFileSync(file, 'utf8')).toBe('botlink_test 1\n');
    await clock.advance(1);
    expect(readFileSync(file, 'utf8')).toBe('botlink_test 2\n');
    writer.stop();
    expect(readFileSync(file, 'utf8')).toBe('botlink_test 3\n');
    await clock.advance(10 * METRICS_FILE_MS);
    expect(readFileSync(file, 'utf8')).toBe('botlink_test 3\n');
    // Only the .prom file: no temp file left for the collector to trip on.
    expect(readdirSync(dir)).toEqual(['botlink.prom']);
  });

  it('says once that it cannot write, and goes on trying', async () => {
    const clock = new ManualClock();
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const writer = new MetricsFile('/nonexistent-folder-x/botlink.prom', clock, log, () => 'x 1\n');
    writer.start();
    await clock.advance(3 * METRICS_FILE_MS);
    writer.stop();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('cannot write metricsFile');
  });
});
