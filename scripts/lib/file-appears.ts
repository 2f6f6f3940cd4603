import { readdirSync, watch } from 'node:fs';

/**
 * Resolves with the name of the first file in `dir` whose name ends with `suffix`: one there already,
 * or the next one another process creates or renames into place (an inotify watch, not polling).
 */
export function fileAppears(dir: string, suffix: string, timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | undefined, name = ''): void => {
      clearTimeout(timer);
      watcher.close();
      if (err) reject(err);
      else resolve(name);
    };
    const watcher = watch(dir, (_event, name) => {
      if (name?.endsWith(suffix)) done(undefined, name);
    });
    const timer = setTimeout(() => done(new Error(`no *${suffix} file appeared in ${dir} within ${timeoutMs} ms`)), timeoutMs);
    // Watched before listed: a file renamed in between is seen by one or the other.
    const there = readdirSync(dir).find((name) => name.endsWith(suffix));
    if (there !== undefined) done(undefined, there);
  });
}
