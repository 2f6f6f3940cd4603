import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { RelayClient } from '../../../src/cli/app/relay-client.js';
import { RoundEnded } from '../../../src/cli/app/relay-errors.js';
import { readWav, wavFile } from '../../../src/cli/app/wav.js';
import { runCli } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { type Answer, guideCloud, HEARD, REPLY, ROUND, tone } from '../../helpers/guide-cloud.js';
import { shapeDifferences, UP } from '../../helpers/guide-frames.js';
import { relayRig } from '../../helpers/relay-rig.js';

// Our clients against a cloud that sends exactly the fixture frames of DESIGN §1.7, behind a real
// link and relay on a real Unix socket: what they must read is the guide's shapes, not our service's.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup() {
  const cloud = await guideCloud();
  cleanups.push(() => cloud.close());
  const rig = await relayRig({ cloudUrl: cloud.url });
  cleanups.push(() => rig.close());
  rig.link.start();
  await rig.reaches('connected');
  const dir = mkdtempSync(join(tmpdir(), 'guide-clients-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return { cloud, rig, dir };
}

async function attached(sock: string): Promise<RelayClient> {
  const client = await RelayClient.connect(sock);
  cleanups.push(() => client.close());
  await client.untilConnected();
  return client;
}

describe('the relay client reads the guide shapes', () => {
  it('a TEXT round: the greeting (roundId "") and every frame of other rounds or none pass by; the reply is content.content', async () => {
    const { rig } = await setup();
    const client = await attached(rig.sock);
    const pieces: string[] = [];
    const result = await client.round('tell me a story', (p) => pieces.push(p));
    expect(result).toEqual({ reply: REPLY, roundId: ROUND, ms: expect.any(Number) });
    expect(pieces.join('')).toBe(REPLY);
  });

  it('binary TTS frames are the round audio only while the round is open', async () => {
    const { cloud, rig } = await setup();
    cloud.binaryTts = true;
    const client = await attached(rig.sock);
    const audio: Buffer[] = [];
    await client.turn(() => client.send({ mid: 'm', contentType: 'TEXT', content: { input: 'hi' } }), {
      onAudio: (b) => void audio.push(b),
    });
    expect(Buffer.concat(audio).equals(Buffer.concat(cloud.tts))).toBe(true);
  });

  it.each([
    ['empty', 'empty', 'EMPTY_CONTENT', ''],
    ['interrupted', 'interrupted', 'CALL_AGENT_INTERRUPTED', 'Hey! Hello there, '],
    ['interrupt', 'interrupted', 'CALL_AGENT_INTERRUPTED', 'Hey! Hello there, '],
    ['audit-fail', 'refused', 'USER_AUDIT_FAIL', ''],
    ['error', 'error', 'the cloud answered 400: audio binary not support.', ''],
  ] as [Answer, string, string, string][])('%s ends the round at once, without a reply: %s', async (answer, outcome, says, partial) => {
    const { cloud, rig } = await setup();
    cloud.answer = answer;
    const client = await attached(rig.sock);
    const ended = await client.round('hi').catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(RoundEnded);
    expect(ended).toMatchObject({ outcome, message: expect.stringContaining(says), partial: { reply: partial } });
  });
});

describe('botlink chat against the guide frames', () => {
  it('TEXT: prints content.content and exits 0; --json names the round', async () => {
    const { rig } = await setup();
    const run = await runCli(['chat', '--socket', rig.sock, 'tell me a story']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`${REPLY}\n`);
    const json = await runCli(['chat', '--socket', rig.sock, '--json', 'again']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ reply: REPLY, roundId: ROUND, ms: expect.any(Number) });
  });

  it.each([
    ['empty', 'the cloud found nothing to answer (EMPTY_CONTENT): no reply', ''],
    ['interrupted', 'the reply was cut (CALL_AGENT_INTERRUPTED)', 'Hey! Hello there, \n'],
    ['audit-fail', 'the input failed the cloud content moderation (USER_AUDIT_FAIL): no reply', ''],
  ] as [Answer, string, string][])('%s: exit 1 at once with a clear message, not a timeout', async (answer, says, stdout) => {
    const { cloud, rig } = await setup();
    cloud.answer = answer;
    const run = await runCli(['chat', '--socket', rig.sock, '--timeout', '10', 'hi']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe(stdout);
    expect(run.stderr).toContain(`botlink chat: ${says}`);
    expect(run.stderr).not.toContain('no reply within');
  });

  it('--audio: streams the WAV paced in real time, base64 in the guide shapes, then silence; prints ASR and reply; saves the TTS', async () => {
    const { cloud, rig, dir } = await setup();
    const wav = join(dir, 'hello.wav');
    const speech = tone(16000, 1000);
    writeFileSync(wav, wavFile(speech, 16000));
    const out = join(dir, 'reply.wav');
    const run = await runCli(['chat', '--socket', rig.sock, '--audio', wav, '--save-reply', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`heard: ${HEARD}\nreply: ${REPLY}\n`);
    expect(run.stderr).toContain(`botlink chat: saved the reply's audio to ${out} (0.7 s at 16000 Hz)`);

    const saved = readWav(readFileSync(out));
    expect(saved).toMatchObject({ ok: true, wav: { format: 1, channels: 1, sampleRate: 16000, bitsPerSample: 16 } });
    expect(saved.ok && saved.wav.data.equals(Buffer.concat(cloud.tts))).toBe(true);

    const up = cloud.received.map((r) => r.frame);
    const config = up.find((f) => (f['content'] as { eventType?: string } | undefined)?.eventType === 'CLIENT_VOICE_CHAT_UPDATE')!;
    expect(shapeDifferences(config, UP['CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT'])).toEqual([]);
    expect((config['content'] as { eventData: unknown }).eventData).toEqual(
      (UP['CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT']!['content'] as { eventData: unknown }).eventData,
    );
    const audio = cloud.received.filter((r) => r.frame['contentType'] === 'AUDIO');
    for (const a of audio) expect(shapeDifferences(a.frame, UP['AUDIO'])).toEqual([]);
    expect(audio.map((a) => (a.frame['content'] as { index: number }).index)).toEqual(audio.map((_, i) => i));
    // 100 ms frames of the file, then silence until the cloud's VAD (600 ms) answered.
    const pcm = Buffer.concat(audio.map((a) => Buffer.from((a.frame['content'] as { audioBase64: string }).audioBase64, 'base64')));
    expect(pcm.subarray(0, speech.length).equals(speech)).toBe(true);
    expect(pcm.subarray(speech.length).every((b) => b === 0)).toBe(true);
    expect(audio.length).toBeGreaterThanOrEqual(16);
    expect(audio.length).toBeLessThanOrEqual(20);
    const spanMs = audio.at(-1)!.at - audio[0]!.at;
    expect(spanMs).toBeGreaterThan((audio.length - 2) * 100 - 50); // paced by the clock, not sent at once
  });

  it('--audio --json: {heard, reply, roundId, ms, saved}', async () => {
    const { rig, dir } = await setup();
    const wav = join(dir, 'hello.wav');
    writeFileSync(wav, wavFile(tone(24000, 500), 24000));
    const out = join(dir, 'reply.wav');
    const run = await runCli(['chat', '--socket', rig.sock, '--json', '--audio', wav, '--save-reply', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      heard: HEARD,
      reply: REPLY,
      roundId: ROUND,
      ms: expect.any(Number),
      saved: { file: out, seconds: 0.5, sampleRate: 24000 }, // the cloud's TTS bytes at the accepted rate
    });
  });

  it('--audio heard as nothing (EMPTY_CONTENT): exit 1, no reply, what to check', async () => {
    const { cloud, rig, dir } = await setup();
    cloud.answer = 'empty';
    const wav = join(dir, 'hello.wav');
    writeFileSync(wav, wavFile(tone(16000, 300), 16000));
    const run = await runCli(['chat', '--socket', rig.sock, '--audio', wav]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe(`heard: ${HEARD}\n`);
    expect(run.stderr).toContain('botlink chat: the cloud found nothing to answer (EMPTY_CONTENT): no reply');
    expect(run.stderr).toContain(`fix: play ${wav}: it must hold speech loud enough to hear`);
  });

  it('--audio the cloud never answers: exit 1 at --timeout, naming what it waited for', async () => {
    const { cloud, rig, dir } = await setup();
    cloud.answer = 'nothing';
    const wav = join(dir, 'hello.wav');
    writeFileSync(wav, wavFile(tone(16000, 200), 16000));
    const run = await runCli(['chat', '--socket', rig.sock, '--timeout', '2', '--audio', wav]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(
      'botlink chat: no reply within 2 s (link connected; waited for a round on what the cloud heard (CALL_AGENT_START_EVENT))',
    );
  });
});

describe('botlink demo-app against the guide frames', () => {
  it('converses: each round shows content.content and the round named by CALL_AGENT_START_EVENT', async () => {
    const { rig } = await setup();
    const app = spawn(process.execPath, [BUNDLE, 'demo-app', '--socket', rig.sock, '--every', '0.3'], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => app.kill('SIGKILL'));
    let stdout = '';
    await new Promise<void>((resolve) =>
      app.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.split(`← "${REPLY}" (${ROUND},`).length > 2) resolve();
      }),
    );
    expect(stdout).toContain('app: LINK_STATE connected');
    expect(stdout).not.toContain('lost');
  });
});
