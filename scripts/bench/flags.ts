// The node flags the daemon runs with, read from the systemd unit itself: every process a benchmark
// starts (agent and baseline alike) gets them, so the unit and the bench cannot drift apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execStartOf } from '../../test/helpers/exec-start.js';
import { ROOT } from './root.js';

export const UNIT_FILE = join(ROOT, 'systemd', 'botlink.service');

export const NODE_FLAGS: readonly string[] = execStartOf(readFileSync(UNIT_FILE, 'utf8')).nodeFlags;
