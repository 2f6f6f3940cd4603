import { DEFAULT_CONFIG_FILE } from '../../agent/config/config.js';
import { resolveIdentity } from '../../agent/daemon/provisioning.js';
import { openRuntime, type AgentRuntime } from '../../agent/daemon/runtime.js';
import { storeIdentity } from '../../agent/store/token-store.js';
import { systemClock, systemRandom } from '../../clock.js';
import { BotlinkError, fixOf, messageOf } from '../../protocol/errors.js';
import type { Identity } from '../../protocol/wire.js';
import { defineCommand } from '../frame/command.js';
import { Failure } from '../frame/exit.js';
import { printable, printableJson } from '../printable.js';
import { agentConfig } from './agent-config.js';
import { explained, openCommandLog, withDeadline } from './agent-command.js';

/** A script asking for a token must get an answer, not wait for the service to come back. */
const DEFAULT_TIMEOUT_S = 30;

const USAGE = `usage: botlink token [--config FILE] [--json] [--timeout S]

Prints a valid access token and a newline, for local scripts. Uses the cached token when it is
valid (the daemon keeps it fresh); otherwise renews it under the token store's lock.

  --config FILE  agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --json         {"accessToken", "accessExpiresAt", "refreshExpiresAt"} instead (never the refresh token)
  --timeout S    give up after S seconds without a token (default: ${DEFAULT_TIMEOUT_S}); exit 69`;

/** A token about to expire is useless to the script that asked for it. */
const MIN_LEFT_MS = 60_000;

/** `botlink token`: a valid access token on stdout; failures with their fix on stderr. */
export const token = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' }, json: { type: 'boolean' }, timeout: { type: 'seconds' } },
  async run({ flags, stdout, stderr, env }) {
    const timeoutS = flags.timeout ?? DEFAULT_TIMEOUT_S;
    const config = agentConfig(flags.config, env);
    const logging = openCommandLog(config, 'token', stderr);
    let rt: AgentRuntime | undefined;
    let identity: Identity | undefined;
    try {
      rt = openRuntime(config, { log: logging.logger, clock: systemClock, random: systemRandom });
      const resolved = resolveIdentity(rt);
      if (resolved.kind === 'vendor') {
        throw new Failure(
          `this device has no botId yet (vendorId ${resolved.id}, deviceId ${resolved.deviceId}): ` +
            `run botlink provision first (botlink provision --vendor-id ${resolved.id} --device-id ${resolved.deviceId})`,
          { kind: 'config' },
        );
      }
      const bot: Identity = { kind: 'bot', id: resolved.id };
      identity = bot;
      const access = await withDeadline(rt, timeoutS * 1000, 'token', (r, signal) =>
        r.tokensFor(bot).current({ failFast: true, minLeftMs: MIN_LEFT_MS, signal }),
      );
      if (flags.json !== true) {
        // The token is the service's: a real one is printable as it is, a forged one shows escaped.
        stdout.write(`${printable(access)}\n`);
        return;
      }
      // The store holds the pair the manager just vouched for (or a newer one the daemon saved since).
      const stored = rt.store.pairFor(storeIdentity(config, bot));
      if (!stored)
        throw new BotlinkError('ERR_STORE_CHANGED', 'the cached token changed identity while it was read', 'retry-soon', {
          fix: 'run botlink token again',
        });
      // Never the refresh token: it mints access tokens for days, and a script needs only this one.
      const { accessToken, accessExpiresAt, refreshExpiresAt } = stored;
      stdout.write(`${printableJson({ accessToken, accessExpiresAt, refreshExpiresAt })}\n`);
    } catch (err) {
      if (err instanceof Failure) throw err;
      logging.logger.error(
        { code: err instanceof BotlinkError ? err.code : undefined, fix: fixOf(err) },
        `token failed: ${messageOf(err)}`,
      );
      throw explained(err, config, identity ?? { kind: 'bot', id: config.botId ?? '' });
    } finally {
      await rt?.close();
      await logging.flush();
      logging.close();
    }
  },
});
