import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/daemon-proc.js';

describe('botlink demo', () => {
  it('shows provision → sign → connect → refresh → re-sign → reconnect after a forced drop, then stops by itself', async () => {
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
    const summary = /registered=1 signed=(\d+) refreshed=(\d+) reconnects=(\d+)/.exec(out);
    expect(summary).not.toBeNull();
    expect(Number(summary![1])).toBeGreaterThanOrEqual(3);
    expect(Number(summary![2])).toBeGreaterThanOrEqual(2);
    expect(Number(summary![3])).toBeGreaterThanOrEqual(1);
    expect(out).not.toContain('demo-secret-key');
  }, 60_000);
});
