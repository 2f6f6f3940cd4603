import { describe, expect, it } from 'vitest';
import { KeyedChain } from '../../../src/broker/store/keyed-chain.js';

describe('KeyedChain: one task at a time per key, in call order', () => {
  it('runs tasks of one key one after another, and of other keys alongside', async () => {
    const chain = new KeyedChain();
    const log: string[] = [];
    let releaseA!: () => void;
    const a1 = chain.run('a', async () => {
      log.push('a1 start');
      await new Promise<void>((r) => (releaseA = r));
      log.push('a1 end');
    });
    const a2 = chain.run('a', async () => void log.push('a2'));
    const b1 = chain.run('b', async () => void log.push('b1'));
    await b1;
    expect(log).toEqual(['a1 start', 'b1']);
    releaseA();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
  });

  it('a task that rejects lets the next run, and its caller still sees the rejection', async () => {
    const chain = new KeyedChain();
    const failed = chain.run('k', async () => {
      throw new Error('no');
    });
    const next = chain.run('k', async () => 'ran');
    await expect(failed).rejects.toThrow('no');
    expect(await next).toBe('ran');
  });
});
