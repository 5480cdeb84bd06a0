/**
 * A client of wireguard-go's UAPI: the text protocol `wg set` and `wg show` speak on the unix socket
 * `/var/run/wireguard/IF.sock` (wireguard.com/xplatform). The socket path is global, whatever namespace
 * wireguard-go runs in, so the agent connects to it directly: no process per peer change.
 *
 * A request is `get=1\n\n` or `set=1\n` + `key=value` lines + a blank line; the answer is the device's lines
 * (get) and `errno=N` and a blank line. Keys are lowercase hex. One connection per request: a failed set
 * leaves the rest of its lines unread, which would poison a kept connection. Every request has a deadline,
 * so a wireguard-go that hangs or dies never holds the agent.
 */
import { stat } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { getSystemErrorMessage, getSystemErrorName } from 'node:util';
import type { Dump, DumpPeer } from './host-readers.ts';

export const UAPI_SOCKET_DIR = '/var/run/wireguard';
const NEWLINE = 0x0a;
const EQUALS = 0x3d;
const MINUS = 0x2d;
const [LETTER_A, LETTER_E, LETTER_L, LETTER_P, LETTER_R, LETTER_T] = [...'aelprt'].map((c) => c.charCodeAt(0));

export class UapiError extends Error {
  /** wireguard-go's errno (positive), or null when it did not answer. */
  readonly errno: number | null;
  constructor(message: string, errno: number | null = null) {
    super(message);
    this.name = 'UapiError';
    this.errno = errno;
  }
}

export interface UapiOptions {
  /** Where wireguard-go's sockets are. Default /var/run/wireguard (amneziawg-go's: /var/run/amneziawg). */
  socketDir?: string;
  /** The daemon's name in messages. Default wireguard-go. */
  daemon?: string;
  /** How long one request may take, connect to last byte. Default 5000 (a get at 50,000 peers takes ~130 ms). */
  timeoutMs?: number;
}

/** A peer change as UAPI takes it: removed, or its allowed ips replaced (comma-separated, '' for none). */
export type UapiPeer = { publicKey: string; remove: true } | { publicKey: string; allowedIps: string };

export class UapiClient {
  readonly #socketDir: string;
  readonly #daemon: string;
  readonly #timeoutMs: number;

  constructor(options: UapiOptions = {}) {
    this.#socketDir = options.socketDir ?? UAPI_SOCKET_DIR;
    this.#daemon = options.daemon ?? 'wireguard-go';
    this.#timeoutMs = options.timeoutMs ?? 5000;
  }

