import { describe, expect, it } from 'vitest';
import { cloudUrl, ConnChoice, fitOf, NO_PARAMS, sameParams } from '../../../src/agent/link/params.js';
import { appParams } from '../../../src/agent/local/app-params.js';
import { isSmallEvent, MAX_SEARCHED_EVENT_BYTES, socketUse, stateChanged, stateData } from '../../../src/agent/local/relay-decide.js';
import { isConversationEvent, linkStateFrame } from '../../../src/protocol/conversation.js';
import { DOWN, UP } from '../../helpers/guide-frames.js';

describe('app parameters', () => {
  it('takes every query parameter but botId, in the app order', () => {
    expect(appParams('/soulmate/voiceChat/v1?botId=x&sessionId=S&requestId=R&needManualCall=true&feature=f&other=1')).toEqual([
      ['sessionId', 'S'],
      ['requestId', 'R'],
      ['needManualCall', 'true'],
      ['feature', 'f'],
      ['other', '1'],
    ]);
    expect(appParams('/soulmate/voiceChat/v1')).toEqual([]);
    expect(appParams(undefined)).toEqual([]);
  });

  it('compares parameters whatever their order', () => {
    expect(
      sameParams(
        [
          ['a', '1'],
          ['b', '2'],
        ],
        [
          ['b', '2'],
          ['a', '1'],
        ],
      ),
    ).toBe(true);
    expect(sameParams([['a', '1']], [['a', '2']])).toBe(false);
    expect(
      sameParams(
        [['a', '1']],
        [
          ['a', '1'],
          ['a', '1'],
        ],
      ),
    ).toBe(false);
    expect(sameParams(NO_PARAMS, [])).toBe(true);
  });

  it('builds the cloud URL with the device botId and a sessionId only when the app gave none', () => {
    const url = cloudUrl(
      'ws://h/soulmate/voiceChat/v1',
      'bot-1',
      [
        ['botId', 'evil'],
        ['requestId', 'R'],
      ],
      'fresh',
    );
    expect(Object.fromEntries(url.searchParams)).toEqual({ botId: 'bot-1', requestId: 'R', sessionId: 'fresh' });
    const own = cloudUrl('ws://h/soulmate/voiceChat/v1', 'bot-1', [['sessionId', 'S']], 'fresh');
    expect(own.searchParams.getAll('sessionId')).toEqual(['S']);
  });
});

describe('connection choice', () => {
  it('gives each socket no app decided a fresh session, and keeps an app one', () => {
    let n = 0;
    const choice = new ConnChoice(() => `fresh-${++n}`);
    expect(choice.sessionId).toBeNull();
    expect(choice.fit).toBe('other');
    expect(choice.open('ws://h/p', 'b').url.searchParams.get('sessionId')).toBe('fresh-1');
    expect(choice.open('ws://h/p', 'b').opened).toEqual({ params: [], sessionId: 'fresh-2' });
    expect(choice.fit).toBe('exact');
    choice.want([['sessionId', 'S']]);
    expect(choice.sessionId).toBe('S');
    expect(choice.fit).toBe('other');
    choice.open('ws://h/p', 'b');
    choice.forget();
    // The open socket still carries the app's session; only later sockets get fresh ones.
    expect(choice.sessionId).toBe('S');
    // An app that names no session may take it (nobody conversed on it: see socketUse).
    expect(choice.fit).toBe('fits');
    expect(choice.open('ws://h/p', 'b').opened.sessionId).toBe('fresh-3');
  });

  type Want = readonly (readonly [string, string])[];
  const S: Want = [['sessionId', 'S']];
  const SF: Want = [
    ['sessionId', 'S'],
    ['feature', 'f'],
  ];
  const F: Want = [['feature', 'f']];
  // [opened with (its fresh session: fresh-1), wanted, fit]
  const fits: [Want, Want, string][] = [
    [[], [], 'exact'],
    [[], [['sessionId', 'fresh-1']], 'exact'],
    [[], [['sessionId', 'other']], 'other'],
    [S, S, 'exact'],
    [S, [], 'fits'],
    [S, [['sessionId', 'T']], 'other'],
    [SF, SF, 'exact'],
    [SF, F, 'fits'],
    [SF, [], 'other'],
    [F, [], 'other'],
    [[], F, 'other'],
  ];
  it.each(fits)('opened with %j, wanted %j: %s', (params, wanted, fit) => {
    const choice = new ConnChoice(() => 'fresh-1');
    choice.want(params);
    expect(fitOf(choice.open('ws://h/p', 'b').opened, wanted)).toBe(fit);
    expect(fitOf(undefined, wanted)).toBe('other');
  });

  // [opened with, conversed on by an app with (null: nobody), wanted next, how the app may use it]
  const table: [Want, Want | null, Want, string][] = [
    [[], null, [], 'kept'],
    [[], [], [], 'reused'],
    [[], null, [['sessionId', 'fresh-1']], 'kept'],
    [[], [], [['sessionId', 'fresh-1']], 'reused'],
    [[], [['sessionId', 'fresh-1']], [], 'reused'],
    [[], null, [['sessionId', 'other']], 'other'],
    [S, null, S, 'kept'],
    [S, S, S, 'reused'],
    [S, null, [], 'kept'],
    [S, S, [], 'reattach'],
    [S, [], [], 'reused'],
    [S, [], S, 'reused'],
    [S, null, [['sessionId', 'T']], 'other'],
    [SF, null, F, 'kept'],
    [SF, SF, F, 'reattach'],
    [SF, F, F, 'reused'],
    [SF, null, [], 'other'],
    [F, null, [], 'other'],
    [[], null, F, 'other'],
  ];
  it.each(table)('opened with %j, conversed on by %j, wanted %j: %s', (params, spender, wanted, use) => {
    const choice = new ConnChoice(() => 'fresh-1');
    choice.want(params);
    const { opened } = choice.open('ws://h/p', 'b');
    expect(socketUse({ opened, spentBy: spender ?? undefined }, wanted)).toBe(use);
  });

  it('with no socket seen yet, any app needs another', () => {
    expect(socketUse(undefined, [])).toBe('other');
  });
});

