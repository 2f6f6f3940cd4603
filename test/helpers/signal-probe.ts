import { fileURLToPath } from 'node:url';

const PRELOAD = fileURLToPath(new URL('./signal-probe.preload.cjs', import.meta.url));

/**
 * Environment for a botlink child that sends itself `signal` the instant it writes a stdout line
 * holding `marker` (signal-probe.preload.cjs): whether its handler was in place before that line is
 * then a fact of the run, not of the scheduler.
 */
export function signalAtLine(marker: string, signal: NodeJS.Signals = 'SIGTERM'): Record<string, string> {
  const options = process.env['NODE_OPTIONS'];
  return { NODE_OPTIONS: `${options ? `${options} ` : ''}--require ${PRELOAD}`, SIGNAL_AT: marker, SIGNAL: signal };
}
