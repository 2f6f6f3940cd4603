/** The service may use real timers (it is not agent code); unref'd, so none keeps a process alive. */
export function realTimer(ms: number, fn: () => void): () => void {
  const timer = setTimeout(fn, ms).unref();
  return () => clearTimeout(timer);
}