describe('LINK_STATE', () => {
  it('carries retryInMs only while waiting, counted down and never negative', () => {
    expect(stateData('backoff', 's', 1500, 1000)).toEqual({ state: 'backoff', sessionId: 's', retryInMs: 500 });
    expect(stateData('displaced', 's', 900, 1000)).toEqual({ state: 'displaced', sessionId: 's', retryInMs: 0 });
    expect(stateData('connected', 's', 1500, 1000)).toEqual({ state: 'connected', sessionId: 's' });
    expect(stateData('backoff', null, undefined, 1000)).toEqual({ state: 'backoff', sessionId: null });
  });

  it('is due on a change of state or session, not of retryInMs alone', () => {
    expect(stateChanged(undefined, { state: 'connected', sessionId: 'a' })).toBe(true);
    expect(stateChanged({ state: 'connected', sessionId: 'a' }, { state: 'connected', sessionId: 'a' })).toBe(false);
    expect(stateChanged({ state: 'connected', sessionId: 'a' }, { state: 'connected', sessionId: 'b' })).toBe(true);
    expect(stateChanged({ state: 'backoff', sessionId: 'a', retryInMs: 5 }, { state: 'backoff', sessionId: 'a', retryInMs: 9 })).toBe(
      false,
    );
  });

  it('is the frame DESIGN §3.5 shows', () => {
    expect(linkStateFrame({ state: 'connected', sessionId: 's' })).toBe(
      '{"contentType":"BOTLINK","content":{"eventType":"LINK_STATE","eventData":{"state":"connected","sessionId":"s"}}}',
    );
  });
});

describe('conversation events the relay looks for', () => {
  const event = (eventType: string, contentType = 'EVENT') =>
    Buffer.from(JSON.stringify({ mid: 'm', contentType, content: { eventType } }));
  it('finds the event in an EVENT envelope only', () => {
    expect(isConversationEvent(event('CLIENT_VOICE_CHAT_UPDATE'), 'CLIENT_VOICE_CHAT_UPDATE')).toBe(true);
    expect(isConversationEvent(event('CFG_BOT_EVENT'), 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    expect(isConversationEvent(event('CLIENT_VOICE_CHAT_UPDATE', 'TEXT'), 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    const chat = Buffer.from(JSON.stringify({ contentType: 'TEXT', content: { input: 'what is CLIENT_VOICE_CHAT_UPDATE?' } }));
    expect(isConversationEvent(chat, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    expect(isConversationEvent(Buffer.from('CLIENT_VOICE_CHAT_UPDATE {'), 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
  });

  it('looks in small text frames only: a binary frame or a larger one is never searched', () => {
    const greeting = event('CFG_BOT_EVENT');
    const padded = (n: number) =>
      Buffer.from(JSON.stringify({ mid: 'm'.repeat(n), contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT' } }));
    const fill = MAX_SEARCHED_EVENT_BYTES - padded(0).length;
    expect(isSmallEvent(greeting, false, 'CFG_BOT_EVENT')).toBe(true);
    expect(isSmallEvent(greeting, true, 'CFG_BOT_EVENT')).toBe(false);
    expect(isSmallEvent(greeting, false, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    expect(isSmallEvent(padded(fill), false, 'CFG_BOT_EVENT')).toBe(true);
    expect(isSmallEvent(padded(fill + 1), false, 'CFG_BOT_EVENT')).toBe(false);
  });

  it("finds the greeting and the voice config in the guide's own frames (DESIGN §1.7), and in no other", () => {
    const found = (frames: Record<string, unknown>, eventType: string) =>
      Object.keys(frames).filter((name) => isSmallEvent(Buffer.from(JSON.stringify(frames[name])), false, eventType));
    expect(found(DOWN, 'CFG_BOT_EVENT')).toEqual(['CFG_BOT_EVENT']);
    expect(found(UP, 'CLIENT_VOICE_CHAT_UPDATE')).toEqual(['CLIENT_VOICE_CHAT_UPDATE', 'CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT']);
  });
});
