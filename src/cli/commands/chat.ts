import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { systemClock } from '../../clock.js';
import { messageOf } from '../../protocol/errors.js';
import type { Turn } from '../../protocol/round-reader.js';
import { localSocketFor, timeoutFlag } from './common.js';
import { Exit, UsageError } from '../frame/exit.js';
import { failureLines, formatDuration } from '../format.js';
import type { LinkStateData } from '../../protocol/conversation.js';
import { DAEMON_FIX, RelayClient } from '../app/relay-client.js';
import { RelayRefused, RoundEnded, type RoundResult, RoundLost } from '../app/relay-errors.js';
import { voiceTurn } from '../app/voice-turn.js';
import { readWav, voiceInputProblem, wavFile } from '../app/wav.js';

/** A technician waiting longer than this wants to know something is wrong. */
const DEFAULT_TIMEOUT_S = 30;

const USAGE = `usage: botlink chat [--config FILE | --socket PATH] [--json] [--timeout S] TEXT
       botlink chat [--config FILE | --socket PATH] [--json] [--timeout S] --audio FILE [--save-reply OUT.wav]

One conversation round through the running daemon's local API, as an app on this device would
have it: attaches to the relay, waits for the cloud link, sends TEXT and prints the reply as it
streams. The end-to-end check of the whole path: daemon, token, cloud socket and conversation.

  --config FILE      agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --socket PATH      the local API's socket instead of the config's localSocket: no config is read, so
                     an app's user, who may not read the agent's secret, can run it too
  --json             one JSON object instead: {"reply", "roundId", "ms"} (ms: from input sent to
                     COMPLETE); with --audio also "heard" and "saved"
  --timeout S        give up after S seconds in all (default: ${DEFAULT_TIMEOUT_S}, plus the audio's length); exit 1
  --audio FILE       the voice path instead of TEXT: streams FILE (WAV, 16-bit PCM mono at 16000,
                     24000 or 32000 Hz) in real time, in free mode, then silence until the cloud's VAD
                     ends the utterance; prints what the cloud heard (ASR) and the reply
  --save-reply OUT   with --audio: writes the round's TTS audio to OUT as a WAV

Exit: 0 the round completed, 1 timeout, the round was lost, cut or had no reply, 65 FILE is not
voice audio, 69 no daemon, no access to its socket or another app attached, 64 usage, 78 bad
config or the local API turned off.`;

/** `botlink chat TEXT | --audio FILE`: one round through the relay; the reply on stdout, the link's states on stderr. */
export async function chat(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  const text = positionals.join(' ').trim();
  const audioFile = values.audio;
  if (audioFile === undefined && text === '') throw new UsageError(`say something: TEXT is missing\n${USAGE}`);
  if (audioFile !== undefined && text !== '') throw new UsageError(`TEXT and --audio exclude each other\n${USAGE}`);
  if (audioFile === undefined && values['save-reply'] !== undefined) throw new UsageError(`--save-reply needs --audio\n${USAGE}`);
  if (values.socket !== undefined && values.config !== undefined)
    throw new UsageError(`--config and --socket exclude each other\n${USAGE}`);
  const audio = audioFile === undefined ? undefined : loadVoice(audioFile);
  if (typeof audio === 'number') return audio;
  const timeoutS = timeoutFlag(values.timeout, DEFAULT_TIMEOUT_S + (audio?.seconds ?? 0), USAGE);
  const socketPath = localSocketFor('botlink chat', values);
  if (typeof socketPath === 'number') return socketPath;
  const json = values.json === true;
  const saveTo = values['save-reply'];

  let client: RelayClient | undefined;
  const out = new ReplyPrinter(json, audio !== undefined);
  const tts: Buffer[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new ChatTimeout(timeoutS, client?.state, out.stage)), timeoutS * 1000);
  });
  const converse = async (): Promise<RoundResult & { outputRate?: number }> => {
    client = await RelayClient.connect(socketPath);
    await untilConnected(client);
    const on = { onPiece: out.piece, onHeard: out.heard, onAudio: (b: Buffer) => void tts.push(b) };
    if (!audio) return client.round(text, on.onPiece);
    out.stage = 'the cloud to accept the voice config (SERVER_VOICE_CHAT_UPDATED)';
    const onAccepted = (): void => {
      out.stage = 'the cloud to hear the end of the audio (ASR, then a round)';
    };
    const onTurn = (turn: Turn): void => {
      out.stage = turn.phase === 'waiting' ? 'a round on what the cloud heard (CALL_AGENT_START_EVENT)' : 'the end of the round (COMPLETE)';
    };
    return voiceTurn(client, audio.pcm, audio.sampleRate, systemClock, { ...on, onAccepted, onTurn });
  };
  const conversing = converse();
  conversing.catch(() => {}); // after a timeout, the close below ends it: its rejection is no news
  try {
    const result = await Promise.race([conversing, timedOut]);
    const saved = saveTo === undefined ? undefined : saveReply(saveTo, tts, result.outputRate ?? 16000);
    process.stdout.write(json ? `${JSON.stringify({ ...out.summary(result), ...(saved && { saved }) })}\n` : '\n');
    if (saved === null) {
      process.stderr.write(failureLines('botlink chat', `the reply came with no TTS audio: nothing to save to ${saveTo}`, CHECK_FIX));
      return Exit.FAILURE;
    }
    if (saved)
      process.stderr.write(`botlink chat: saved the reply's audio to ${saved.file} (${saved.seconds} s at ${saved.sampleRate} Hz)\n`);
    return Exit.OK;
  } catch (err) {
    process.stdout.write(out.cut());
    if (err instanceof RelayRefused) {
      process.stderr.write(failureLines('botlink chat', err.message, err.fix));
      return Exit.UNAVAILABLE;
    }
    if (err instanceof RoundLost && client?.closed) {
      process.stderr.write(failureLines('botlink chat', err.message, DAEMON_FIX));
      return Exit.UNAVAILABLE;
    }
    if (err instanceof RoundEnded) {
      const fix = err.outcome === 'empty' && audio ? `play ${audioFile}: it must hold speech loud enough to hear` : CHECK_FIX;
      process.stderr.write(failureLines('botlink chat', err.message, fix));
      return Exit.FAILURE;
    }
    if (err instanceof ChatTimeout || err instanceof RoundLost) {
      process.stderr.write(failureLines('botlink chat', err.message, CHECK_FIX));
      return Exit.FAILURE;
    }
    throw err;
  } finally {
    clearTimeout(timer);
    client?.close();
  }
}

