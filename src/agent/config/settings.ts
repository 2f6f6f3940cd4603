import type { CloudSettings } from '../../cloud/client.js';
import type { ParserTier } from '../../cloud/http.js';
import type { LinkTunables } from '../link/options.js';
import type { BackoffSettings } from '../token/backoff.js';
import { DEFAULT_POLICY, type PolicySettings } from '../token/policy.js';
import type { AgentConfig } from './config.js';

/** What each part of the agent takes from a loaded config, in its own units (ms), mapped in one place. */
export interface AgentSettings {
  cloud: Pick<CloudSettings, 'connectTimeoutMs' | 'headersTimeoutMs' | 'bodyTimeoutMs'> & { parserTier: ParserTier };
  policy: PolicySettings;
  /** The token manager's retries, and provisioning's, which fail the same way. */
  tokenBackoff: BackoffSettings;
  link: Pick<LinkTunables, 'tokenMarginMs' | 'backoff' | 'heartbeatIntervalMs' | 'heartbeatTimeoutMs' | 'connectTimeoutMs'>;
  local: { maxConnections: number };
}

const S = 1000;

/** The settings both composition sites (the daemon, the commands' runtime) build their parts from. */
export function settingsFrom(c: AgentConfig): AgentSettings {
  return {
    cloud: {
      connectTimeoutMs: c.httpTimeoutMs,
      headersTimeoutMs: c.httpTimeoutMs,
      bodyTimeoutMs: c.httpTimeoutMs,
      parserTier: c.httpParserTier,
    },
    policy: { ...DEFAULT_POLICY, refreshMarginMs: c.refreshMarginS * S, resignMarginMs: c.resignMarginS * S },
    tokenBackoff: { baseMs: c.tokenBackoffBaseMs, capMs: c.tokenBackoffCapMs },
    link: {
      tokenMarginMs: c.linkMarginS * S,
      backoff: { baseMs: c.linkBackoffBaseMs, capMs: c.linkBackoffCapMs },
      heartbeatIntervalMs: c.heartbeatIntervalMs,
      heartbeatTimeoutMs: c.heartbeatTimeoutMs,
      connectTimeoutMs: c.connectTimeoutMs,
    },
    local: { maxConnections: Math.floor(c.localConnectionsMax) },
  };
}
