import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Exit } from '../../../src/cli/frame/exit.js';
import { runCli } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { useHarness } from '../../helpers/harness.js';
import { signalAtLine } from '../../helpers/signal-probe.js';

const { tempDir } = useHarness();

/** Where each step of `order` first appears in `out`, each after the one before; -1 from the first missing one on. */
function stepPositions(order: readonly string[], out: string): number[] {
  let at = 0;
  return order.map((step) => {
    const found = at < 0 ? -1 : out.indexOf(step, at);
    at = found < 0 ? -1 : found + step.length;
    return found;
  });
}

describe('botlink demo', () => {
  it('--sign shows provision → sign → connect → refresh → re-sign → reconnect after a forced drop, the app conversing across it, then stops on SIGTERM', async () => {
    const order = [
      'reference token service listening',
      'registered as bot-',
      'link connected',
      'token refreshed',
      'drops every WebSocket',
      'link backoff',
      'link connected',
      'token signed',
    ];
    const positions = (out: string): number[] => stepPositions(order, out);
    const replyLine = /app: ← "you said: hello from the demo app, round \d+"/;
    const replyAfterReturn = (out: string): boolean => {
      const back = out.indexOf('app: LINK_STATE connected', out.indexOf('drops every WebSocket'));
      return back >= 0 && replyLine.test(out.slice(back));
    };
    // Stopped once it has shown everything (a re-sign falls due ~26 s in, the first drop at 20 s), not after
    // a fixed time a loaded machine could spend before the last step.
    const run = await runCli(['demo', '--sign'], {
      until: (out) => !positions(out).includes(-1) && replyAfterReturn(out),
      timeoutMs: 90_000,
    });
    expect(run.code, run.stderr).toBe(0);
    const out = run.stdout;
    const at = positions(out);
    for (const [i, step] of order.entries()) expect(at[i], `"${step}" after "${order[i - 1]}" in:\n${out}`).toBeGreaterThanOrEqual(0);
    expect(out.indexOf('demo: summary'), out).toBeGreaterThan(at.at(-1)!);
    // The app, a process of its own, converses before the drop, sees the link go and come back, and converses after it.
    const drop = out.indexOf('drops every WebSocket');
    const back = out.indexOf('app: LINK_STATE connected', drop);
    const replies = [...out.matchAll(new RegExp(replyLine, 'g'))].map((m) => m.index);
    expect(
      replies.some((at) => at < drop),
      `an app round before the drop in:\n${out}`,
    ).toBe(true);
    expect(out.indexOf('app: LINK_STATE backoff', drop), out).toBeGreaterThan(drop);
    expect(back, out).toBeGreaterThan(drop);
    expect(
      replies.some((at) => at > back),
      `an app round after the link came back in:\n${out}`,
    ).toBe(true);
    expect(out).toContain('app: relay closed (1001');

    const summary = /registered=1 signed=(\d+) refreshed=(\d+) reconnects=(\d+) appRounds=(\d+)/.exec(out);
    expect(summary).not.toBeNull();
    expect(Number(summary![1])).toBeGreaterThanOrEqual(3);
    expect(Number(summary![2])).toBeGreaterThanOrEqual(2);
    expect(Number(summary![3])).toBeGreaterThanOrEqual(1);
    expect(Number(summary![4])).toBe(replies.length);
    expect(out).not.toContain('demo-secret-key');
  }, 120_000);

  it('by default runs the way a fleet should: the broker signs, the device enrolls its own key, holds no secret, and converses; a second board enrolls zero-touch', async () => {
    const order = [
      'reference token service listening',
      "the vendor's broker listening",
      "the operator's console is http://127.0.0.1:",
      'one-use enrollment code',
      'the device enrolled its own key',
      'hold no account secret',
      'link connected',
      'token issued by the broker',
      'token issued by the broker',
      'drops every WebSocket',
      'link connected',
    ];
    // A second board beside it, zero-touch: pending with its keyId, accepted by the operator, connected on its
    // next ask (the demo broker's Retry-After, 10 s, plus up to 20 %): done before the first drop's reconnect.
    const zeroTouch = [
      'a second board, demo-device-0002, boots',
      'key waits for an operator',
      'demo-device-0002 waits, pending, showing keyId',
      'the operator accepted keyId',
      'enrollment repeated',
      'demo-device-0002 enrolled zero-touch and connected',
    ];
    const positions = (out: string): number[] => stepPositions(order, out);
    const zeroTouchAt = (out: string): number[] => stepPositions(zeroTouch, out);
    // The summary tells the second board's link as the demo stops: stopped only once both boards are connected
    // again after the last drop (two links up since it), not while one is still in its backoff.
    const bothBack = (out: string): boolean => {
      const drop = out.lastIndexOf('drops every WebSocket');
      return drop >= 0 && out.slice(drop).split('link connected').length - 1 >= 2;
    };
    const run = await runCli(['demo'], {
      until: (out) => !positions(out).includes(-1) && !zeroTouchAt(out).includes(-1) && /app: ← "you said/.test(out) && bothBack(out),
      timeoutMs: 150_000,
    });
    expect(run.code, run.stderr).toBe(0);
    const out = run.stdout;
    for (const [i, at] of positions(out).entries())
      expect(at, `"${order[i]}" after "${order[i - 1]}" in:\n${out}`).toBeGreaterThanOrEqual(0);
    for (const [i, at] of zeroTouchAt(out).entries())
      expect(at, `"${zeroTouch[i]}" after "${zeroTouch[i - 1]}" in:\n${out}`).toBeGreaterThanOrEqual(0);
    const keyId = /demo-device-0002 waits, pending, showing keyId ([0-9a-f]{32})/.exec(out)?.[1];
    expect(out).toContain(`the operator accepted keyId ${keyId} for demo-device-0002 through the admin API`);
    // The operator's token is in a file of the vendor's folder, never in the log; the accept is audited as its name.
    expect(out).toMatch(
      /console is http:\/\/127\.0\.0\.1:\d+\/admin\/ while the demo runs: sign in with the admin token in \S+\/vendor\/admin-token/,
    );
    expect(out).not.toContain('blk_');
    expect(out).toMatch(
      new RegExp(`audit=accept\\b.*actor=demo-operator.*keyId=${keyId}|audit=accept\\b.*keyId=${keyId}.*actor=demo-operator`),
    );
    expect(out).toMatch(/demo: summary mode=broker deviceFilesHoldingTheSecret=0 zeroTouchBoard=connected registered=2 signed=\d+/);
    expect(out).not.toContain('rate-limited');
    expect(out).not.toContain('demo-secret-key');
  }, 180_000);

  it('handles a SIGTERM the instant its first line is out: its handler is in place, and it stops cleanly, exit 0', async () => {
    const run = await runCli(['demo'], { env: cleanEnv(signalAtLine('reference token service listening')), timeoutMs: 30_000 });
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('demo: summary');
  }, 45_000);

  it('stops by itself after --duration S, its folder gone', async () => {
    const tmp = tempDir('botlink-demo-tmp-');
    const run = await runCli(['demo', '--duration', '2'], { env: cleanEnv({ TMPDIR: tmp }), timeoutMs: 30_000 });
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('demo: running for 2 s');
    expect(run.stdout).toContain('demo: summary');
    expect(readdirSync(tmp)).toEqual([]);
  }, 45_000);

  it('a demo that cannot start (a temp folder too deep for its socket) says why and leaves no folder behind', async () => {
    const tmp = join(tempDir('botlink-demo-tmp-'), 'd'.repeat(90));
    mkdirSync(tmp);
    const run = await runCli(['demo'], { env: cleanEnv({ TMPDIR: tmp }), timeoutMs: 30_000 });
    expect(run.code, run.stdout).toBe(Exit.CONFIG);
    expect(run.stderr).toMatch(/^botlink demo: cannot start: .*runtimeDir.* is over 107 bytes/);
    expect(run.stderr).toContain('TMPDIR=/tmp botlink demo');
    expect(run.stderr).not.toMatch(/^\s+at /m);
    expect(readdirSync(tmp)).toEqual([]);
  }, 45_000);
});
