import diagnostics from 'node:diagnostics_channel';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { TimeReader } from '../../../src/clock.js';
import {
  checkTimeSync,
  DEFAULT_CHRONYC,
  DEFAULT_TIMEDATECTL,
  parseChronyTracking,
  findExecutable,
  runCommand,
  type CommandOutput,
  type CommandRunner,
  type TimeSyncOptions,
} from '../../../src/agent/time/timesync.js';

const FLOOR = Date.parse('2026-11-21T00:00:00Z');
const dir = mkdtempSync(join(tmpdir(), 'botlink-timesync-'));
const presentFile = join(dir, 'synchronized');
writeFileSync(presentFile, '');
const absentFile = join(dir, 'absent');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const clockAt = (wall: number): TimeReader => ({ wallNow: () => wall, monoNow: () => 0 });

/** A chrony -c tracking line with the given offset (field 5) and leap status (field 14). */
const chronyLine = (offset: string, leap: string): string =>
  `A29FC87B,ntp.example.net,3,1763683200.123456789,${offset},0.000001234,0.000030000,` +
  `-3.225,0.000,0.129,0.013639022,0.001100737,64.2,${leap}\n`;

type Reply = CommandOutput | undefined;

/** A runner that answers by program name (argv[0]) and records every call. */
function scripted(replies: { chronyc?: Reply; timedatectl?: Reply }) {
  const calls: Array<{ argv: readonly string[]; timeoutMs: number }> = [];
  const run: CommandRunner = async (argv, timeoutMs) => {
    calls.push({ argv, timeoutMs });
    return argv[0] === 'chronyc' ? replies.chronyc : replies.timedatectl;
  };
  return { run, calls };
}

function opts(over: Partial<TimeSyncOptions> = {}): TimeSyncOptions {
  return { clock: clockAt(FLOOR + 1000), floorMs: () => FLOOR, syncFile: absentFile, ...over };
}

const ok = (stdout: string): CommandOutput => ({ code: 0, stdout });

describe('checkTimeSync: floor', () => {
  it('a wall clock below the floor is unsynced, before any other source is asked', async () => {
    const { run, calls } = scripted({ chronyc: ok(chronyLine('0.0001', 'Normal')) });
    const result = await checkTimeSync(opts({ clock: clockAt(0), syncFile: presentFile, run }));
    expect(result).toMatchObject({ verdict: 'unsynced', source: 'floor' });
    expect(result.detail).toContain('1970-01-01T00:00:00.000Z');
    expect(calls).toEqual([]);
  });

  it('a wall clock at the floor lets the next source decide', async () => {
    const result = await checkTimeSync(opts({ clock: clockAt(FLOOR), syncFile: presentFile }));
    expect(result.source).toBe('timesyncd');
  });

  it('reads the floor at check time, so a later server-confirmed time raises it', async () => {
    let floor = FLOOR;
    const o = opts({ syncFile: presentFile, floorMs: () => floor });
    expect((await checkTimeSync(o)).source).toBe('timesyncd');
    floor = FLOOR + 60_000;
    expect((await checkTimeSync(o)).source).toBe('floor');
  });
});

describe('checkTimeSync: timesyncd flag file', () => {
  it('an existing file means synced and no command runs', async () => {
    const { run, calls } = scripted({});
    const result = await checkTimeSync(opts({ syncFile: presentFile, run }));
    expect(result).toEqual({ verdict: 'synced', source: 'timesyncd', detail: `${presentFile} exists` });
    expect(calls).toEqual([]);
  });

  it('an absent file does not answer', async () => {
    const { run, calls } = scripted({});
    expect(await checkTimeSync(opts({ run }))).toMatchObject({ verdict: 'unknown', source: 'none' });
    expect(calls.map((c) => c.argv)).toEqual([DEFAULT_CHRONYC, DEFAULT_TIMEDATECTL]);
  });
});

