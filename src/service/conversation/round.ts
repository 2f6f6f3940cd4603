import { ContentType, ConversationEvent, eventContent } from '../../protocol/conversation.js';

/** One frame of a round, before its envelope: a conversation frame, or TTS audio as a binary frame. */
export type RoundStep = { contentType: ContentType; content: Record<string, unknown> } | { binaryAudio: Buffer };

/** The reference service's deterministic answer, so tests can assert it (README, reference service). */
export function replyTo(input: string): string {
  return `you said: ${input}`;
}

/** What the service "hears" in uplink audio: only its size, so a test knows the transcript in advance. */
export function transcriptOf(audioBytes: number): string {
  return `audio of ${audioBytes} bytes`;
}

/** The reply streamed in two pieces: the fixed prefix, then the input. */
function replyPieces(input: string): string[] {
  return [replyTo(''), input];
}

/**
 * The frames of one round (DESIGN §1.7): ASR (for audio), CALL_AGENT_START_EVENT, the AGENT pieces, the
 * TTS audio (one chunk per piece, its bytes the piece's UTF-8, base64 in TTS frames or binary frames),
 * TTS_COMPLETE, COMPLETE; every content carries the roundId.
 */
export function roundSteps(o: { roundId: string; input: string; fromAudio: boolean; binaryAudio: boolean }): RoundStep[] {
  const { roundId } = o;
  const event = (type: ConversationEvent): RoundStep => ({
    contentType: ContentType.EVENT,
    content: eventContent(type, {}, { roundId }),
  });
  const pieces = replyPieces(o.input);
  const steps: RoundStep[] = [];
  if (o.fromAudio) steps.push({ contentType: ContentType.ASR, content: { roundId, text: o.input } });
  steps.push(event(ConversationEvent.CALL_AGENT_START_EVENT));
  for (const text of pieces) steps.push({ contentType: ContentType.AGENT, content: { roundId, text } });
  pieces.forEach((piece, index) => {
    const audio = Buffer.from(piece, 'utf8');
    steps.push(
      o.binaryAudio
        ? { binaryAudio: audio }
        : { contentType: ContentType.TTS, content: { roundId, audioBase64: audio.toString('base64'), index } },
    );
  });
  steps.push(event(ConversationEvent.TTS_COMPLETE), event(ConversationEvent.COMPLETE));
  return steps;
}
