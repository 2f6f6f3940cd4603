// The node flags and environment the daemon runs with, read from the systemd unit itself: every process a
// benchmark starts (agent and baseline alike) gets them, so the unit and the bench cannot drift apart.
import { join } from 'node:path';
import { unitStart } from '../lib/unit-start.js';
import { ROOT } from './root.js';

export const UNIT_FILE = join(ROOT, 'systemd', 'botlink.service');
const agentUnit = unitStart(ROOT, 'botlink.service');

export const NODE_FLAGS: readonly string[] = agentUnit.nodeFlags;
export const UNIT_ENV: Readonly<Record<string, string>> = agentUnit.env;