describe('checkTimeSync: chrony', () => {
  it.each([
    ['Normal, small offset', chronyLine('-0.000012345', 'Normal'), 'synced'],
    ['Insert second', chronyLine('0.000300000', 'Insert second'), 'synced'],
    ['Delete second', chronyLine('0.000300000', 'Delete second'), 'synced'],
    ['offset just under 1 s', chronyLine('-0.999999999', 'Normal'), 'synced'],
    ['Not synchronised', chronyLine('0.000000000', 'Not synchronised'), 'unsynced'],
    ['offset of exactly 1 s', chronyLine('1.000000000', 'Normal'), 'unsynced'],
    ['offset of -2.5 s', chronyLine('-2.500000000', 'Normal'), 'unsynced'],
  ])('%s → %s', async (_name, stdout, verdict) => {
    const { run, calls } = scripted({ timedatectl: ok('yes\n'), chronyc: ok(stdout) });
    const result = await checkTimeSync(opts({ run }));
    expect(result).toMatchObject({ verdict, source: 'chrony' });
    expect(result.detail).toMatch(/^chronyc: .+, offset -?[\d.e-]+ s$/);
    // chrony answered: timedatectl is not run.
    expect(calls.map((c) => c.argv)).toEqual([DEFAULT_CHRONYC]);
  });

  it.each<[string, Reply]>([
    ['command missing or timed out', undefined],
    ['nonzero exit', { code: 1, stdout: chronyLine('0', 'Normal') }],
    ['killed by a signal', { code: null, stdout: '' }],
    ['empty output', ok('')],
    ['too few fields', ok('A29FC87B,ntp.example.net,3\n')],
    ['offset not a number', ok(chronyLine('fast', 'Normal'))],
    ['empty offset', ok(chronyLine('', 'Normal'))],
    ['unknown leap status', ok(chronyLine('0.0001', 'Invalid'))],
    ['human-readable output', ok('Reference ID    : A29FC87B (ntp.example.net)\nLeap status     : Normal\n')],
  ])('%s → does not answer, timedatectl decides', async (_name, chronyc) => {
    const { run } = scripted({ chronyc, timedatectl: ok('no\n') });
    expect(await checkTimeSync(opts({ run }))).toMatchObject({ verdict: 'unsynced', source: 'timedated' });
  });
});

describe('checkTimeSync: timedatectl', () => {
  it.each<[string, Reply, string, string]>([
    ['yes', ok('yes\n'), 'synced', 'timedated'],
    ['no', ok('no\n'), 'unsynced', 'timedated'],
    ['other text', ok('maybe\n'), 'unknown', 'none'],
    ['empty output', ok(''), 'unknown', 'none'],
    ['nonzero exit', { code: 1, stdout: 'yes\n' }, 'unknown', 'none'],
    ['command missing or timed out', undefined, 'unknown', 'none'],
  ])('%s → %s (%s)', async (_name, timedatectl, verdict, source) => {
    const { run } = scripted({ timedatectl });
    expect(await checkTimeSync(opts({ run }))).toMatchObject({ verdict, source });
  });

  it('says which source decided in one line', async () => {
    const { run } = scripted({ timedatectl: ok('yes\n') });
    expect((await checkTimeSync(opts({ run }))).detail).toBe('timedatectl: NTPSynchronized=yes');
  });
});

describe('checkTimeSync: in order, or the tools at once', () => {
  /** A runner on which chronyc answers only when the test says so, and timedatectl at once. */
  function held(chronyc: Reply) {
    const started: string[] = [];
    let answerChrony!: () => void;
    let firstCall!: () => void;
    const called = new Promise<void>((resolve) => (firstCall = resolve));
    const run: CommandRunner = async (argv) => {
      started.push(argv[0]!);
      firstCall();
      if (argv[0] !== 'chronyc') return ok('yes\n');
      await new Promise<void>((resolve) => (answerChrony = resolve));
      return chronyc;
    };
    return { run, started, called, answerChrony: () => answerChrony() };
  }

  it.each<[string, boolean, Reply, string[], string[], string]>([
    ['in order, chrony answers', false, ok(chronyLine('0.0001', 'Normal')), ['chronyc'], ['chronyc'], 'chrony'],
    ['in order, chrony does not', false, undefined, ['chronyc'], ['chronyc', 'timedatectl'], 'timedated'],
    ['at once, chrony answers', true, ok(chronyLine('0.0001', 'Normal')), ['chronyc', 'timedatectl'], ['chronyc', 'timedatectl'], 'chrony'],
    ['at once, chrony does not', true, undefined, ['chronyc', 'timedatectl'], ['chronyc', 'timedatectl'], 'timedated'],
  ])('%s', async (_name, atOnce, chronyc, beforeChronyAnswers, all, source) => {
    const h = held(chronyc);
    const result = checkTimeSync(opts({ run: h.run }), atOnce);
    await h.called;
    expect(h.started).toEqual(beforeChronyAnswers);
    h.answerChrony();
    expect(await result).toMatchObject({ source });
    expect(h.started).toEqual(all);
  });
});

describe('checkTimeSync: options', () => {
  it('passes the default 2 s timeout, or the configured one, to every command', async () => {
    const a = scripted({});
    await checkTimeSync(opts({ run: a.run }));
    expect(a.calls.map((c) => c.timeoutMs)).toEqual([2000, 2000]);
    const b = scripted({});
    await checkTimeSync(opts({ run: b.run, timeoutMs: 150 }));
    expect(b.calls.map((c) => c.timeoutMs)).toEqual([150, 150]);
  });

  it('runs the configured commands', async () => {
    const run = vi.fn<CommandRunner>(async () => undefined);
    await checkTimeSync(opts({ run, chronyc: ['/opt/chronyc', 'tracking'], timedatectl: ['/opt/td'] }));
    expect(run.mock.calls.map((c) => c[0])).toEqual([['/opt/chronyc', 'tracking'], ['/opt/td']]);
  });
});

