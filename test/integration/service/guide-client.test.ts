import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { listening, startServe } from '../../helpers/serve-proc.js';
import { requireTool } from '../../../scripts/lib/tools.js';

/**
 * An independent client: test/clients/guide_client.py, Python's standard library only, written from the
 * guide (DESIGN §1.1, §1.7) and sharing no code with botlink, against a real `botlink serve` process.
 */

const CLIENT = fileURLToPath(new URL('../../clients/guide_client.py', import.meta.url));
let bundle: Bundle;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-guide-client-');
});
afterAll(() => bundle.dispose());

interface Turn {
  asr: string | null;
  roundId: string;
  reply: string;
  finishReason: string;
  order: string[];
  ttsMs: number;
  ttsBytes: number;
}

describe('the guide client (Python) against botlink serve', () => {
  it('signs getToken, connects with Bearer, and completes a free-mode audio turn paced in real time and a text turn', async () => {
    const serve = startServe(bundle.file, []);
    try {
      const url = await listening(serve);
      const { stdout } = await promisify(execFile)(requireTool('python3'), [CLIENT, url], { timeout: 60_000 });
      const result = JSON.parse(stdout) as { requestId: string; pong: string; audio: Turn; text: Turn };
      const ownId = new RegExp(`^${result.requestId}_\\d+$`);
      expect(result.pong).toMatch(ownId);
      expect(result.audio).toEqual({
        asr: 'audio of 1.0 s',
        roundId: expect.stringMatching(ownId),
        reply: 'you said: audio of 1.0 s',
        finishReason: 'stop',
        order: ['ASR', 'CALL_AGENT_START_EVENT', 'AGENT', 'TTS', 'TTS_COMPLETE', 'COMPLETE'],
        ttsMs: expect.any(Number),
        ttsBytes: expect.any(Number),
      });
      expect(result.text).toMatchObject({
        asr: null,
        reply: 'you said: hello from python',
        finishReason: 'stop',
        order: ['CALL_AGENT_START_EVENT', 'AGENT', 'TTS', 'TTS_COMPLETE', 'COMPLETE'],
      });
      // 16-bit mono at 16 kHz: 32 bytes a millisecond, and the tones last 40 ms a character.
      for (const turn of [result.audio, result.text]) expect(turn.ttsBytes).toBe(turn.ttsMs * 32);
      expect(result.text.ttsMs).toBe('you said: hello from python'.length * 40);
      expect(result.text.roundId).not.toBe(result.audio.roundId);
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exit;
    }
  });
});
