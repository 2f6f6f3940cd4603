import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { KEEPALIVE_INTERVAL_MS } from '../../../src/agent/local/keepalive.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { useHarness } from '../../helpers/harness.js';
import { DOWN, UP, shapeDifferences } from '../../helpers/guide-frames.js';
import { pcmChunks, silencePcm, speechPcm } from '../../helpers/pcm.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { relayRig, type App } from '../../helpers/relay-rig.js';
import { pongFrame } from '../../helpers/ws-peers.js';

/**
 * The relay in-process against the real reference service (its conversation subset of DESIGN §1.7):
 * the service's per-connection voice config counter proves the config is replayed on a new socket.
 */

const { cleanups, service } = useHarness();

type Json = Record<string, unknown> & { content?: Record<string, unknown> };

/** Text frames until `stop` says so; a code-400 frame (the service refusing something) fails the test. */
async function until(app: App, stop: (f: Json) => boolean): Promise<Json[]> {
  const seen: Json[] = [];
  for (;;) {
    const f = await app.frames.next();
    if (f.isBinary) continue;
    const json = JSON.parse(f.data.toString('utf8')) as Json;
    if (json['code'] === 400) throw new Error(`the service refused: ${String(json['msg'])}`);
    seen.push(json);
    if (stop(json)) return seen;
  }
}

const eventIs = (type: string) => (f: Json) => f.content?.['eventType'] === type;
const stateIs = (state: string) => (f: Json) =>
  eventIs('LINK_STATE')(f) && (f.content?.['eventData'] as Json | undefined)?.['state'] === state;

let mids = 0;
const up = (contentType: string, content: Record<string, unknown>) => JSON.stringify({ mid: `m-${++mids}`, contentType, content });
const PCM_TEXT_CONFIG = JSON.stringify(UP['CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT']);
const BINARY_CONFIG = up('EVENT', {
  eventType: 'CLIENT_VOICE_CHAT_UPDATE',
  eventData: { audio: { binary: true, input: { codec: 'pcm', sampleRate: '16000' }, output: { codec: 'pcm', sampleRate: '16000' } } },
});

/**
 * The relay and its link against the reference service, started; their timers on `clock` when given,
 * and then the link's jitter pinned too: a paced reconnect draws its wait in [0, 20) ms, and a draw
 * of 0 (1 time in 20) goes at once, with no `backoff` to wait for.
 */
async function setup(clock?: ManualClock) {
  const svc = await service();
  const kit = new AgentKit({ url: svc.url });
  kit.tokens.start();
  cleanups.push(() => kit.close());
  const link = { tokens: kit.tokens, log: kit.log, ...(clock && { clock, random: () => 0.5 }) };
  const rig = await relayRig({ cloudUrl: svc.wsUrl, link, ...(clock && { relayClock: clock }) });
  cleanups.push(() => rig.close());
  const greeted = once(rig.link, 'message');
  rig.link.start();
  await greeted;
  return { svc, rig };
}

describe('relay against the reference service', () => {
  it('attaches to the open connection: state first, then its greeting replayed, then a round', async () => {
    const { rig } = await setup();
    const app = await rig.attach();
    const [state, greeting] = await until(app, eventIs('CFG_BOT_EVENT')).then((s) => [s[0], s[s.length - 1]]);
    expect(state).toMatchObject({ contentType: 'BOTLINK', content: { eventType: 'LINK_STATE', eventData: { state: 'connected' } } });
    expect(greeting).toMatchObject({ contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT' } });
    app.ws.send(up('TEXT', { input: 'hello' }));
    const round = await until(app, eventIs('COMPLETE'));
    const text = round.filter((f) => f['contentType'] === 'AGENT').map((f) => f.content?.['content']);
    expect(text.join('')).toBe('you said: hello');
  });

  it('after a cloud drop replays the binary voice config before the app audio: one config per connection', async () => {
    const { svc, rig } = await setup();
    const app = await rig.attach();
    await until(app, eventIs('CFG_BOT_EVENT'));
    app.ws.send(BINARY_CONFIG);
    await until(app, eventIs('SERVER_VOICE_CHAT_UPDATED'));
    svc.faults.dropAllSockets();
    await until(app, stateIs('backoff'));
    await until(app, stateIs('connected'));
    // Binary audio at once: the service refuses it (a code-400 frame) on a connection with no binary config.
    app.ws.send(Buffer.alloc(3200, 7), { binary: true });
    app.ws.send(up('EVENT', { eventType: 'CLIENT_AUDIO_FINISH' }));
    const round = await until(app, eventIs('COMPLETE'));
    expect(round.some((f) => f['contentType'] === 'ASR')).toBe(true);
    expect(svc.stats.ws.connections.map((c) => c.voiceConfigs)).toEqual([1, 1]);
    expect(app.ws.readyState).toBe(1);
  });

  it('a free-mode audio turn through the relay: speech then silence gets ASR IS_FINAL and a round in the guide’s shapes', async () => {
    const { rig } = await setup();
    const app = await rig.attach();
    await until(app, eventIs('CFG_BOT_EVENT'));
    app.ws.send(PCM_TEXT_CONFIG);
    await until(app, eventIs('SERVER_VOICE_CHAT_UPDATED'));
    const pcm = Buffer.concat([speechPcm(800), silencePcm(700)]);
    for (const [index, chunk] of pcmChunks(pcm, 100).entries()) app.ws.send(up('AUDIO', { audioBase64: chunk.toString('base64'), index }));
    const round = await until(app, eventIs('COMPLETE'));
    const asr = round.find((f) => f['contentType'] === 'ASR')!;
    expect(shapeDifferences(asr, DOWN['ASR'])).toEqual([]);
    expect(asr.content).toEqual({ text: 'audio of 0.8 s', textType: 'IS_FINAL', lang: 'en' });
    const text = round.filter((f) => f['contentType'] === 'AGENT').map((f) => f.content?.['content']);
    expect(text.join('')).toBe('you said: audio of 0.8 s');
  });

  it('an app reconnect paced, then called off as its app leaves: the socket kept gets the JSON keepalive again', async () => {
    const clock = new ManualClock();
    const { svc, rig } = await setup(clock);
    const first = await rig.attach('?sessionId=S1');
    await until(first, stateIs('connected'));
    first.ws.close();
    await first.closed;
    // The second app-caused reconnect in the minute waits the link's schedule; its app leaves before that.
    const second = await rig.attach('?sessionId=S2');
    await until(second, stateIs('backoff'));
    const kept = rig.reaches('connected');
    second.ws.close();
    await kept;
    expect(svc.stats.ws.connections.map((c) => c.params['sessionId'])).toEqual(['fresh-1', 'S1']);
    // The S1 socket is the link's again: with no app, the relay keeps the line the guide's way.
    expect(clock.pending()).toContain(KEEPALIVE_INTERVAL_MS);
    const ponged = pongFrame(rig.link);
    await clock.advance(KEEPALIVE_INTERVAL_MS);
    await ponged;
    expect(rig.link.status).toMatchObject({ state: 'connected', reconnects: 1 });
  });
});
