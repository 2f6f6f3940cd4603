import type { Logger } from 'pino';
import { LinkSupervisor } from '../link/supervisor.js';
import { Relay } from '../local/relay.js';
import type { TokenManager } from '../token/manager.js';
import type { AgentRuntime } from './runtime.js';

/**
 * The parts that exist once the device's botId is known, built together: the bot's tokens, the link
 * that presents them, and the relay that carries an app's conversation over it. Each reports a change
 * of what status.json shows through `changed`.
 */
export class Running {
  readonly tokens: TokenManager;
  readonly link: LinkSupervisor;
  readonly relay: Relay;

  constructor(rt: AgentRuntime, botId: string, log: Logger, changed: () => void) {
    const { config, clock } = rt;
    this.tokens = rt.tokensFor({ kind: 'bot', id: botId }, changed);
    this.link = new LinkSupervisor({
      wsUrl: config.wsUrl,
      botId,
      tokens: this.tokens,
      clock,
      log: log.child({ part: 'link' }),
      ...rt.settings.link,
    });
    // Before the relay's own listener: status.json has a state before an app is told of it.
    this.link.on('state', changed);
    // Attach and detach change status.relay, which no link state change would write to status.json.
    this.relay = new Relay({ link: this.link, clock, log: log.child({ part: 'relay' }), onChange: changed });
  }

  /** Renewals begin and the link connects. */
  start(): void {
    this.tokens.start();
    this.link.start();
  }
}
