import type { LinkStateData } from '../../protocol/conversation.js';
import { RelayClient } from '../app/relay-client.js';
import { RoundEnded, RoundLost } from '../app/relay-errors.js';
import { defineCommand } from '../frame/command.js';
import { Exit } from '../frame/exit.js';
import { formatDuration } from '../format.js';
import { printable } from '../printable.js';

const USAGE = 'usage: botlink demo-app --socket PATH [--every S]   (the app `botlink demo` runs; default every 3 s)';

/**
 * `botlink demo-app`: a small conversation app, a process of its own like a real one. It attaches to
 * botlink's relay, asks something every few seconds while the link is connected, and prints every
 * exchange and every LINK_STATE, so the demo shows the conversation carrying on across drops.
 */
export const demoApp = defineCommand({
  usage: USAGE,
  label: 'demo app',
  flags: { socket: { type: 'string', required: true }, every: { type: 'seconds' } },
  async run({ flags, stdout }) {
    const everyS = flags.every ?? 3;
    const client = await RelayClient.connect(flags.socket);
    const say = (line: string): void => void stdout.write(`app: ${printable(line)}\n`);
    say(`attached to ${flags.socket}`);
    const sayState = (s: LinkStateData): void =>
      say(
        `LINK_STATE ${s.state}${s.retryInMs === undefined ? '' : ` (retry in ${formatDuration(s.retryInMs)})`}${s.sessionId ? ` session ${s.sessionId}` : ''}`,
      );
    if (client.state) sayState(client.state);
    client.on('state', sayState);

    let asked = 0;
    let busy = false;
    const ask = async (): Promise<void> => {
      if (busy || client.state?.state !== 'connected') return;
      busy = true;
      const question = `hello from the demo app, round ${++asked}`;
      say(`→ "${question}"`);
      try {
        const { reply, roundId, ms } = await client.round(question);
        say(`← "${reply}" (${roundId}, ${ms} ms)`);
      } catch (err) {
        if (err instanceof RoundEnded) say(`round ${asked} ended without a reply: ${err.message}`);
        else if (err instanceof RoundLost) say(`round ${asked} lost: ${err.message}; the next one goes once the link is back`);
        else throw err;
      } finally {
        busy = false;
      }
    };
    const asker = setInterval(() => void ask(), everyS * 1000);
    // Once the link is back, ask at once: the conversation resumes without waiting for the next tick.
    client.on('state', (s) => {
      if (s.state === 'connected') void ask();
    });
    void ask(); // the link may have been connected before the listener above

    // The daemon's stop ends the app: LINK_STATE stopped, then close 1001.
    const { code, reason } = await client.whenClosed();
    clearInterval(asker);
    say(`relay closed (${code}${reason ? ` ${reason}` : ''}) after ${asked} rounds`);
    return code === 1001 ? Exit.OK : Exit.UNAVAILABLE;
  },
});
