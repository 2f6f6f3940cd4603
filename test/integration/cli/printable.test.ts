import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { ConversationClient, isEvent } from '../../helpers/conversation-client.js';
import { type DeviceDir, runCli } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { closed } from '../../../scripts/lib/exec.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { terminalHazards, terminalHazardsInBytes } from '../../helpers/terminal.js';

/**
 * Issue 27 item 2: what the cloud, an app or a log line holds reaches a technician's terminal
 * escaped. The sequences: an OSC title and a screen clear, OSC 52 (a write to the clipboard), a C1
 * CSI and a right-to-left override; the bytes the commands write must hold none of them.
 */
const TITLE_AND_CLEAR = 'x\x1b]0;PWNED\x07\x1b[2J';
const CLIPBOARD = '\x1b]52;c;ZWNobyBwd25lZA==\x07';
const C1_CSI = '\u009b2J';
const RLO = 'abc\u202etxt.exe';
const HOSTILE = [TITLE_AND_CLEAR, CLIPBOARD, C1_CSI, RLO].join(' ');
/** HOSTILE as printable() shows it. */
const SHOWN = 'x\\x1b]0;PWNED\\x07\\x1b[2J \\x1b]52;c;ZWNobyBwd25lZA==\\x07 \\x9b2J abc\\u202etxt.exe';

const { cleanups, service, device, daemon } = useHarness();

/** A CLI command as a child: every byte it writes to stdout and stderr, and a wait on its stdout. */
function startCli(args: string[]) {
  const child = spawn(process.execPath, [BUNDLE, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  cleanups.push(() => child.kill('SIGKILL'));
  const chunks: Buffer[] = [];
  const out: Buffer[] = [];
  const waiters = new Set<() => void>();
  const take = (toStdout: boolean) => (b: Buffer) => {
    chunks.push(b);
    if (toStdout) out.push(b);
    for (const wake of [...waiters]) wake();
  };
  child.stdout.on('data', take(true));
  child.stderr.on('data', take(false));
  const exited = closed(child);
  const stdout = (): string => Buffer.concat(out).toString('utf8');
  return {
    child,
    stdout,
    /** Everything written to the terminal, stdout and stderr, as bytes. */
    bytes: (): Buffer => Buffer.concat(chunks),
    /** Resolves once stdout matches `pattern` (or holds it `times` times); rejects if the command ends first. */
    shows: (pattern: RegExp, times = 1): Promise<void> =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if ((stdout().match(new RegExp(pattern.source, 'g'))?.length ?? 0) < times) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
        void exited.then(() => {
          check();
          reject(new Error(`exited before ${pattern}: ${Buffer.concat(chunks).toString('utf8')}`));
        });
      }),
  };
}

/** `botlink watch` in words and as JSON lines, both past their first line. */
async function watchers(d: DeviceDir) {
  const words = startCli(['watch', '--config', d.configFile]);
  const json = startCli(['watch', '--config', d.configFile, '--json']);
  await words.shows(/link connected/);
  await json.shows(/"state":"connected"/);
  return { words, json };
}

