import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { LinkStateData } from '../../protocol/conversation.js';
import { obj, readDownFrame } from '../../protocol/round-reader.js';
import { closedMessage, type RelayClient, type TurnHandlers } from './relay-client.js';
import { RoundEnded, RoundLost, type RoundResult } from './relay-errors.js';

/** The guide allows up to 300 ms a frame; 100 ms lets the cloud's VAD hear the speech end sooner. */
export const FRAME_MS = 100;

/**
 * The voice config of `chat --audio`: PCM in at the file's rate, PCM out at the same rate. Audio goes
 * base64 in AUDIO frames (`binary: false`), so every TTS frame names its round and the saved reply
 * holds that round's audio only; binary frames would carry no roundId.
 */
export function voiceConfig(sampleRate: number): object {
  const rate = String(sampleRate);
  return {
    mid: randomUUID(),
    contentType: 'EVENT',
    content: {
      eventType: 'CLIENT_VOICE_CHAT_UPDATE',
      eventData: { audio: { binary: false, input: { codec: 'pcm', sampleRate: rate }, output: { codec: 'pcm', sampleRate: rate } } },
    },
  };
}

/** Frame `i` of the stream: the file's audio, then silence for ever; the last audio frame padded with it. */
export function audioFrame(pcm: Buffer, i: number, frameBytes: number): Buffer {
  const frame = Buffer.alloc(frameBytes);
  if (i * frameBytes < pcm.length) pcm.copy(frame, 0, i * frameBytes, (i + 1) * frameBytes);
  return frame;
}

type Pacing = Pick<Clock, 'monoNow' | 'sleep'>;

/**
 * Sends `pcm` (16-bit mono at `sampleRate`) in FRAME_MS frames as the clock goes, as a microphone
 * would, then silence for the cloud's VAD to hear the speech end, until `stop` aborts.
 */
export async function streamAudio(
  client: Pick<RelayClient, 'send' | 'closed'>,
  pcm: Buffer,
  sampleRate: number,
  clock: Pacing,
  stop: AbortSignal,
): Promise<number> {
  const frameBytes = (sampleRate * 2 * FRAME_MS) / 1000;
  const t0 = clock.monoNow();
  let i = 0;
  for (; !stop.aborted && !client.closed; i++) {
    const audioBase64 = audioFrame(pcm, i, frameBytes).toString('base64');
    client.send({ mid: randomUUID(), contentType: 'AUDIO', content: { audioBase64, index: i } });
    await clock.sleep(t0 + (i + 1) * FRAME_MS - clock.monoNow(), stop); // a deadline per frame: no drift
  }
  return i;
}

/** Sends the voice config and resolves with the output rate the cloud accepted (SERVER_VOICE_CHAT_UPDATED). */
export function acceptVoiceConfig(client: RelayClient, sampleRate: number): Promise<number> {
  return new Promise((done, fail) => {
    const finish = (err: Error | undefined, rate = sampleRate): void => {
      client.off('frame', onFrame);
      client.off('state', onState);
      client.off('close', onClose);
      if (err) fail(err);
      else done(rate);
    };
    const onFrame = (frame: unknown): void => {
      const event = readDownFrame(frame);
      if (event.kind === 'error')
        finish(
          new RoundEnded('error', `the cloud refused the voice config: ${event.code} ${event.msg}`, { reply: '', roundId: '', ms: 0 }),
        );
      if (event.kind !== 'voice-config') return;
      const output = Number(obj(obj(event.eventData['audio'])['output'])['sampleRate']);
      finish(undefined, Number.isInteger(output) && output > 0 ? output : sampleRate);
    };
    const onState = (s: LinkStateData): void => {
      if (s.state !== 'connected') finish(new RoundLost(`the cloud link went ${s.state} before the voice config was accepted`));
    };
    const onClose = (code: number): void => finish(new RoundLost(closedMessage(code)));
    client.on('frame', onFrame);
    client.on('state', onState);
    client.once('close', onClose);
    client.send(voiceConfig(sampleRate));
  });
}

/** One free-mode voice turn: config, audio then silence until the round starts, the round to its end. */
export async function voiceTurn(
  client: RelayClient,
  pcm: Buffer,
  sampleRate: number,
  clock: Pacing,
  on: TurnHandlers & { onAccepted?: (outputRate: number) => void } = {},
): Promise<RoundResult & { outputRate: number }> {
  const outputRate = await acceptVoiceConfig(client, sampleRate);
  on.onAccepted?.(outputRate);
  const streaming = new AbortController();
  try {
    const result = await client.turn(() => void streamAudio(client, pcm, sampleRate, clock, streaming.signal), {
      ...on,
      onTurn: (turn) => {
        if (turn.phase !== 'waiting') streaming.abort(); // the cloud heard the end: a device would stop here
        on.onTurn?.(turn);
      },
    });
    return { ...result, outputRate };
  } finally {
    streaming.abort();
  }
}
