import { describe, expect, it } from 'vitest';
import { NEW_TURN, nextTurn, readDownFrame, type RoundEvent, type Turn } from '../../../src/protocol/round-reader.js';
import { DOWN, downText } from '../../helpers/guide-frames.js';

const R = 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_2';
const START_R = '08ddd338-fd5b-4572-b03a-43974dc145db_222726_1';

describe('readDownFrame: every down frame of DESIGN §1.7 in the guide shapes', () => {
  const table: [name: string, event: RoundEvent][] = [
    ['CFG_BOT_EVENT', { kind: 'other' }],
    [
      'SERVER_VOICE_CHAT_UPDATED',
      { kind: 'voice-config', eventData: DOWN['SERVER_VOICE_CHAT_UPDATED']!['content']!['eventData' as never] },
    ],
    ['PONG', { kind: 'other' }],
    ['ASR', { kind: 'asr', text: 'tell me a story', final: true }],
    ['CALL_AGENT_START_EVENT', { kind: 'start', roundId: START_R, input: 'tell me a story' }],
    ['EMPTY_CONTENT', { kind: 'empty', roundId: 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_1' }],
    ['AGENT', { kind: 'piece', roundId: R, text: 'Hey! Hello there, ' }],
    ['AGENT_LAST', { kind: 'piece', roundId: R, text: 'how can I help?' }],
    ['TTS', { kind: 'audio', roundId: R, base64: 'AAAAAAAAAAA=' }],
    ['TTS_COMPLETE', { kind: 'tts-complete', roundId: '551cc928-a9bb-464e-9ef0-aa7366b170a9_211532_1' }],
    ['COMPLETE', { kind: 'complete', roundId: R }],
    ['CALL_AGENT_INTERRUPTED', { kind: 'interrupted', roundId: R }],
    ['ACTIVITY', { kind: 'other' }],
    ['CLIENT_CHAT_CONTEXT_RECEIVED', { kind: 'other' }],
    ['CALL_SKILL_EVENT', { kind: 'other' }],
    ['CUSTOM_EVENT', { kind: 'other' }],
    ['TTS_SENTENCE_START', { kind: 'other' }],
    ['INTERRUPT', { kind: 'interrupted', roundId: R }],
    ['USER_AUDIT_FAIL', { kind: 'refused', roundId: 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_6' }],
    ['REPEAT_CLIENT_SESSION', { kind: 'other' }],
    ['AUDIO_BINARY_NOT_SUPPORTED', { kind: 'error', code: 400, msg: 'audio binary not support.' }],
  ];

  it('the table covers every fixture', () => {
    expect(table.map(([name]) => name).sort()).toEqual(Object.keys(DOWN).sort());
  });

  it.each(table)('%s', (name, event) => {
    expect(readDownFrame(JSON.parse(downText(name)))).toEqual(event);
  });

  it.each([
    [
      'a USER_AUDIT_FAIL without roundId',
      { contentType: 'EVENT', content: { eventType: 'USER_AUDIT_FAIL' } },
      { kind: 'refused', roundId: '' },
    ],
    [
      'a partial ASR',
      JSON.parse(downText('ASR', { content: { textType: 'PARTIAL' } })),
      { kind: 'asr', text: 'tell me a story', final: false },
    ],
    ['an AGENT frame with our old content.text only', { contentType: 'AGENT', content: { roundId: R, text: 'x' } }, { kind: 'other' }],
    [
      'unknown fields beside the known',
      JSON.parse(downText('AGENT', { extra: [1], content: { newField: { a: 1 } } })),
      { kind: 'piece', roundId: R, text: 'Hey! Hello there, ' },
    ],
    [
      'a numeric roundId (none, for a turn)',
      JSON.parse(downText('COMPLETE', { content: { roundId: 7 } })),
      { kind: 'complete', roundId: '' },
    ],
    ['an unknown contentType', { code: 200, contentType: 'HOLOGRAM', content: { roundId: R } }, { kind: 'other' }],
    ['an unknown eventType', JSON.parse(downText('COMPLETE', { content: { eventType: 'SOMETHING_NEW' } })), { kind: 'other' }],
    ['content that is not an object', { contentType: 'AGENT', content: 'text' }, { kind: 'other' }],
    ['null', null, { kind: 'other' }],
    ['an array', [1, 2], { kind: 'other' }],
    ['an error with no msg', { code: 500 }, { kind: 'error', code: 500, msg: '' }],
  ] as [string, unknown, RoundEvent][])('%s', (_name, frame, event) => {
    expect(readDownFrame(frame)).toEqual(event);
  });
});

const waiting: Turn = NEW_TURN;
const heardWaiting: Turn = { phase: 'waiting', heard: 'hi' };
const open: Turn = { phase: 'open', roundId: R, heard: undefined };
const done: Turn = { phase: 'done', roundId: R, heard: undefined, outcome: 'complete', detail: '' };
const piece = (roundId: string, text = 'x'): RoundEvent => ({ kind: 'piece', roundId, text });
const audio = (roundId: string): RoundEvent => ({ kind: 'audio', roundId, base64: 'AAAA' });
const ended = (outcome: string, roundId = R, heard?: string) => ({ phase: 'done', roundId, heard, outcome, detail: expect.any(String) });

describe('nextTurn: one turn from input to its end', () => {
  it.each([
    // waiting: what names a round, what answers the input without one, what is not ours
    ['waiting, start names the round', waiting, { kind: 'start', roundId: R, input: 'x' }, { phase: 'open', roundId: R }, false],
    ['waiting, the greeting-like start with roundId "" names none', waiting, { kind: 'start', roundId: '', input: '' }, waiting, false],
    ['waiting, a first piece names the round and is kept', waiting, piece(R), { phase: 'open', roundId: R }, true],
    ['waiting, a piece without roundId is not ours', waiting, piece(''), waiting, false],
    ['waiting, audio names the round and is kept', waiting, audio(R), { phase: 'open', roundId: R }, true],
    ['waiting, tts-complete names the round', waiting, { kind: 'tts-complete', roundId: R }, { phase: 'open', roundId: R }, false],
    ['waiting, complete names and ends the round', waiting, { kind: 'complete', roundId: R }, ended('complete'), false],
    ['waiting, complete with roundId "" ends nothing', waiting, { kind: 'complete', roundId: '' }, waiting, false],
    ['waiting, EMPTY_CONTENT answers: no round', waiting, { kind: 'empty', roundId: 'other_1' }, ended('empty', ''), false],
    ['waiting, EMPTY_CONTENT keeps what was heard', heardWaiting, { kind: 'empty', roundId: '' }, ended('empty', '', 'hi'), false],
    ['waiting, USER_AUDIT_FAIL without roundId answers: no reply', waiting, { kind: 'refused', roundId: '' }, ended('refused', ''), false],
    ['waiting, an interrupt of an unseen round is not ours', waiting, { kind: 'interrupted', roundId: R }, waiting, false],
    ['waiting, a final ASR is heard', waiting, { kind: 'asr', text: 'hi', final: true }, heardWaiting, true],
    ['waiting, a partial ASR is not', waiting, { kind: 'asr', text: 'h', final: false }, waiting, false],
    ['waiting, an error ends the turn', waiting, { kind: 'error', code: 400, msg: 'audio binary not support.' }, ended('error', ''), false],
    ['waiting, a voice config answer', waiting, { kind: 'voice-config', eventData: {} }, waiting, false],
    ['waiting, other', waiting, { kind: 'other' }, waiting, false],
    // open: only frames of the named round count
    ['open, a piece of the round is kept', open, piece(R), open, true],
    ['open, a piece of another round is not', open, piece('other_3'), open, false],
    ['open, a piece without roundId is not', open, piece(''), open, false],
    ['open, audio of the round is kept', open, audio(R), open, true],
    ['open, audio of another round is not', open, audio('other_3'), open, false],
    ['open, start of the same round again', open, { kind: 'start', roundId: R, input: '' }, open, false],
    ['open, start of another round', open, { kind: 'start', roundId: 'other_3', input: '' }, open, false],
    ['open, tts-complete goes on', open, { kind: 'tts-complete', roundId: R }, open, false],
    ['open, complete ends it', open, { kind: 'complete', roundId: R }, ended('complete'), false],
    ['open, complete of another round does not', open, { kind: 'complete', roundId: 'other_3' }, open, false],
    ['open, complete with roundId "" does not', open, { kind: 'complete', roundId: '' }, open, false],
    ['open, EMPTY_CONTENT of the round ends it', open, { kind: 'empty', roundId: R }, ended('empty'), false],
    ['open, EMPTY_CONTENT of another utterance does not', open, { kind: 'empty', roundId: 'other_3' }, open, false],
    ['open, CALL_AGENT_INTERRUPTED of the round ends it', open, { kind: 'interrupted', roundId: R }, ended('interrupted'), false],
    ['open, an interrupt of another round does not', open, { kind: 'interrupted', roundId: 'other_3' }, open, false],
    ['open, an interrupt without roundId does not', open, { kind: 'interrupted', roundId: '' }, open, false],
    ['open, USER_AUDIT_FAIL of the round ends it', open, { kind: 'refused', roundId: R }, ended('refused'), false],
    ['open, USER_AUDIT_FAIL without roundId does not', open, { kind: 'refused', roundId: '' }, open, false],
    ['open, a final ASR is heard', open, { kind: 'asr', text: 'hi', final: true }, { ...open, heard: 'hi' }, true],
    ['open, an error ends it', open, { kind: 'error', code: 500, msg: 'boom' }, ended('error'), false],
    ['open, other', open, { kind: 'other' }, open, false],
    // done: nothing moves it
    ['done, a piece', done, piece(R), done, false],
    ['done, complete', done, { kind: 'complete', roundId: R }, done, false],
    ['done, an ASR', done, { kind: 'asr', text: 'hi', final: true }, done, false],
    ['done, an error', done, { kind: 'error', code: 400, msg: 'x' }, done, false],
  ] as [string, Turn, RoundEvent, object, boolean][])('%s', (_name, turn, event, expected, accepted) => {
    const step = nextTurn(turn, event);
    expect(step.turn).toEqual({ heard: undefined, ...expected });
    expect(step.accepted).toEqual(accepted ? event : undefined);
  });

  it('the detail says why there is no reply', () => {
    expect(nextTurn(waiting, { kind: 'empty', roundId: '' }).turn).toMatchObject({ detail: expect.stringContaining('EMPTY_CONTENT') });
    expect(nextTurn(open, { kind: 'interrupted', roundId: R }).turn).toMatchObject({
      detail: expect.stringContaining('CALL_AGENT_INTERRUPTED'),
    });
    expect(nextTurn(waiting, { kind: 'refused', roundId: '' }).turn).toMatchObject({ detail: expect.stringContaining('USER_AUDIT_FAIL') });
    expect(nextTurn(open, { kind: 'error', code: 400, msg: 'audio binary not support.' }).turn).toMatchObject({
      detail: 'the cloud answered 400: audio binary not support.',
    });
  });

  it('a whole free-mode round of the guide: greeting, ASR, start, pieces, audio, unknowns, complete', () => {
    const names = [
      'CFG_BOT_EVENT',
      'PONG',
      'ASR',
      'CALL_AGENT_START_EVENT',
      'TTS_SENTENCE_START',
      'AGENT',
      'CUSTOM_EVENT',
      'TTS',
      'AGENT_LAST',
      'CALL_SKILL_EVENT',
      'TTS_COMPLETE',
      'COMPLETE',
    ];
    let turn = NEW_TURN;
    const kept: string[] = [];
    for (const name of names) {
      const roundFrame = name !== 'CFG_BOT_EVENT' && name !== 'PONG' && name !== 'ASR';
      const step = nextTurn(turn, readDownFrame(JSON.parse(downText(name, roundFrame ? { content: { roundId: R } } : {}))));
      turn = step.turn;
      if (step.accepted) kept.push(step.accepted.kind === 'piece' ? step.accepted.text : step.accepted.kind);
    }
    expect(turn).toEqual({ phase: 'done', roundId: R, heard: 'tell me a story', outcome: 'complete', detail: '' });
    expect(kept).toEqual(['asr', 'Hey! Hello there, ', 'audio', 'how can I help?']);
  });
});
