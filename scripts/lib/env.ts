/** Our environment without BOTLINK_* and systemd variables, plus `extra`: a developer's shell cannot steer a child. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('BOTLINK_') && !['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'CREDENTIALS_DIRECTORY'].includes(k)) env[k] = v;
  }
  return { ...env, ...extra };
}