  socketPath(iface: string): string {
    return join(this.#socketDir, `${iface}.sock`);
  }

  /** The device: private key, port, peers with allowed ips and counters (what `wg show IF dump` prints). */
  async get(iface: string): Promise<Dump> {
    return this.#request(iface, 'get=1\n\n', new GetAnswer(true));
  }

  /** The same without the allowed ips (each peer's `allowedIps` is ''): less to allocate, for counter reads. */
  async getCounters(iface: string): Promise<Dump> {
    return this.#request(iface, 'get=1\n\n', new GetAnswer(false));
  }

  /** Sets the private key (base64) and, when given, the listen port. */
  async setDevice(iface: string, privateKey: string, listenPort?: number): Promise<void> {
    const port = listenPort === undefined ? '' : `listen_port=${listenPort}\n`;
    await this.#set(iface, `private_key=${hexOf(privateKey)}\n${port}`);
  }

  /**
   * Sets device keys other than the private key and port, in order, in one request: amneziawg-go's obfuscation
   * (`jc`, `h1`, ...). On a refusal the lines before the refused one took effect.
   */
  async setDeviceKeys(iface: string, keys: ReadonlyMap<string, string>): Promise<void> {
    let body = '';
    for (const [key, value] of keys) body += `${key}=${value}\n`;
    await this.#set(iface, body);
  }

  /** Applies peer changes in order, in one request; on a refusal the lines before the refused one took effect. */
  async setPeers(iface: string, peers: readonly UapiPeer[]): Promise<void> {
    let body = '';
    for (const peer of peers) {
      body += `public_key=${hexOf(peer.publicKey)}\n`;
      if ('remove' in peer) body += 'remove=true\n';
      else {
        body += 'replace_allowed_ips=true\n';
        for (const ip of peer.allowedIps.split(',')) if (ip !== '') body += `allowed_ip=${ip}\n`;
      }
    }
    await this.#set(iface, body);
  }

  /** Whether a wireguard-go accepts connections on the interface's socket (it listens once its device exists). */
  answers(iface: string): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = createConnection(this.socketPath(iface));
      const timer = setTimeout(() => done(false), this.#timeoutMs);
      const done = (answered: boolean): void => {
        clearTimeout(timer);
        socket.destroy();
        resolve(answered);
      };
      socket.once('connect', () => done(true));
      socket.once('error', () => done(false));
    });
  }

  async #set(iface: string, body: string): Promise<void> {
    const errno = await this.#request(iface, `set=1\n${body}\n`, new SetAnswer());
    if (errno !== 0) throw new UapiError(`${this.#daemon} ${iface} refused the change: ${describeErrno(errno)}`, errno);
  }

  /** Sends `text` and feeds the answer to `reader` as it arrives, until the reader has its blank line. */
  #request<T>(iface: string, text: string, reader: AnswerReader<T>): Promise<T> {
    const path = this.socketPath(iface);
    return new Promise((resolve, reject) => {
      let settled = false;
      // Read into one large buffer: a 3 MB answer in a few dozen reads instead of one 64 KiB chunk each.
      const socket = createConnection({ path, onread: { buffer: readBuffer, callback: (bytes) => read(bytes) } });
      const finish = (outcome: () => T): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        try {
          resolve(outcome());
        } catch (error) {
          reject(error);
        }
      };
      const fail = (message: string) => () => {
        throw new UapiError(message);
      };
      const timer = setTimeout(
        finish,
        this.#timeoutMs,
        fail(`${this.#daemon} ${iface} did not answer within ${this.#timeoutMs} ms (${path})`),
      );
      // Not ended: wireguard-go answers after the blank line, and the socket is closed once the answer is in.
      socket.once('connect', () => socket.write(text));
      const read = (bytes: number): boolean => {
        try {
          if (reader.feed(readBuffer.subarray(0, bytes))) finish(() => reader.result());
        } catch (error) {
          finish(() => {
            throw error;
          });
        }
        return true;
      };
      socket.once('error', (error: NodeJS.ErrnoException) => {
        const why = error.code === 'ENOENT' ? `no such socket (is its ${this.#daemon} running?)` : error.message;
        finish(fail(`cannot talk to ${this.#daemon} ${iface} at ${path}: ${why}`));
      });
      socket.once('close', () =>
        finish(fail(`${this.#daemon} ${iface} closed ${path} before it answered (did it exit?)`)),
      );
    });
  }
}

/**
 * Where every answer is read into. One for all requests: a reader takes each read before the next one (it copies
 * what it keeps), and the kernel queues at most ~200 KiB on a unix socket.
 */
const readBuffer = Buffer.allocUnsafe(256 * 1024);

/**
 * Which socket file serves `iface` now (inode and change time), or null when there is none: a wireguard-go
 * makes its socket anew when it starts, and its interface lives and dies with it, so while this stays the same
 * the interface is the same one. A stat, no process.
 */
export async function socketIdentity(iface: string, socketDir = UAPI_SOCKET_DIR): Promise<string | null> {
  try {
    const stats = await stat(join(socketDir, `${iface}.sock`), { bigint: true });
    return `${stats.ino}:${stats.ctimeNs}`;
  } catch {
    return null;
  }
}

