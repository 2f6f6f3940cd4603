import { readFileSync, writeFileSync } from 'node:fs';
import { DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { systemClock } from '../../clock.js';
import type { LinkStateData } from '../../protocol/conversation.js';
import { messageOf } from '../../protocol/errors.js';
import type { Turn } from '../../protocol/round-reader.js';
import { DAEMON_FIX, RelayClient } from '../app/relay-client.js';
import { RoundEnded, type RoundResult, RoundLost } from '../app/relay-errors.js';
import { voiceTurn } from '../app/voice-turn.js';
import { readWav, voiceInputProblem, wavFile } from '../app/wav.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import type { Output } from '../frame/io.js';
import { formatDuration } from '../format.js';
import { printable, printableJson } from '../printable.js';
import { localSocketFor } from './agent-config.js';

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
export const chat = defineCommand({
  usage: USAGE,
  flags: {
    config: { type: 'string' },
    socket: { type: 'string' },
    json: { type: 'boolean' },
    timeout: { type: 'seconds' },
    audio: { type: 'string' },
    'save-reply': { type: 'string' },
  },
  positionals: [{ name: 'text', variadic: true }],
  oneOf: [['TEXT', '--audio']],
  exclusive: [['--config', '--socket']],
  needs: [['--save-reply', '--audio']],
  async run({ flags, args, stdout, stderr, env }) {
    const text = args.text.join(' ').trim();
    const audioFile = flags.audio;
    const audio = audioFile === undefined ? undefined : loadVoice(audioFile);
    const timeoutS = flags.timeout ?? DEFAULT_TIMEOUT_S + (audio?.seconds ?? 0);
    const socketPath = localSocketFor(flags, env);
    const json = flags.json === true;
    const saveTo = flags['save-reply'];

    let client: RelayClient | undefined;
    const out = new ReplyPrinter(stdout, json, audio !== undefined);
    const tts: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new ChatTimeout(timeoutS, client?.state, out.stage)), timeoutS * 1000);
    });
    const converse = async (): Promise<RoundResult & { outputRate?: number }> => {
      client = await RelayClient.connect(socketPath);
      await untilConnected(client, stderr);
      const on = { onPiece: out.piece, onHeard: out.heard, onAudio: (b: Buffer) => void tts.push(b) };
      if (!audio) return client.round(text, on.onPiece);
      out.stage = 'the cloud to accept the voice config (SERVER_VOICE_CHAT_UPDATED)';
      const onAccepted = (): void => {
        out.stage = 'the cloud to hear the end of the audio (ASR, then a round)';
      };
      const onTurn = (turn: Turn): void => {
        out.stage =
          turn.phase === 'waiting' ? 'a round on what the cloud heard (CALL_AGENT_START_EVENT)' : 'the end of the round (COMPLETE)';
      };
      return voiceTurn(client, audio.pcm, audio.sampleRate, systemClock, { ...on, onAccepted, onTurn });
    };
    const conversing = converse();
    conversing.catch(() => {}); // after a timeout, the close below ends it: its rejection is no news
    let saved: ReturnType<typeof saveReply> | undefined;
    try {
      const result = await Promise.race([conversing, timedOut]);
      saved = saveTo === undefined ? undefined : saveReply(saveTo, tts, result.outputRate ?? 16000);
      stdout.write(json ? `${printableJson({ ...out.summary(result), ...(saved && { saved }) })}\n` : '\n');
    } catch (err) {
      stdout.write(out.cut());
      throw inChatWords(err, client?.closed !== undefined, audioFile);
    } finally {
      clearTimeout(timer);
      client?.close();
    }
    if (saved === null)
      throw new Failure(`the reply came with no TTS audio: nothing to save to ${saveTo}`, { fix: CHECK_FIX, kind: 'failed' });
    if (saved) stderr.write(`botlink chat: saved the reply's audio to ${saved.file} (${saved.seconds} s at ${saved.sampleRate} Hz)\n`);
  },
});

/** A round that failed, with what to check next; RelayRefused and the unforeseen go to the exit table as they are. */
function inChatWords(err: unknown, relayClosed: boolean, audioFile: string | undefined): unknown {
  // The relay closed under the round: the daemon went away (69), not the cloud.
  if (err instanceof RoundLost && relayClosed) return new Failure(err.message, { fix: DAEMON_FIX, kind: 'unavailable' });
  if (err instanceof RoundEnded) {
    const fix = err.outcome === 'empty' && audioFile ? `play ${audioFile}: it must hold speech loud enough to hear` : CHECK_FIX;
    return new Failure(err.message, { fix, cause: err });
  }
  if (err instanceof ChatTimeout || err instanceof RoundLost) return new Failure(err.message, { fix: CHECK_FIX, cause: err });
  return err;
}

const CHECK_FIX = 'botlink status tells how the cloud link stands; then run botlink chat again';

/** Waits for the link, telling the link's states on stderr as they change. */
async function untilConnected(client: RelayClient, stderr: Output): Promise<void> {
  const say = (s: LinkStateData): void => void stderr.write(`botlink chat: link ${printable(describeState(s))}\n`);
  if (client.state) say(client.state);
  client.on('state', say);
  await client.untilConnected();
}

/**
 * The reply on stdout as it streams (what was heard first, with --audio); --json prints it whole at
 * the end. The cloud's text is printable: a reply keeps its lines, the rest escaped.
 */
class ReplyPrinter {
  /** What the command waits for, for a timeout's message. */
  stage = 'the reply';
  #started = false;

  constructor(
    readonly stdout: Output,
    readonly json: boolean,
    readonly voice: boolean,
  ) {}

  heard = (text: string): void => {
    if (!this.json) this.stdout.write(`heard: ${printable(text)}\n`);
  };

  piece = (text: string): void => {
    if (this.json) return;
    if (!this.#started && this.voice) this.stdout.write('reply: ');
    this.#started = true;
    this.stdout.write(printable(text, { lines: true }));
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

/** The WAV of --audio as voice input; a file that is not (named with what it holds) is bad input data (65). */
function loadVoice(file: string): { pcm: Buffer; sampleRate: number; seconds: number } {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new Failure(`cannot read ${file}: ${messageOf(err)}`, { kind: 'data' });
  }
  const read = readWav(bytes);
  const problem = read.ok ? voiceInputProblem(read.wav) : read.why;
  if (!read.ok || problem !== undefined) {
    const fix = `convert it: sox ${file} -r 16000 -c 1 -b 16 -e signed-integer voice.wav`;
    throw new Failure(`${file} is not voice input: ${problem}`, { fix, kind: 'data' });
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
