/**
 * Runs tasks one at a time per key, in call order, in this process: the next starts once the one
 * before has settled, whether it resolved or rejected. Keys with nothing queued hold no memory.
 */
export class KeyedChain {
  readonly #tails = new Map<string, Promise<void>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(fn);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}
