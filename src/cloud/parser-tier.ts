import { subscribe, unsubscribe } from 'node:diagnostics_channel';

/**
 * undici parses HTTP with llhttp, compiled to WebAssembly. V8 runs it in its baseline tier (Liftoff)
 * at first and, a few responses later, compiles the parser again with its optimizing compiler: 23 MB
 * of zone memory on a background thread, which glibc then keeps, fragmented. For a daemon that parses
 * a few responses an hour that is ~11 MiB of RSS for the rest of its life (after ten requests: Node 24
 * 73 → 60 MiB, Node 20 64 → 54 MiB) to speed up nothing anyone waits on.
 *
 * V8 decides whether a function may tier up when it compiles that function, and undici compiles
 * llhttp once per process, as its first connection is made. So from just before the first request
 * until undici reports that connection, the flags that allow the optimizing tier are off, and lazy
 * compilation with them (every llhttp function is compiled then, by Liftoff, not at its first call).
 * Then they are exactly as they were: V8 keys every code cache (Node's built-ins', the bundle's) to a
 * hash of all its flags, and a flag left changed would make each later built-in compile from source.
 * A flag the process was started without stays as it was.
 */
const TIER_UP_FLAGS = ['wasm-tier-up', 'wasm-dynamic-tiering', 'wasm-lazy-compilation'] as const;
/** undici publishes this once a connection is ready, llhttp compiled (lib/core/diagnostics.js). */
const CONNECTED = 'undici:client:connected';

let compiled = false;
let inFlight = 0;
let restore: (() => void) | undefined;

/** Runs `send` (an undici request) so that, if it is the one that compiles llhttp, llhttp stays in the baseline tier. */
export async function withBaselineParser<T>(send: () => Promise<T>): Promise<T> {
  if (compiled) return send();
  if (inFlight++ === 0) arm();
  try {
    return await send();
  } finally {
    // A request that failed before connecting compiled nothing: the flags go back, the next request arms again.
    if (--inFlight === 0) disarm();
  }
}

function arm(): void {
  // Loaded here, with the first request: node:v8 is no part of a daemon's start.
  const { cachedDataVersionTag, setFlagsFromString } = process.getBuiltinModule('node:v8');
  const turnedOff: string[] = [];
  for (const flag of TIER_UP_FLAGS) {
    const tag = cachedDataVersionTag();
    setFlagsFromString(`--no-${flag}`);
    if (cachedDataVersionTag() !== tag) turnedOff.push(flag);
  }
  restore = () => {
    for (const flag of turnedOff) setFlagsFromString(`--${flag}`);
  };
  subscribe(CONNECTED, onConnected);
}

function onConnected(): void {
  compiled = true;
  disarm();
}

function disarm(): void {
  unsubscribe(CONNECTED, onConnected);
  restore?.();
  restore = undefined;
}
