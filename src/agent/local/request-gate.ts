import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';

const HEAD_END = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);

/** Where the request head that `given` began ends in `chunk` (just past its blank line), or -1. */
function headEnd(given: Buffer, chunk: Buffer): number {
  // The blank line may straddle two reads: `given` holds the last bytes of the head already given.
  if (given.length > 0) {
    const at = Buffer.concat([given, chunk.subarray(0, HEAD_END.length - 1)]).indexOf(HEAD_END);
    if (at >= 0) return at + HEAD_END.length - given.length;
  }
  const at = chunk.indexOf(HEAD_END);
  return at < 0 ? -1 : at + HEAD_END.length;
}

/**
 * Stands between one local connection and Node's HTTP parser, which would parse every request a read
 * holds at once: 64 KiB of pipelined GETs is some 1,500 requests, each a pair of objects, before one
 * answer is made (issue 27). The parser gets one request head, then nothing more until next(); the rest
 * stays in the socket's buffer, and past that in the kernel's, where the client's writes then block.
 * Requests carry no body here (DESIGN §3.5: one with a body gets its answer and the connection ends).
 */
export class RequestGate extends Duplex {
  readonly socket: Socket;
  /** The parser may have the next request head. */
  #open = true;
  /** The last bytes given of a head whose end has not come yet. */
  #given = EMPTY;
  /** The head being given so far holds more than line breaks (a request line, not blank lines before one). */
  #headHasText = false;
  #released = false;
  readonly #onReadable = (): void => this.#feed();
  readonly #onEnd = (): void => void this.push(null);
  readonly #onError = (err: Error): void => void this.destroy(err);
  readonly #onClose = (): void => void this.destroy();
  readonly #onTimeout = (): void => void this.emit('timeout');

  constructor(socket: Socket) {
    // decodeStrings off: Node's answers pass to the socket as they are written, strings with their encoding.
    super({ allowHalfOpen: true, decodeStrings: false });
    this.socket = socket;
    socket.on('readable', this.#onReadable);
    socket.on('end', this.#onEnd);
    socket.on('error', this.#onError);
    socket.on('close', this.#onClose);
    socket.on('timeout', this.#onTimeout);
  }

  /** The request given last is answered: the parser may have the next. */
  next(): void {
    if (this.#released || this.destroyed) return;
    this.#open = true;
    this.#feed();
  }

  /** Gives the parser what the socket holds, up to the end of one request head. */
  #feed(): void {
    while (this.#open && !this.#released) {
      // Reading only here leaves what waits in the socket's buffer: past its highWaterMark it stops reading.
      const chunk = this.socket.read() as Buffer | null;
      if (chunk === null) return;
      const end = headEnd(this.#given, chunk);
      const part = end < 0 ? chunk : chunk.subarray(0, end);
      this.#headHasText ||= part.some((b) => b !== 0x0d && b !== 0x0a);
      if (end < 0) {
        // Part of a head: the parser has it now, and times it (headersTimeout), and refuses one too big.
        this.#given = Buffer.from(Buffer.concat([this.#given, chunk.subarray(-(HEAD_END.length - 1))]).subarray(-(HEAD_END.length - 1)));
      } else {
        if (end < chunk.length) this.socket.unshift(chunk.subarray(end));
        this.#given = EMPTY;
        // Blank lines before a request line are no request: the parser skips them, and no answer would open the gate again.
        this.#open = !this.#headHasText;
        this.#headHasText = false;
      }
      this.push(part);
    }
  }

  /**
   * Lets go of the socket for a WebSocket upgrade: what the client sent after the upgrade's head is still
   * in the socket's buffer, for whoever reads it next (ws does, once it listens for 'data').
   */
  release(): Socket {
    this.#released = true;
    const s = this.socket;
    s.off('readable', this.#onReadable).off('end', this.#onEnd).off('error', this.#onError);
    s.off('close', this.#onClose).off('timeout', this.#onTimeout);
    return s;
  }

  /** Node's server sets its idle and keep-alive timeouts here. */
  setTimeout(ms: number): this {
    if (!this.#released) this.socket.setTimeout(ms);
    return this;
  }

  /** What Node's server calls after an answer that says `Connection: close`: end once written, then let go. */
  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  }

  override _read(): void {
    this.#feed();
  }

  override _write(chunk: Buffer | string, encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    // Called back once the kernel took the bytes: an answer's 'finish' means the same as on the socket itself.
    this.socket.write(chunk, encoding, done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.socket.end(() => done());
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (!this.#released) this.socket.destroy();
    done(err);
  }
}
