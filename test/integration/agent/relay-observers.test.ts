import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { AgentKit } from '../../helpers/agent-kit.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { type App, type Frame, relayRig } from '../../helpers/relay-rig.js';

/** Observers (DESIGN §3.5 /v1/observe) on the relay in-process, against the real reference service. */

const { cleanups, service } = useHarness();

type Json = Record<string, unknown> & { content?: Record<string, unknown> };
const parse = (f: Frame): Json => JSON.parse(f.data.toString('utf8')) as Json;
const isBotlink = (f: Frame): boolean => !f.isBinary && parse(f)['contentType'] === 'BOTLINK';
const eventType = (f: Frame): unknown => (f.isBinary ? undefined : parse(f).content?.['eventType']);
const stateOf = (f: Frame): unknown => (isBotlink(f) ? (parse(f).content?.['eventData'] as Json | undefined)?.['state'] : undefined);

/** Every frame until (and with) the one `stop` picks. */
async function until(peer: App, stop: (f: Frame) => boolean): Promise<Frame[]> {
  const seen: Frame[] = [];
  for (;;) {
    const f = await peer.frames.next();
    seen.push(f);
    if (stop(f)) return seen;
  }
}

let mids = 0;
const text = (input: string): string => JSON.stringify({ mid: `m-${++mids}`, contentType: 'TEXT', content: { input } });
const BINARY_CONFIG = JSON.stringify({
  mid: 'cfg',
  contentType: 'EVENT',
  content: {
    eventType: 'CLIENT_VOICE_CHAT_UPDATE',
    eventData: { audio: { binary: true, input: { codec: 'pcm', sampleRate: '16000' }, output: { codec: 'pcm', sampleRate: '16000' } } },
  },
});

async function setup(opts: { relayClock?: ManualClock } = {}) {
  const svc = await service();
  const kit = new AgentKit({ url: svc.url });
  kit.tokens.start();
  cleanups.push(() => kit.close());
  const changes: (() => void)[] = [];
  const rig = await relayRig({
    cloudUrl: svc.wsUrl,
    link: { tokens: kit.tokens, log: kit.log },
    ...(opts.relayClock && { relayClock: opts.relayClock }),
    onChange: () => {
      for (const fn of [...changes]) fn();
    },
  });
  cleanups.push(() => rig.close());
  const greeted = once(rig.link, 'message');
  rig.link.start();
  await greeted;
  /** Resolves at the first relay change after which `test` holds. */
  const changed = (test: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      const fn = (): void => {
        if (!test()) return;
        changes.splice(changes.indexOf(fn), 1);
        resolve();
      };
      changes.push(fn);
    });
  return { svc, rig, changed };
}

