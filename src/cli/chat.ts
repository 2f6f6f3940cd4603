import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG_FILE } from '../agent/config/config.js';
import { messageOf } from '../protocol/errors.js';
import { loadCommandConfig, timeoutFlag } from './common.js';
import { Exit, UsageError } from './exit.js';
import { failureLines, formatDuration } from './format.js';
import { DAEMON_FIX, type LinkStateData, RelayClient, RelayRefused, type RoundResult, RoundLost } from './relay-client.js';

/** A technician waiting longer than this wants to know something is wrong. */
const DEFAULT_TIMEOUT_S = 30;

const USAGE = `usage: botlink chat [--config FILE | --socket PATH] [--json] [--timeout S] TEXT

One conversation round through the running daemon's local API, as an app on this device would
have it: attaches to the relay, waits for the cloud link, sends TEXT and prints the reply as it
streams. The end-to-end check of the whole path: daemon, token, cloud socket and conversation.

  --config FILE  agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --socket PATH  the local API's socket instead of the config's localSocket: no config is read, so
                 an app's user, who may not read the agent's secret, can run it too
  --json         one JSON object instead: {"reply", "roundId", "ms"} (ms: from TEXT sent to COMPLETE)
  --timeout S    give up after S seconds in all (default: ${DEFAULT_TIMEOUT_S}); exit 1

Exit: 0 the round completed, 1 timeout or the round was lost, 69 no daemon, no access to its
socket or another app attached, 64 usage, 78 bad config or the local API turned off.`;

/** `botlink chat TEXT`: one round through the relay; the reply on stdout, the link's states on stderr. */
export async function chat(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  const timeoutS = timeoutFlag(values.timeout, DEFAULT_TIMEOUT_S, USAGE);
  const text = positionals.join(' ').trim();
  if (text === '') throw new UsageError(`say something: TEXT is missing\n${USAGE}`);
  if (values.socket !== undefined && values.config !== undefined)
    throw new UsageError(`--config and --socket exclude each other\n${USAGE}`);
  const socketPath = values.socket ?? configuredSocket(values.config);
  if (typeof socketPath === 'number') return socketPath;
  if (socketPath === null) {
    process.stderr.write(
      failureLines(
        'botlink chat',
        'the local API is turned off (localSocket is "")',
        'remove localSocket from the config, or set it to a path, and restart the daemon',
      ),
    );
    return Exit.CONFIG;
  }
  const json = values.json === true;

  let client: RelayClient | undefined;
  // The reply streams to stdout as it comes; --json prints it whole at the end.
  const stream = { started: false };
  const onPiece = json
    ? undefined
    : (piece: string): void => {
        stream.started = true;
        process.stdout.write(piece);
      };
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new ChatTimeout(timeoutS, client?.state)), timeoutS * 1000);
  });
  try {
    const result = await Promise.race([converse(socketPath, text, onPiece, (c) => (client = c)), timedOut]);
    process.stdout.write(json ? `${JSON.stringify(result)}\n` : '\n');
    return Exit.OK;
  } catch (err) {
    if (err instanceof RelayRefused) {
      process.stderr.write(failureLines('botlink chat', err.message, err.fix));
      return Exit.UNAVAILABLE;
    }
    if (err instanceof RoundLost && client?.closed) {
      process.stderr.write(failureLines('botlink chat', err.message, DAEMON_FIX));
      return Exit.UNAVAILABLE;
    }
    if (err instanceof ChatTimeout || err instanceof RoundLost) {
      if (stream.started) process.stdout.write('\n');
      process.stderr.write(
        failureLines('botlink chat', err.message, 'botlink status tells how the cloud link stands; then run botlink chat again'),
      );
      return Exit.FAILURE;
    }
    throw err;
  } finally {
    clearTimeout(timer);
    client?.close();
  }
}

async function converse(
  socketPath: string,
  text: string,
  onPiece: ((piece: string) => void) | undefined,
  attached: (c: RelayClient) => void,
): Promise<RoundResult> {
  const client = await RelayClient.connect(socketPath);
  attached(client);
  const say = (s: LinkStateData): void => void process.stderr.write(`botlink chat: link ${describeState(s)}\n`);
  if (client.state) say(client.state);
  client.on('state', say);
  await client.untilConnected();
  return client.round(text, onPiece);
}

class ChatTimeout extends Error {
  constructor(timeoutS: number, last: LinkStateData | undefined) {
    super(`no reply within ${timeoutS} s (${last ? `link ${describeState(last)}` : 'not attached to the relay yet'})`);
  }
}

function describeState(s: LinkStateData): string {
  return s.retryInMs === undefined ? s.state : `${s.state}, retry in ${formatDuration(s.retryInMs)}`;
}

/** The config's localSocket (null: turned off), or the exit code of a bad config. */
function configuredSocket(file: string | undefined): string | null | number {
  const config = loadCommandConfig(file);
  return typeof config === 'number' ? config : config.localSocket;
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
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    throw new UsageError(`${messageOf(err)}\n${USAGE}`);
  }
}
