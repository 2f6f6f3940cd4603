import { DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { OBSERVE_PATH } from '../../protocol/conversation.js';
import { closedMessage, DAEMON_FIX, RelayClient } from '../app/relay-client.js';
import { type OpenRounds, type WatchEvent, watchFrame, watchLine, watchLinkState } from '../app/watch-view.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import { untilSignal } from '../frame/signals.js';
import { localSocketFor } from './agent-config.js';

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
export const watch = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' }, socket: { type: 'string' }, json: { type: 'boolean' } },
  exclusive: [['--config', '--socket']],
  async run({ flags, stdout, stderr, env }) {
    const socketPath = localSocketFor(flags, env);
    const json = flags.json === true;
    const client = await RelayClient.connect(socketPath, OBSERVE_PATH);
    let open: OpenRounds = new Map();
    const tell = (step: { open: OpenRounds; events: WatchEvent[] }): void => {
      open = step.open;
      for (const event of step.events) stdout.write(`${watchLine(event, Date.now(), json)}\n`);
    };
    // The wait before the first line: its reader may stop us at once, and a signal with none would kill us (code null).
    const stop = untilSignal();
    if (client.state) tell(watchLinkState(open, client.state));
    client.on('state', (s) => tell(watchLinkState(open, s)));
    client.on('frame', (frame) => tell(watchFrame(open, frame)));
    const closed = await Promise.race([stop.received.then(() => undefined), client.whenClosed()]);
    if (closed === undefined) {
      client.close();
      return;
    }
    stop.cancel();
    if (closed.code !== 1000 && closed.code !== 1001)
      throw new Failure(closedMessage(closed.code), { fix: DAEMON_FIX, kind: 'unavailable' });
    stderr.write(`botlink watch: ${closedMessage(closed.code)}\n`);
  },
});
