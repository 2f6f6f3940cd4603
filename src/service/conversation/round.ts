import { ContentType, ConversationEvent, eventContent } from '../../protocol/conversation.js';
import { pcmFrames, toneFor } from './tone.js';
import type { AudioSetup } from './voice-config.js';

type Obj = Record<string, unknown>;

/**
 * One frame of a round before its envelope (its mid is the roundId): a conversation frame whose content
 * is built as it is sent, so `startTime`/`time` are the send time, or TTS audio as a binary frame.
 */
export type RoundStep = { contentType: ContentType; content: (now: number) => Obj } | { binaryAudio: Buffer };

/** The reference service's deterministic answer, so tests can assert it (README, reference service). */
export function replyTo(input: string): string {
  return `you said: ${input}`;
}

/** What the service "hears" in uplink audio: how long the speech lasted, so a test knows the transcript in advance. */
export function transcriptOf(speechMs: number): string {
  return `audio of ${(Math.round(speechMs / 100) / 10).toFixed(1)} s`;
}

/** Opus input is not decoded: its transcript can only say how much arrived. */
export function opusTranscriptOf(bytes: number): string {
  return `opus audio of ${bytes} bytes`;
}

/** The language every ASR frame names. */
export const ASR_LANG = 'en';
/** The proactive turn (VOICE_CHAT_TRIGGER): always the same words. */
export const PROACTIVE_PIECES: readonly string[] = ['hello! ', 'I am here if you need me.'];

export interface RoundPlan {
  roundId: string;
  audio: AudioSetup;
  /** Speech recognised: an ASR frame opens the round. */
  heard?: string;
  /** The agent's input: CALL_AGENT_START_EVENT; absent for a proactive turn and for speech only. */
  input?: string;
  /** The text's frames: AGENT for a reply, ACTIVITY for a proactive turn, none for speech only. */
  textAs?: typeof ContentType.AGENT | typeof ContentType.ACTIVITY;
  /** The text, in the pieces it streams in; each is spoken as one tone. */
  pieces: readonly string[];
}

/** An agent round on `input` (a TEXT, or what an utterance was heard as). */
export function replyPlan(roundId: string, input: string, audio: AudioSetup, fromAudio: boolean): RoundPlan {
  return { roundId, audio, input, textAs: ContentType.AGENT, pieces: [replyTo(''), input], ...(fromAudio && { heard: input }) };
}

/**
 * The frames of one round (DESIGN §1.7): ASR (for audio), CALL_AGENT_START_EVENT, the text pieces (the
 * last with finishReason "stop"), then per piece TTS_SENTENCE_START and its TTS audio (base64 TTS frames,
 * the round's last one `finish: true`, or binary frames), TTS_COMPLETE, COMPLETE.
 */
export function roundSteps(plan: RoundPlan): RoundStep[] {
  const { roundId, audio, pieces } = plan;
  const event = (type: ConversationEvent, data: (now: number) => Obj): RoundStep => ({
    contentType: ContentType.EVENT,
    content: (now) => eventContent(type, data(now), { roundId }),
  });
  const steps: RoundStep[] = [];
  const heard = plan.heard;
  if (heard !== undefined)
    steps.push({ contentType: ContentType.ASR, content: () => ({ text: heard, textType: 'IS_FINAL', lang: ASR_LANG }) });
  const input = plan.input;
  if (input !== undefined) steps.push(event(ConversationEvent.CALL_AGENT_START_EVENT, (now) => ({ input, startTime: now })));
  const textAs = plan.textAs;
  if (textAs !== undefined) {
    pieces.forEach((piece, i) => {
      const finishReason = i === pieces.length - 1 ? 'stop' : '';
      steps.push({
        contentType: textAs,
        content: () => ({ roundId, role: 'assistant', content: piece, reasoningContent: '', finishReason }),
      });
    });
  }
  const speech = pieces.map((piece, i) => ({
    piece,
    frames: pcmFrames(toneFor(piece, i, audio.outputRate), audio.outputRate, audio.ttsFrameMs),
  }));
  const lastPiece = speech.length - 1;
  speech.forEach(({ piece, frames }, p) => {
    steps.push(event(ConversationEvent.TTS_SENTENCE_START, () => ({ text: piece })));
    frames.forEach(({ audio: pcm, durationMs }, f) => {
      const finish = p === lastPiece && f === frames.length - 1;
      const content = { roundId, audioBase64: pcm.toString('base64'), audioAue: 'pcm', audioDuration: durationMs, finish };
      steps.push(audio.binary ? { binaryAudio: pcm } : { contentType: ContentType.TTS, content: () => content });
    });
  });
  steps.push(
    event(ConversationEvent.TTS_COMPLETE, (time) => ({ time })),
    event(ConversationEvent.COMPLETE, (time) => ({ time })),
  );
  return steps;
}
