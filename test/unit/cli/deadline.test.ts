import { describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../../src/agent/config/config.js';
import type { AgentRuntime } from '../../../src/agent/daemon/runtime.js';
import { explained, withDeadline } from '../../../src/cli/commands/agent-command.js';
import { failureText } from '../../../src/cli/frame/failures.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { ManualClock } from '../../helpers/manual-clock.js';

/** withDeadline reads only the clock and tokensFor; work that asks for no token needs nothing else. */
function runtimeOn(clock: ManualClock): AgentRuntime {
  return { clock, tokensFor: () => expect.fail('no token manager expected') } as unknown as AgentRuntime;
}

const untilAborted = (_rt: AgentRuntime, signal: AbortSignal): Promise<never> =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));

const config = { baseUrl: 'http://127.0.0.1:9', accessKeyId: 'AK', secretKeyFile: '/etc/botlink/secret-key' } as AgentConfig;

describe('withDeadline', () => {
  it('gives up on the clock at the deadline, and the report names the command once', async () => {
    const clock = new ManualClock();
    const outcome = withDeadline(runtimeOn(clock), 1000, 'token', untilAborted).then(
      () => expect.fail('resolved before its deadline'),
      (err: unknown) => err,
    );
    await clock.advance(999);
    expect(clock.pending()).toEqual([1]);
    await clock.advance(1);
    const err = await outcome;
    expect(err).toBeInstanceOf(BotlinkError);
    expect(err).toMatchObject({ code: 'ERR_DEADLINE', message: 'no token within 1 s' });

    const written = [failureText(explained(err, config, { kind: 'bot', id: 'bot-1' }), 'botlink token')];
    expect(written.join('').split('\n')[0]).toBe('botlink token: no token within 1 s');
  });

  it('cancels its timer when the work ends first', async () => {
    const clock = new ManualClock();
    await expect(withDeadline(runtimeOn(clock), 1000, 'token', async () => 'done')).resolves.toBe('done');
    expect(clock.pending()).toEqual([]);
  });
});