const CHECK_FIX = 'botlink status tells how the cloud link stands; then run botlink chat again';

/** Waits for the link, telling the link's states on stderr as they change. */
async function untilConnected(client: RelayClient): Promise<void> {
  const say = (s: LinkStateData): void => void process.stderr.write(`botlink chat: link ${describeState(s)}\n`);
  if (client.state) say(client.state);
  client.on('state', say);
  await client.untilConnected();
}

/** The reply on stdout as it streams (what was heard first, with --audio); --json prints it whole at the end. */
class ReplyPrinter {
  /** What the command waits for, for a timeout's message. */
  stage = 'the reply';
  #started = false;

  constructor(
    readonly json: boolean,
    readonly voice: boolean,
  ) {}

  heard = (text: string): void => {
    if (!this.json) process.stdout.write(`heard: ${text}\n`);
  };

  piece = (text: string): void => {
    if (this.json) return;
    if (!this.#started && this.voice) process.stdout.write('reply: ');
    this.#started = true;
    process.stdout.write(text);
  };

  /** What ends a failed turn's output: the reply line's end, if one began. */
  cut(): string {
    return this.#started ? '\n' : '';
  }

  summary(result: RoundResult): object {
    const { reply, roundId, heard, ms } = result;
    return this.voice ? { heard: heard ?? null, reply, roundId, ms } : { reply, roundId, ms };
  }
}

/** The WAV of --audio as voice input, or the exit code of a file that is not (65, named with what it holds). */
function loadVoice(file: string): { pcm: Buffer; sampleRate: number; seconds: number } | number {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    process.stderr.write(failureLines('botlink chat', `cannot read ${file}: ${messageOf(err)}`, undefined));
    return Exit.DATAERR;
  }
  const read = readWav(bytes);
  const problem = read.ok ? voiceInputProblem(read.wav) : read.why;
  if (!read.ok || problem !== undefined) {
    const fix = `convert it: sox ${file} -r 16000 -c 1 -b 16 -e signed-integer voice.wav`;
    process.stderr.write(failureLines('botlink chat', `${file} is not voice input: ${problem}`, fix));
    return Exit.DATAERR;
  }
  const { data, sampleRate } = read.wav;
  return { pcm: data, sampleRate, seconds: data.length / 2 / sampleRate };
}

/** Writes the round's TTS audio as a WAV; null when the round brought none. */
function saveReply(file: string, tts: Buffer[], sampleRate: number): { file: string; seconds: number; sampleRate: number } | null {
  const pcm = Buffer.concat(tts);
  if (pcm.length === 0) return null;
  writeFileSync(file, wavFile(pcm, sampleRate));
  return { file, seconds: Math.round((pcm.length / 2 / sampleRate) * 10) / 10, sampleRate };
}

class ChatTimeout extends Error {
  constructor(timeoutS: number, last: LinkStateData | undefined, stage: string) {
    const link = last ? `link ${describeState(last)}` : 'not attached to the relay yet';
    super(`no reply within ${timeoutS} s (${link}${last?.state === 'connected' ? `; waited for ${stage}` : ''})`);
  }
}

function describeState(s: LinkStateData): string {
  return s.retryInMs === undefined ? s.state : `${s.state}, retry in ${formatDuration(s.retryInMs)}`;
}

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        socket: { type: 'string' },
        json: { type: 'boolean' },
        timeout: { type: 'string' },
        audio: { type: 'string' },
        'save-reply': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    throw new UsageError(`${messageOf(err)}\n${USAGE}`);
  }
}