describe('observers beside the app', () => {
  it('get the cloud frames byte for byte as the app does, across a cloud drop, and LINK_STATE on every change', async () => {
    const { svc, rig } = await setup();
    const watcher = await rig.observe();
    const first = await watcher.frames.next();
    expect(parse(first)).toMatchObject({ contentType: 'BOTLINK', content: { eventType: 'LINK_STATE', eventData: { state: 'connected' } } });
    expect(rig.relay.counters.observers).toBe(1);
    const app = await rig.attach();
    await until(app, (f) => eventType(f) === 'CFG_BOT_EVENT'); // the replayed greeting: the app's own
    app.ws.send(text('before the drop'));
    const appRound1 = await until(app, (f) => eventType(f) === 'COMPLETE');
    svc.faults.dropAllSockets();
    await until(app, (f) => stateOf(f) === 'connected');
    app.ws.send(text('after the drop'));
    const appRound2 = await until(app, (f) => eventType(f) === 'COMPLETE');
    const seen: Frame[] = [];
    let completes = 0;
    while (completes < 2) {
      const f = await watcher.frames.next();
      seen.push(f);
      if (eventType(f) === 'COMPLETE') completes++;
    }
    const cloud = (frames: Frame[]): Buffer[] => frames.filter((f) => !isBotlink(f)).map((f) => f.data);
    // The app's two rounds and the new connection's greeting between them, as the observer got them.
    const appCloud = cloud([...appRound1, ...appRound2]);
    expect(appCloud.some((d) => d.includes('CFG_BOT_EVENT'))).toBe(true);
    expect(cloud(seen).slice(-appCloud.length)).toEqual(appCloud);
    expect(cloud(seen).length - appCloud.length).toBeLessThanOrEqual(1); // a greeting, if the app's attach reconnected
    const states = seen.filter(isBotlink).map(stateOf);
    expect(states).toContain('backoff');
    expect(states.at(-1)).toBe('connected');
    expect(rig.relay.traffic.observers.frames).toBe(cloud(seen).length);
    expect(app.ws.readyState).toBe(1);
  });

  it('get the frames that come with no app attached; what an observer sends is ignored', async () => {
    const { rig } = await setup();
    const watcher = await rig.observe();
    await watcher.frames.next();
    watcher.ws.send(text('ignored: no round comes of it'));
    const app = await rig.attach();
    await until(app, (f) => eventType(f) === 'CFG_BOT_EVENT');
    // The app asks and leaves at once: its reply comes to nobody but the observer.
    app.ws.send(text('from the app'));
    app.ws.close();
    await app.closed;
    const round = await until(watcher, (f) => eventType(f) === 'COMPLETE');
    const start = round.find((f) => eventType(f) === 'CALL_AGENT_START_EVENT')!;
    expect((parse(start).content?.['eventData'] as Json | undefined)?.['input']).toBe('from the app');
    expect(rig.relay.counters).toMatchObject({ attached: false, observers: 1 });
    expect(rig.relay.counters.dropped).toBeGreaterThan(0);
  });

  it('binary frames only with ?audio=1', async () => {
    const { rig } = await setup();
    const plain = await rig.observe();
    const audio = await rig.observe('?audio=1');
    await plain.frames.next();
    await audio.frames.next();
    const app = await rig.attach();
    await until(app, (f) => eventType(f) === 'CFG_BOT_EVENT');
    app.ws.send(BINARY_CONFIG);
    await until(app, (f) => eventType(f) === 'SERVER_VOICE_CHAT_UPDATED');
    app.ws.send(text('speak it'));
    const appFrames = await until(app, (f) => eventType(f) === 'COMPLETE');
    expect(appFrames.some((f) => f.isBinary)).toBe(true);
    const withAudio = await until(audio, (f) => eventType(f) === 'COMPLETE');
    const without = await until(plain, (f) => eventType(f) === 'COMPLETE');
    expect(withAudio.filter((f) => f.isBinary).map((f) => f.data)).toEqual(appFrames.filter((f) => f.isBinary).map((f) => f.data));
    expect(without.some((f) => f.isBinary)).toBe(false);
    expect(without.length).toBe(withAudio.length - withAudio.filter((f) => f.isBinary).length);
  });

  it('the 9th observer is refused at once with 429 {code, msg}; a slot frees when one leaves', async () => {
    const { rig } = await setup();
    const eight: App[] = [];
    for (let i = 0; i < 8; i++) {
      const o = await rig.observe();
      await o.frames.next();
      eight.push(o);
    }
    const ninth = await rig.observe();
    const [, res] = (await once(ninth.ws, 'unexpected-response')) as [unknown, IncomingMessage];
    let body = '';
    for await (const chunk of res) body += String(chunk);
    expect(res.statusCode).toBe(429);
    expect(JSON.parse(body)).toMatchObject({ code: 429, msg: expect.stringContaining('8 observers are attached') });
    expect(rig.relay.traffic.observers.refused).toBe(1);
    // The app is not an observer: it still attaches.
    const app = await rig.attach();
    expect(stateOf(await app.frames.next())).toBe('connected');
    eight[0]!.ws.close();
    await eight[0]!.closed;
    const again = await rig.observe();
    expect(stateOf(await again.frames.next())).toBe('connected');
  });

  it('an observer that stops reading is closed with 1008 at 1 MiB unread while the app’s rounds go on', async () => {
    // A clock that never moves: the close's grace never cuts, so the observer reads its 1008 once it resumes.
    const { rig, changed } = await setup({ relayClock: new ManualClock() });
    const stalled = await rig.observe();
    await stalled.frames.next();
    const app = await rig.attach();
    await until(app, (f) => eventType(f) === 'CFG_BOT_EVENT');
    stalled.ws.pause();
    const cut = changed(() => rig.relay.counters.observers === 0);
    let cutDone = false;
    void cut.then(() => (cutDone = true));
    const big = 'x'.repeat(400 * 1024);
    let rounds = 0;
    // Each round carries ~0.8 MiB down (the input in CALL_AGENT_START_EVENT and in the reply): a few reach the limit.
    while (!cutDone && rounds < 10) {
      app.ws.send(text(big));
      await until(app, (f) => eventType(f) === 'COMPLETE');
      rounds++;
    }
    await cut;
    expect(rig.relay.traffic.observers.slow).toBe(1);
    app.ws.send(text('still here'));
    const after = await until(app, (f) => eventType(f) === 'COMPLETE');
    expect(after.some((f) => !f.isBinary && parse(f)['contentType'] === 'AGENT')).toBe(true);
    expect(app.ws.readyState).toBe(1);
    stalled.ws.resume();
    const [code, reason] = await stalled.closed;
    expect(code).toBe(1008);
    expect(reason.toString()).toBe('observer too slow: 1 MiB unread');
  });
});