/** `errno` as wireguard-go sends it (negative, e.g. -22) → "EINVAL (invalid argument)". */
function describeErrno(errno: number): string {
  try {
    return `${getSystemErrorName(-errno)} (${getSystemErrorMessage(-errno)})`;
  } catch {
    return `errno ${errno}`;
  }
}

/** Takes an answer chunk by chunk: `feed` is true once the answer's blank line came; then `result`. */
interface AnswerReader<T> {
  feed(chunk: Buffer): boolean;
  result(): T;
}

/** A set's answer, `errno=N` and a blank line: its errno, positive. */
class SetAnswer implements AnswerReader<number> {
  #text = '';

  feed(chunk: Buffer): boolean {
    this.#text += chunk.toString('latin1');
    return this.#text.endsWith('\n\n');
  }

  result(): number {
    const errno = /^errno=(-?\d+)\n\n$/m.exec(this.#text)?.[1];
    if (errno === undefined) throw new UapiError(`malformed UAPI answer: ${JSON.stringify(this.#text.slice(0, 200))}`);
    return Math.abs(Number(errno));
  }
}

/**
 * A `get=1` answer parsed as it arrives (so parsing overlaps the transfer, ~3 MB at 10,000 peers), without
 * splitting it into strings. A line's key is told by its first letter and where its `=` is (the UAPI's keys are
 * a fixed set), so only values are read: keys decoded from hex into base64, numbers read digit by digit as the
 * line is walked, allowed ips made into strings only when asked for; each peer becomes one object once all its
 * lines are in. A line cut by a chunk's end waits for the next chunk.
 */
export class GetAnswer implements AnswerReader<Dump> {
  readonly #withAllowedIps: boolean;
  readonly #peers: DumpPeer[] = [];
  #privateKey = '';
  #listenPort = 0;
  #errno: number | null = null;
  /** The device's lines of other keys (amneziawg-go's obfuscation), by key; null while there are none. */
  #deviceKeys: Record<string, string> | null = null;
  #ended = false;
  /** The start of a line that the last chunk cut (a copy: a chunk's memory may be read into again). */
  #partial: Buffer | null = null;
  /** The peer being read, null before the first. */
  #publicKey: string | null = null;
  #allowedIps = '';
  #lastHandshakeS = 0;
  #rxBytes = 0;
  #txBytes = 0;
  /** The value of the number line #numberLine last read. */
  #number = 0;

  constructor(withAllowedIps: boolean) {
    this.#withAllowedIps = withAllowedIps;
  }

