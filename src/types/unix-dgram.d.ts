declare module 'unix-dgram' {
  import type { EventEmitter } from 'node:events';

  interface UnixDgramSocket extends EventEmitter {
    send(buf: Buffer, offset: number, length: number, path: string, callback?: (err?: Error) => void): void;
    /** Listens on `path` (tests: a stand-in for systemd's NOTIFY_SOCKET). */
    bind(path: string): void;
    close(): void;
  }
  export function createSocket(type: 'unix_dgram', listener?: (msg: Buffer) => void): UnixDgramSocket;
}