describe('parseChronyTracking', () => {
  it('reads the system time offset (field 5) and leap status (field 14)', () => {
    expect(parseChronyTracking(chronyLine('-0.000012345', 'Not synchronised'))).toEqual({
      leap: 'Not synchronised',
      offsetS: -0.000012345,
    });
  });
});

/** argv running a tiny node script as a stand-in for chronyc / timedatectl. */
const nodeScript = (source: string): string[] => [process.execPath, '-e', source];

describe('runCommand and checkTimeSync with real child processes', () => {
  it('captures stdout and the exit code', async () => {
    expect(await runCommand(nodeScript('process.stdout.write("hi\\n")'), 5000)).toEqual({ code: 0, stdout: 'hi\n' });
    expect(await runCommand(nodeScript('process.stdout.write("x"); process.exit(3)'), 5000)).toEqual({
      code: 3,
      stdout: 'x',
    });
  });

  it('a missing program or an empty argv could not run, and no process is started to learn it', async () => {
    const spawned: unknown[] = [];
    const onSpawn = (message: unknown): void => void spawned.push(message);
    diagnostics.subscribe('child_process', onSpawn);
    try {
      expect(await runCommand([join(dir, 'no-such-program')], 5000)).toBeUndefined();
      expect(await runCommand(['botlink-no-such-tool'], 5000)).toBeUndefined();
      expect(await runCommand([], 5000)).toBeUndefined();
      expect(spawned).toHaveLength(0);
      // The channel does see the runner's processes: a tool that exists is started once.
      await runCommand(nodeScript('0'), 5000);
      expect(spawned).toHaveLength(1);
    } finally {
      diagnostics.unsubscribe('child_process', onSpawn);
    }
  });

  it('finds a tool by path or on PATH, and only an executable one', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'botlink-path-'));
    const other = mkdtempSync(join(tmpdir(), 'botlink-path-'));
    try {
      writeFileSync(join(bin, 'chronyc'), '#!/bin/sh\n', { mode: 0o755 });
      writeFileSync(join(other, 'chronyc'), 'not executable', { mode: 0o644 });
      expect(await findExecutable('chronyc', `${other}:${bin}`)).toBe(join(bin, 'chronyc'));
      expect(await findExecutable('chronyc', `${bin}:${other}`)).toBe(join(bin, 'chronyc'));
      expect(await findExecutable('chronyc', other)).toBeUndefined();
      expect(await findExecutable('chronyc', '')).toBeUndefined();
      expect(await findExecutable(join(bin, 'chronyc'), '')).toBe(join(bin, 'chronyc'));
      expect(await findExecutable(join(other, 'chronyc'), bin)).toBeUndefined();
    } finally {
      rmSync(bin, { recursive: true, force: true });
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('a program that outlives the timeout is killed and could not run', async () => {
    const started = performance.now();
    expect(await runCommand(nodeScript('setTimeout(() => {}, 30000)'), 300)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('the default runner drives chrony: a real CSV line decides', async () => {
    const csv = JSON.stringify(chronyLine('0.000300000', 'Normal'));
    const result = await checkTimeSync(
      // A time limit no fresh node misses however busy the machine: only the hung case below tests one.
      opts({ timeoutMs: 10_000, chronyc: nodeScript(`process.stdout.write(${csv})`), timedatectl: nodeScript('process.exit(1)') }),
    );
    expect(result).toEqual({ verdict: 'synced', source: 'chrony', detail: 'chronyc: Normal, offset 0.0003 s' });
  });

  it('the default runner falls through a failing chronyc and a hung one to timedatectl', async () => {
    const failing = await checkTimeSync(
      opts({
        timeoutMs: 10_000,
        chronyc: nodeScript('console.log("506 Cannot talk to daemon"); process.exit(1)'),
        timedatectl: nodeScript('console.log("no")'),
      }),
    );
    expect(failing).toMatchObject({ verdict: 'unsynced', source: 'timedated' });
    const hung = await checkTimeSync(
      opts({
        // Each source gets the whole timeout: timedatectl (a fresh node) must start within it on a busy machine.
        timeoutMs: 3000,
        chronyc: nodeScript('setTimeout(() => {}, 30000)'),
        timedatectl: nodeScript('console.log("yes")'),
      }),
    );
    expect(hung).toMatchObject({ verdict: 'synced', source: 'timedated' });
  });

  it('with no source at all the verdict is unknown', async () => {
    const missing = join(dir, 'no-such-program');
    const result = await checkTimeSync(opts({ chronyc: [missing], timedatectl: [missing] }));
    expect(result).toMatchObject({ verdict: 'unknown', source: 'none' });
  });
});
