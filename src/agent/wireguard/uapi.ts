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
  /** Where wireguard-go's sockets are. Default /var/run/wireguard. */
  socketDir?: string;
  /** How long one request may take, connect to last byte. Default 5000 (a get at 50,000 peers takes ~130 ms). */
  timeoutMs?: number;
}

/** A peer change as UAPI takes it: removed, or its allowed ips replaced (comma-separated, '' for none). */
export type UapiPeer = { publicKey: string; remove: true } | { publicKey: string; allowedIps: string };

export class UapiClient {
  readonly #socketDir: string;
  readonly #timeoutMs: number;

  constructor(options: UapiOptions = {}) {
    this.#socketDir = options.socketDir ?? UAPI_SOCKET_DIR;
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
    if (errno !== 0) throw new UapiError(`wireguard-go ${iface} refused the change: ${describeErrno(errno)}`, errno);
  }

  /** Sends `text` and feeds the answer to `reader` as it arrives, until the reader has its blank line. */
  #request<T>(iface: string, text: string, reader: AnswerReader<T>): Promise<T> {
    const path = this.socketPath(iface);
    return new Promise((resolve, reject) => {
      let settled = false;
      const socket = createConnection(path);
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
        fail(`wireguard-go ${iface} did not answer within ${this.#timeoutMs} ms (${path})`),
      );
      // Not ended: wireguard-go answers after the blank line, and the socket is closed once the answer is in.
      socket.once('connect', () => socket.write(text));
      socket.on('data', (chunk: Buffer) => {
        try {
          if (reader.feed(chunk)) finish(() => reader.result());
        } catch (error) {
          finish(() => {
            throw error;
          });
        }
      });
      socket.once('error', (error: NodeJS.ErrnoException) => {
        const why = error.code === 'ENOENT' ? 'no such socket (is its wireguard-go running?)' : error.message;
        finish(fail(`cannot talk to wireguard-go ${iface} at ${path}: ${why}`));
      });
      socket.once('close', () =>
        finish(fail(`wireguard-go ${iface} closed ${path} before it answered (did it exit?)`)),
      );
    });
  }
}

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
 * splitting it into strings: a walk over the bytes, keys told apart by their first letter and length (the
 * UAPI's keys are a fixed set), numbers read digit by digit, only keys and (when `withAllowedIps`) allowed ips
 * made into strings. A line cut by a chunk's end waits for the next chunk.
 */
export class GetAnswer implements AnswerReader<Dump> {
  readonly #withAllowedIps: boolean;
  readonly #peers: DumpPeer[] = [];
  #privateKey = '';
  #listenPort = 0;
  #peer: DumpPeer | null = null;
  #errno: number | null = null;
  #ended = false;
  /** The start of a line that the last chunk cut. */
  #partial: Buffer | null = null;

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
    if (!this.#ended && rest < chunk.length) this.#partial = chunk.subarray(rest);
    return this.#ended;
  }

  result(): Dump {
    if (!this.#ended || this.#errno === null) throw new UapiError('malformed UAPI answer: no errno and blank line');
    if (this.#errno !== 0) {
      throw new UapiError(`wireguard-go could not read its device: ${describeErrno(this.#errno)}`, this.#errno);
    }
    return { privateKey: this.#privateKey, listenPort: this.#listenPort, peers: this.#peers };
  }

  /**
   * The whole lines of `buf` from `start` to `end` (just past a newline); stops at the blank line. A plain loop
   * over the bytes: a native `indexOf` per line costs more than the scan itself at these line lengths.
   */
  #lines(buf: Buffer, start: number, end: number): void {
    let pos = start;
    while (pos < end) {
      if (buf[pos] === NEWLINE) {
        this.#ended = true;
        return;
      }
      let eq = pos;
      while (eq < end && buf[eq] !== EQUALS && buf[eq] !== NEWLINE) eq++;
      // Keys (public, private, preshared: `p` and 10, 11 or 13 letters) have 64 hex digits: no need to scan
      // them (keyAt checks the digits of those it reads; wireguard-go writes the preshared one as hex too).
      let eol = eq + 1 + KEY_BYTES * 2;
      const keyLength = eq - pos;
      const isKey = buf[pos] === 0x70 && (keyLength === 10 || keyLength === 11 || keyLength === 13);
      if (!isKey || eol >= end || buf[eol] !== NEWLINE) {
        eol = eq;
        while (eol < end && buf[eol] !== NEWLINE) eol++;
      }
      if (buf[eq] !== EQUALS) throw malformed(buf, pos, eol);
      this.#line(buf, pos, eq, eol);
      pos = eol + 1;
    }
  }

  /** The line from `start` to `end` (its newline), with its `=` at `eq`. */
  #line(buf: Buffer, start: number, eq: number, end: number): void {
    const first = buf[start];
    const keyLength = eq - start;
    const value = eq + 1;
    const peer = this.#peer;
    if (first === 0x70 /* p */ && keyLength === 10) {
      this.#peer = { publicKey: keyAt(buf, value, end), allowedIps: '', lastHandshakeS: 0, rxBytes: 0, txBytes: 0 };
      this.#peers.push(this.#peer);
    } else if (first === 0x61 /* a */ && keyLength === 10) {
      if (peer !== null && this.#withAllowedIps) {
        const ip = buf.toString('latin1', value, end);
        peer.allowedIps = peer.allowedIps === '' ? ip : `${peer.allowedIps},${ip}`;
      }
    } else if (first === 0x72 /* r */ && keyLength === 8) {
      if (peer !== null) peer.rxBytes = numberAt(buf, value, end);
    } else if (first === 0x74 /* t */ && keyLength === 8) {
      if (peer !== null) peer.txBytes = numberAt(buf, value, end);
    } else if (first === 0x6c /* l */ && keyLength === 23) {
      if (peer !== null) peer.lastHandshakeS = numberAt(buf, value, end);
    } else if (first === 0x70 /* p */ && keyLength === 11) {
      this.#privateKey = keyAt(buf, value, end);
    } else if (first === 0x6c /* l */ && keyLength === 11) {
      this.#listenPort = numberAt(buf, value, end);
    } else if (first === 0x65 /* e */ && keyLength === 5) {
      this.#errno = Math.abs(Number(buf.toString('latin1', value, end)));
    }
  }
}

/** A whole `get=1` answer parsed at once (tests; the client parses chunk by chunk). */
export function parseGet(answer: Buffer, withAllowedIps: boolean): Dump {
  const reader = new GetAnswer(withAllowedIps);
  reader.feed(answer);
  return reader.result();
}

function malformed(answer: Buffer, start: number, end: number): UapiError {
  return new UapiError(`malformed UAPI answer: ${JSON.stringify(answer.toString('latin1', start, end))}`);
}

const KEY_BYTES = 32;
const keyScratch = Buffer.alloc(KEY_BYTES);

/** Each byte's value as a hex digit (lowercase, as UAPI writes them), 16 for any other byte. */
const HEX_VALUE = new Uint8Array(256).fill(16);
for (let d = 0; d < 16; d++) HEX_VALUE[d.toString(16).charCodeAt(0)] = d;

/** The 64 hex digits at `start` as the key's base64 (as `wg` prints it). */
function keyAt(buf: Buffer, start: number, end: number): string {
  if (end - start !== KEY_BYTES * 2) throw malformed(buf, start, end);
  let bad = 0;
  for (let i = 0; i < KEY_BYTES; i++) {
    const high = HEX_VALUE[buf[start + 2 * i] ?? 0] ?? 16;
    const low = HEX_VALUE[buf[start + 2 * i + 1] ?? 0] ?? 16;
    bad |= high | low;
    keyScratch[i] = (high << 4) | low;
  }
  if (bad > 15) throw malformed(buf, start, end);
  return keyScratch.toString('base64');
}

/** The decimal number at `start` (counters fit a double exactly up to 8 PiB). */
function numberAt(buf: Buffer, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i++) {
    const digit = (buf[i] ?? 0) - 0x30;
    if (digit < 0 || digit > 9) throw malformed(buf, start, end);
    n = n * 10 + digit;
  }
  return n;
}

function hexOf(base64Key: string): string {
  return Buffer.from(base64Key, 'base64').toString('hex');
}
