import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { MetricsFile } from '../../../src/agent/daemon/metrics-file.js';
import { replaceFile, tempNameFor } from '../../../src/agent/daemon/replace-file.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const { cleanups, tempDir } = useHarness();

/** A folder with a file nobody but its owner should ever change: what a planted link would aim at. */
function folderWithVictim(): { dir: string; file: string; victim: string } {
  const dir = tempDir('replace-file-');
  const victim = join(dir, 'victim');
  writeFileSync(victim, 'not yours\n', { mode: 0o600 });
  return { dir, file: join(dir, 'botlink.prom'), victim };
}

/** The process's umask for one test, as the unit's UMask= sets it for the daemon. */
function withUmask(mask: number): void {
  const old = process.umask(mask);
  cleanups.push(() => process.umask(old));
}

describe('replaceFile: metricsFile in a folder others may write (issue 27 LOW)', () => {
  it('gives the file exactly its mode under the unit umask 0077, and leaves nothing else behind', () => {
    withUmask(0o077);
    const { dir, file } = folderWithVictim();
    replaceFile(file, 'botlink_up 1\n', { mode: 0o644, durable: true });
    expect(readFileSync(file, 'utf8')).toBe('botlink_up 1\n');
    expect(statSync(file).mode & 0o777).toBe(0o644);
    replaceFile(file, 'botlink_up 2\n', { mode: 0o644, durable: true });
    expect(readFileSync(file, 'utf8')).toBe('botlink_up 2\n');
    expect(readdirSync(dir).sort()).toEqual(['botlink.prom', 'victim']);
  });

  it('names each temp file at random, beside the file', () => {
    const names = new Set(Array.from({ length: 100 }, () => tempNameFor('/x/botlink.prom')));
    expect(names.size).toBe(100);
    for (const name of names) expect(name).toMatch(/^\/x\/botlink\.prom\.[0-9a-f]{16}\.tmp$/);
  });

  it('refuses a link planted at the temp name instead of writing through it, and leaves the link alone', () => {
    const { dir, file, victim } = folderWithVictim();
    const temp = `${file}.planted.tmp`;
    symlinkSync(victim, temp);
    expect(() => replaceFile(file, 'botlink_up 1\n', { mode: 0o644, durable: true, temp })).toThrow(
      expect.objectContaining({ code: 'EEXIST' }),
    );
    expect(readFileSync(victim, 'utf8')).toBe('not yours\n');
    expect(statSync(victim).mode & 0o777).toBe(0o600);
    expect(readlinkSync(temp)).toBe(victim);
    expect(existsSync(file)).toBe(false);
    expect(readdirSync(dir).sort()).toEqual(['botlink.prom.planted.tmp', 'victim']);
  });

  it('refuses a dangling link at the temp name: nothing is created where it points', () => {
    const { file } = folderWithVictim();
    const aim = join(dirname(file), 'created-through-the-link');
    const temp = `${file}.planted.tmp`;
    symlinkSync(aim, temp);
    expect(() => replaceFile(file, 'x 1\n', { mode: 0o644, durable: false, temp })).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(existsSync(aim)).toBe(false);
  });

  it('replaces a link planted at the file itself, never the file it points to', () => {
    const { file, victim } = folderWithVictim();
    symlinkSync(victim, file);
    replaceFile(file, 'botlink_up 1\n', { mode: 0o644, durable: true });
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('botlink_up 1\n');
    expect(readFileSync(victim, 'utf8')).toBe('not yours\n');
  });

  it('removes its temp file when the rename fails', () => {
    const { dir, file } = folderWithVictim();
    // A folder (not empty) where the file should be: the rename over it fails after the temp file was written.
    mkdirSync(join(file, 'inside'), { recursive: true });
    expect(() => replaceFile(file, 'botlink_up 1\n', { mode: 0o644, durable: true })).toThrow();
    expect(readdirSync(dir).sort()).toEqual(['botlink.prom', 'victim']);
  });

  it('MetricsFile no longer writes through the old predictable temp name (<file>.<pid>.tmp), planted as a link', () => {
    const { dir, file, victim } = folderWithVictim();
    symlinkSync(victim, `${file}.${process.pid}.tmp`);
    const writer = new MetricsFile(file, new ManualClock(), pino({ level: 'silent' }), () => 'botlink_up 1\n');
    writer.start();
    writer.stop();
    expect(readFileSync(victim, 'utf8')).toBe('not yours\n');
    expect(readFileSync(file, 'utf8')).toBe('botlink_up 1\n');
    expect(statSync(file).mode & 0o777).toBe(0o644);
    expect(readdirSync(dir).sort()).toEqual(['botlink.prom', `botlink.prom.${process.pid}.tmp`, 'victim']);
  });
});