const jsonLines = (text: string): Record<string, unknown>[] =>
  text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe('what a technician reads is printable (issue 27 item 2)', () => {
  it('from an app: its sessionId and its TEXT input, as watch, chat and chat --json print them', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const { words, json } = await watchers(d);

    const chat = await runCli(['chat', '--config', d.configFile, HOSTILE]);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe(`you said: ${SHOWN}\n`);
    const chatJson = await runCli(['chat', '--config', d.configFile, '--json', HOSTILE]);
    expect(chatJson.code, chatJson.stderr).toBe(0);
    expect(JSON.parse(chatJson.stdout)).toMatchObject({ reply: `you said: ${HOSTILE}` });
    for (const run of [chat, chatJson]) expect(terminalHazards(run.stdout + run.stderr)).toEqual([]);

    // An app that chose its sessionId: the link reconnects with it, and observers are told it.
    const app = await ConversationClient.local(join(d.runtimeDir, 'botlink.sock'), { sessionId: HOSTILE });
    cleanups.push(() => app.ws.terminate());
    await words.shows(/link connected \(session x\\x1b/);
    const from = app.frames.length;
    app.send({ mid: 'hostile-app', contentType: 'TEXT', content: { input: HOSTILE } });
    await app.indexOf(isEvent('COMPLETE'), from, "the round's COMPLETE");
    // Its reply is the third: both chats' replies came before.
    await words.shows(/reply \[[^\]]+\]: you said: x\\x1b/, 3);
    await json.shows(/"type":"reply"/, 3);

    expect(words.stdout()).toContain(`(session ${SHOWN})`);
    expect(words.stdout()).toMatch(new RegExp(`input \\[[^\\]]+\\]: ${escapeRe(SHOWN)}\\n`));
    expect(words.stdout()).toMatch(new RegExp(`reply \\[[^\\]]+\\]: you said: ${escapeRe(SHOWN)}\\n`));
    const lines = jsonLines(json.stdout());
    expect(lines).toContainEqual(expect.objectContaining({ type: 'link', state: 'connected', sessionId: HOSTILE }));
    expect(lines).toContainEqual(expect.objectContaining({ type: 'input', text: HOSTILE }));
    expect(lines).toContainEqual(expect.objectContaining({ type: 'reply', text: `you said: ${HOSTILE}` }));
    for (const w of [words, json]) expect(terminalHazardsInBytes(w.bytes())).toEqual([]);
  });

  it('from the cloud: ASR, a round, an event, proactive text and an error frame, as watch prints them; a chat ended by the error', async () => {
    const svc = await service(DAEMON_SEED, { roundDelayMs: 60_000 });
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const { words, json } = await watchers(d);

    const frames = [
      { code: 200, contentType: 'ASR', content: { text: HOSTILE, textType: 'IS_FINAL' } },
      { code: 200, contentType: 'EVENT', content: { eventType: 'CALL_AGENT_START_EVENT', roundId: 'r1', eventData: { input: HOSTILE } } },
      { code: 200, contentType: 'AGENT', content: { roundId: 'r1', role: 'assistant', content: HOSTILE } },
      { code: 200, contentType: 'EVENT', content: { eventType: 'COMPLETE', roundId: 'r1' } },
      { code: 200, contentType: 'EVENT', content: { eventType: HOSTILE, roundId: HOSTILE, eventData: { say: HOSTILE } } },
      { code: 200, contentType: 'ACTIVITY', content: { content: HOSTILE } },
      { code: 500, msg: HOSTILE },
    ];
    for (const frame of frames) expect(svc.push('bot-1', JSON.stringify(frame))).toBe(true);
    await words.shows(/error 500: /);
    await json.shows(/"type":"error"/);

    const shown = words.stdout();
    for (const line of [
      `heard: ${SHOWN}`,
      `input [r1]: ${SHOWN}`,
      `reply [r1]: ${SHOWN}`,
      `event ${SHOWN} [${SHOWN}] {"say":"x\\u001b]0;PWNED`,
      `proactive: ${SHOWN}`,
      `error 500: ${SHOWN}`,
    ])
      expect(shown).toContain(line);
    const lines = jsonLines(json.stdout());
    for (const event of [
      { type: 'heard', text: HOSTILE },
      { type: 'input', roundId: 'r1', text: HOSTILE },
      { type: 'reply', roundId: 'r1', text: HOSTILE },
      { type: 'event', eventType: HOSTILE, roundId: HOSTILE, eventData: { say: HOSTILE } },
      { type: 'proactive', text: HOSTILE },
      { type: 'error', code: 500, msg: HOSTILE },
    ])
      expect(lines).toContainEqual(expect.objectContaining(event));
    for (const w of [words, json]) expect(terminalHazardsInBytes(w.bytes())).toEqual([]);

    // A chat whose round the cloud ends with that error frame: the failure line is printable too.
    svc.events.on('ws-message', ({ data }: { data: Buffer }) => {
      if (data.toString().includes('ended-by-the-cloud')) svc.push('bot-1', JSON.stringify({ code: 500, msg: HOSTILE }));
    });
    const chat = await runCli(['chat', '--config', d.configFile, 'ended-by-the-cloud']);
    expect(chat.code, chat.stderr).toBe(1);
    expect(chat.stderr).toContain(`botlink chat: the cloud answered 500: ${SHOWN}\n`);
    expect(terminalHazards(chat.stdout + chat.stderr)).toEqual([]);
  });

  it('from a log line: botlink logs in words and --json, a line pino wrote and one that is not a log entry', async () => {
    const d = device('http://127.0.0.1:9');
    mkdirSync(dirname(d.logFile), { recursive: true });
    // JSON.stringify escapes C0 and leaves C1 and bidi as they are, as pino writes them.
    const entry = JSON.stringify({
      level: 'warn',
      time: '2026-11-23T11:00:00.000Z',
      pid: 7,
      name: 'botlink',
      part: 'link',
      reason: HOSTILE,
      msg: `link backoff: closed (4000 ${HOSTILE})`,
    });
    writeFileSync(d.logFile, `${entry}\n${TITLE_AND_CLEAR} ${C1_CSI} ${RLO}, torn\n`);
    const words = await runCli(['logs', '--config', d.configFile], { env: cleanEnv({ TZ: 'UTC' }) });
    expect(words.code, words.stderr).toBe(0);
    expect(words.stdout).toContain(`WARN  link: link backoff: closed (4000 ${SHOWN}) reason="x\\u001b]0;PWNED`);
    expect(words.stdout).toContain('(not a log entry) x\\x1b]0;PWNED\\x07\\x1b[2J \\x9b2J abc\\u202etxt.exe, torn\n');
    const json = await runCli(['logs', '--config', d.configFile, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(jsonLines(json.stdout)).toEqual([JSON.parse(entry)]);
    for (const run of [words, json]) expect(terminalHazards(run.stdout + run.stderr)).toEqual([]);
    expect(readFileSync(d.logFile, 'utf8')).toContain(C1_CSI);
  });

  it("from the daemon's status.json (a close reason, a token error): status in words and --json", async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    await p.stop('SIGTERM');
    // What a cloud's close reason and error answer leave there: the stopped daemon's last status.
    const doc = d.status()!;
    doc.link.lastError = `closed (4000 ${HOSTILE})`;
    doc.token.lastError = HOSTILE;
    writeFileSync(join(d.runtimeDir, 'status.json'), JSON.stringify(doc));
    const words = await runCli(['status', '--config', d.configFile]);
    expect(words.code, words.stderr).toBe(0);
    expect(words.stdout).toContain(`token: ${SHOWN}`);
    expect(words.stdout).toContain(`link: closed (4000 ${SHOWN})`);
    const json = await runCli(['status', '--config', d.configFile, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ token: { lastError: HOSTILE }, link: { lastError: `closed (4000 ${HOSTILE})` } });
    for (const run of [words, json]) expect(terminalHazards(run.stdout + run.stderr)).toEqual([]);
  });
});

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
