import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/daemon-proc.js';
import { cleanEnv } from '../helpers/env.js';
import { signalAtLine } from '../helpers/signal-probe.js';

describe('botlink demo', () => {
  it('shows provision → sign → connect → refresh → re-sign → reconnect after a forced drop, the app conversing across it, then stops by itself', async () => {
    const run = await runCli(['demo', '--duration', '28'], { timeoutMs: 45_000 });
    expect(run.code).toBe(0);
    const out = run.stdout;
    const order = [
      'reference token service listening',
      'registered as bot-',
      'link connected',
      'token refreshed',
      'drops every WebSocket',
      'link backoff',
      'link connected',
      'token signed',
      'demo: summary',
    ];
    let at = 0;
    for (const step of order) {
      const found = out.indexOf(step, at);
      expect(found, `"${step}" after position ${at} in:\n${out}`).toBeGreaterThanOrEqual(0);
      at = found + step.length;
    }
    // The app, a process of its own, converses before the drop, sees the link go and come back, and converses after it.
    const drop = out.indexOf('drops every WebSocket');
    const back = out.indexOf('app: LINK_STATE connected', drop);
    const reply = /app: ← "you said: hello from the demo app, round \d+"/g;
    const replies = [...out.matchAll(reply)].map((m) => m.index);
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
  }, 60_000);

  it('handles a SIGTERM the instant its first line is out: its handler is in place, and it stops cleanly, exit 0', async () => {
    const run = await runCli(['demo'], { env: cleanEnv(signalAtLine('reference token service listening')), timeoutMs: 30_000 });
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain('demo: summary');
  }, 45_000);
});
