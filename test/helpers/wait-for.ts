/**
 * Resolves once `check()` holds, looking every 20 ms; throws after `timeoutMs` naming `what`.
 * For state another process writes (files, /proc): in-process state has events or a ManualClock to wait on.
 */
export async function waitFor(check: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
