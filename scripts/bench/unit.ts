// The node flags and environment the daemon runs with, read from the systemd unit itself: every process a
// benchmark starts (agent and baseline alike) gets them, so the unit and the bench cannot drift apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { environmentOf, execStartOf } from '../lib/exec-start.js';
import { ROOT } from './root.js';

export const UNIT_FILE = join(ROOT, 'systemd', 'botlink.service');
const unitText = readFileSync(UNIT_FILE, 'utf8');

export const NODE_FLAGS: readonly string[] = execStartOf(unitText).nodeFlags;
export const UNIT_ENV: Readonly<Record<string, string>> = environmentOf(unitText);