  feed(chunk: Buffer): boolean {
    let from = 0;
    if (this.#partial !== null) {
      const newline = chunk.indexOf(NEWLINE);
      if (newline === -1) {
        this.#partial = Buffer.concat([this.#partial, chunk]);
        return false;
      }
      const line = Buffer.concat([this.#partial, chunk.subarray(0, newline + 1)]);
      this.#partial = null;
      this.#lines(line, 0, line.length);
      from = newline + 1;
    }
    const last = chunk.lastIndexOf(NEWLINE);
    if (!this.#ended && last >= from) this.#lines(chunk, from, last + 1);
    const rest = Math.max(from, last + 1);
    if (!this.#ended && rest < chunk.length) this.#partial = Buffer.from(chunk.subarray(rest));
    return this.#ended;
  }

  result(): Dump {
    if (!this.#ended || this.#errno === null) throw new UapiError('malformed UAPI answer: no errno and blank line');
    if (this.#errno !== 0) {
      throw new UapiError(`wireguard-go could not read its device: ${describeErrno(this.#errno)}`, this.#errno);
    }
    const dump = { privateKey: this.#privateKey, listenPort: this.#listenPort, peers: this.#peers };
    return this.#deviceKeys === null ? dump : { ...dump, deviceKeys: this.#deviceKeys };
  }

  /** The whole lines of `buf` from `start` to `end` (just past a newline); stops at the blank line. */
  #lines(buf: Buffer, start: number, end: number): void {
    let pos = start;
    while (pos < end) {
      if (buf[pos] === NEWLINE) {
        this.#endPeer();
        this.#ended = true;
        return;
      }
      pos = this.#line(buf, pos, end) + 1;
    }
  }

  /**
   * Reads the line at `start` (whole: its newline is before `end`) and returns where its newline is. A line's
   * first letter and where its `=` is name its key, without reading the key: the places are tried shortest key
   * first, so a line of one of the UAPI's keys (a fixed set, which hold no `=`) is never read past its own `=`
   * (where the next line could have one). Lines not needed are skipped; one of another key is checked to have a `=`.
   */
  #line(buf: Buffer, start: number, end: number): number {
    switch (buf[start]) {
      case LETTER_P:
        if (buf[start + 10] === EQUALS /* public_key */) {
          this.#endPeer();
          this.#publicKey = keyAt(buf, start + 11, end);
          return start + 11 + HEX_KEY_LENGTH;
        }
        if (buf[start + 11] === EQUALS /* private_key */) {
          this.#privateKey = keyAt(buf, start + 12, end);
          return start + 12 + HEX_KEY_LENGTH;
        }
        if (buf[start + 13] === EQUALS /* preshared_key: 64 hex digits, not read */) {
          const eol = start + 14 + HEX_KEY_LENGTH;
          return buf[eol] === NEWLINE && eol < end ? eol : lineEnd(buf, start + 14, end);
        }
        if (buf[start + 16] === EQUALS /* protocol_version */) return lineEnd(buf, start + 17, end);
        if (buf[start + 29] === EQUALS /* persistent_keepalive_interval */) return lineEnd(buf, start + 30, end);
        break;
      case LETTER_L:
        if (buf[start + 11] === EQUALS /* listen_port */) {
          const eol = this.#numberLine(buf, start + 12, end);
          this.#listenPort = this.#number;
          return eol;
        }
        if (buf[start + 23] === EQUALS /* last_handshake_time_sec */) {
          const eol = this.#numberLine(buf, start + 24, end);
          this.#lastHandshakeS = this.#number;
          return eol;
        }
        if (buf[start + 24] === EQUALS /* last_handshake_time_nsec */) return lineEnd(buf, start + 25, end);
        break;
      case LETTER_R:
      case LETTER_T:
        if (buf[start + 8] === EQUALS /* rx_bytes, tx_bytes */) {
          const eol = this.#numberLine(buf, start + 9, end);
          if (buf[start] === LETTER_R) this.#rxBytes = this.#number;
          else this.#txBytes = this.#number;
          return eol;
        }
        break;
      case LETTER_A:
        if (buf[start + 10] === EQUALS /* allowed_ip */) {
          const eol = lineEnd(buf, start + 11, end);
          if (this.#withAllowedIps) {
            const ip = buf.toString('latin1', start + 11, eol);
            this.#allowedIps = this.#allowedIps === '' ? ip : `${this.#allowedIps},${ip}`;
          }
          return eol;
        }
        break;
      case LETTER_E:
        if (buf[start + 5] === EQUALS /* errno, negative as wireguard-go writes it */) {
          const eol = this.#numberLine(buf, buf[start + 6] === MINUS ? start + 7 : start + 6, end);
          this.#errno = this.#number;
          return eol;
        }
        if (buf[start + 8] === EQUALS /* endpoint */) return lineEnd(buf, start + 9, end);
        break;
    }
    if (this.#publicKey !== null) return otherLine(buf, start, end);
    // A device line of another key, before the first peer: kept (amneziawg-go's jc, h1, ...; rare, so not fast).
    const eol = otherLine(buf, start, end);
    const line = buf.toString('latin1', start, eol);
    const eq = line.indexOf('=');
    this.#deviceKeys ??= {};
    this.#deviceKeys[line.slice(0, eq)] = line.slice(eq + 1);
    return eol;
  }

  /** The peer read so far, if any, as a DumpPeer; the next starts blank. */
  #endPeer(): void {
    const publicKey = this.#publicKey;
    if (publicKey !== null) {
      const allowedIps = this.#allowedIps;
      this.#peers.push({
        publicKey,
        allowedIps,
        lastHandshakeS: this.#lastHandshakeS,
        rxBytes: this.#rxBytes,
        txBytes: this.#txBytes,
      });
    }
    this.#allowedIps = '';
    this.#lastHandshakeS = 0;
    this.#rxBytes = 0;
    this.#txBytes = 0;
  }

  /** The decimal digits from `start` to the line's end into #number (counters fit a double exactly to 8 PiB). */
  #numberLine(buf: Buffer, start: number, end: number): number {
    let n = 0;
    let i = start;
    for (; i < end; i++) {
      const digit = (buf[i] ?? 0) - 0x30;
      if (digit >= 0 && digit <= 9) n = n * 10 + digit;
      else if (digit === NEWLINE - 0x30) break;
      else throw malformed(buf, start, lineEnd(buf, i, end));
    }
    this.#number = n;
    return i;
  }
}

/** A whole `get=1` answer parsed at once (tests; the client parses chunk by chunk). */
export function parseGet(answer: Buffer, withAllowedIps: boolean): Dump {
  const reader = new GetAnswer(withAllowedIps);
  reader.feed(answer);
  return reader.result();
}

/** A line of another key: checked to have a `=`, skipped. Returns where its newline is. */
function otherLine(buf: Buffer, start: number, end: number): number {
  let eq = start;
  while (eq < end && buf[eq] !== EQUALS && buf[eq] !== NEWLINE) eq++;
  const eol = lineEnd(buf, eq, end);
  if (buf[eq] !== EQUALS) throw malformed(buf, start, eol);
  return eol;
}

/** Where the line with a byte at `from` ends: its newline, or `end`. */
function lineEnd(buf: Buffer, from: number, end: number): number {
  let eol = from;
  while (eol < end && buf[eol] !== NEWLINE) eol++;
  return eol;
}

function malformed(answer: Buffer, start: number, end: number): UapiError {
  return new UapiError(`malformed UAPI answer: ${JSON.stringify(answer.toString('latin1', start, end))}`);
}

const KEY_BYTES = 32;
/** A key as UAPI writes it: 64 hex digits. */
const HEX_KEY_LENGTH = 2 * KEY_BYTES;
const keyScratch = Buffer.alloc(KEY_BYTES);

/** Each byte's value as a hex digit (lowercase, as UAPI writes them), 16 for any other byte. */
const HEX_VALUE = new Uint8Array(256).fill(16);
for (let d = 0; d < 16; d++) HEX_VALUE[d.toString(16).charCodeAt(0)] = d;

/** The 64 hex digits at `start` (the rest of the line) as the key's base64 (as `wg` prints it). */
function keyAt(buf: Buffer, start: number, end: number): string {
  if (buf[start + HEX_KEY_LENGTH] !== NEWLINE || start + HEX_KEY_LENGTH >= end) {
    throw malformed(buf, start, lineEnd(buf, start, end));
  }
  let bad = 0;
  for (let i = 0; i < KEY_BYTES; i++) {
    const high = HEX_VALUE[buf[start + 2 * i] ?? 0] ?? 16;
    const low = HEX_VALUE[buf[start + 2 * i + 1] ?? 0] ?? 16;
    bad |= high | low;
    keyScratch[i] = (high << 4) | low;
  }
  if (bad > 15) throw malformed(buf, start, start + HEX_KEY_LENGTH);
  return keyScratch.toString('base64');
}

function hexOf(base64Key: string): string {
  return Buffer.from(base64Key, 'base64').toString('hex');
}
