import { DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { OBSERVE_PATH } from '../../protocol/conversation.js';
import { localSocketFor, parseFlags } from './common.js';
import { Exit, UsageError } from '../frame/exit.js';
import { failureLines } from '../format.js';
import { closedMessage, DAEMON_FIX, RelayClient } from '../app/relay-client.js';
import { RelayRefused } from '../app/relay-errors.js';
import { type OpenRounds, type WatchEvent, watchFrame, watchLine, watchLinkState } from '../app/watch-view.js';

const USAGE = `usage: botlink watch [--config FILE | --socket PATH] [--json]

The live conversation through the running daemon, as an observer (${OBSERVE_PATH}): link states,
what the cloud heard (ASR), each round's input and reply, cuts, empty rounds, skills and other
events, one line each with the local time. Read-only: the app conversing is never disturbed, and
watch works as well while none is attached. Runs until Ctrl-C or the daemon stops.

  --config FILE      agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --socket PATH      the local API's socket instead of the config's localSocket: no config is read
  --json             one JSON object a line: {"at", "type", …} (types: link, heard, input, reply,
                     cut, lost, empty, refused, error, voice-config, proactive, event)

Exit: 0 at Ctrl-C or when the daemon stops, 69 no daemon, no access to its socket, all observer
slots taken or the daemon went away, 64 usage, 78 bad config or the local API turned off.`;

/** `botlink watch`: observes the relay and prints what passes, until Ctrl-C or the daemon's stop. */
export async function watch(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, { config: { type: 'string' }, socket: { type: 'string' }, json: { type: 'boolean' } }, USAGE);
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  if (values.socket !== undefined && values.config !== undefined)
    throw new UsageError(`--config and --socket exclude each other\n${USAGE}`);
  const socketPath = localSocketFor('botlink watch', values);
  if (typeof socketPath === 'number') return socketPath;
  const json = values.json === true;

  let client: RelayClient;
  try {
    client = await RelayClient.connect(socketPath, OBSERVE_PATH);
  } catch (err) {
    if (!(err instanceof RelayRefused)) throw err;
    process.stderr.write(failureLines('botlink watch', err.message, err.fix));
    return Exit.UNAVAILABLE;
  }
  let open: OpenRounds = new Map();
  const tell = (step: { open: OpenRounds; events: WatchEvent[] }): void => {
    open = step.open;
    for (const event of step.events) process.stdout.write(`${watchLine(event, Date.now(), json)}\n`);
  };
  // The handlers before the first line: its reader may stop us at once, and a signal with none would kill us (code null).
  const ended = new Promise<number>((done) => {
    const interrupted = (): void => {
      client.off('close', onClose);
      client.close();
      done(Exit.OK);
    };
    const onClose = (code: number): void => {
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', interrupted);
      if (code === 1001 || code === 1000) {
        process.stderr.write(`botlink watch: ${closedMessage(code)}\n`);
        done(Exit.OK);
        return;
      }
      process.stderr.write(failureLines('botlink watch', closedMessage(code), DAEMON_FIX));
      done(Exit.UNAVAILABLE);
    };
    client.on('close', onClose);
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
  });
  if (client.state) tell(watchLinkState(open, client.state));
  client.on('state', (s) => tell(watchLinkState(open, s)));
  client.on('frame', (frame) => tell(watchFrame(open, frame)));
  return ended;
}
