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
    return parseGet(await this.#request(iface, 'get=1\n\n'), true);
  }

  /** The same without the allowed ips (each peer's `allowedIps` is ''): less to allocate, for counter reads. */
  async getCounters(iface: string): Promise<Dump> {
    return parseGet(await this.#request(iface, 'get=1\n\n'), false);
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
    const answer = await this.#request(iface, `set=1\n${body}\n`);
    const errno = errnoOf(answer);
    if (errno !== 0) throw new UapiError(`wireguard-go ${iface} refused the change: ${describeErrno(errno)}`, errno);
  }

  /** Sends `text`, resolves with the whole answer once its blank line came. */
  #request(iface: string, text: string): Promise<Buffer> {
    const path = this.socketPath(iface);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let length = 0;
      let lastByte = -1;
      let settled = false;
      const socket = createConnection(path);
      const finish = (error: UapiError | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        if (error === null) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, length));
        else reject(error);
      };
      const timer = setTimeout(
        () => finish(new UapiError(`wireguard-go ${iface} did not answer within ${this.#timeoutMs} ms (${path})`)),
        this.#timeoutMs,
      );
      // Not ended: wireguard-go answers after the blank line, and the socket is closed once the answer is in.
      socket.once('connect', () => socket.write(text));
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        length += chunk.length;
        // The answer ends with a blank line, the only place two newlines meet.
        const before = chunk.length > 1 ? (chunk[chunk.length - 2] as number) : lastByte;
        lastByte = chunk[chunk.length - 1] as number;
        if (lastByte === NEWLINE && before === NEWLINE) finish(null);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => {
        const why = error.code === 'ENOENT' ? 'no such socket (is its wireguard-go running?)' : error.message;
        finish(new UapiError(`cannot talk to wireguard-go ${iface} at ${path}: ${why}`));
      });
      socket.once('close', () =>
        finish(new UapiError(`wireguard-go ${iface} closed ${path} before it answered (did it exit?)`)),
      );
    });
  }
}

/** `errno` as wireguard-go sends it (negative, e.g. -22) → "EINVAL (Invalid argument)". */
function describeErrno(errno: number): string {
  try {
    return `${getSystemErrorName(-errno)} (${getSystemErrorMessage(-errno)})`;
  } catch {
    return `errno ${errno}`;
  }
}

/** The value of a set's answer, `errno=N\n\n`. */
function errnoOf(answer: Buffer): number {
  const at = answer.lastIndexOf('errno=');
  if (at === -1) throw new UapiError(`malformed UAPI answer: ${JSON.stringify(answer.toString('latin1', 0, 200))}`);
  return Math.abs(Number(answer.toString('latin1', at + 6, answer.length).trim()));
}

/**
 * Parses a `get=1` answer without splitting it into strings: a walk over the bytes, keys told apart by their
 * first letter and length (the UAPI's keys are a fixed set), numbers read digit by digit, only keys and
 * (when `withAllowedIps`) allowed ips made into strings. At 10,000 peers the answer is ~3 MB.
 */
export function parseGet(answer: Buffer, withAllowedIps: boolean): Dump {
  const peers: DumpPeer[] = [];
  let privateKey = '';
  let listenPort = 0;
  let peer: DumpPeer | null = null;
  let errno: number | null = null;
  let pos = 0;
  while (pos < answer.length) {
    let end = answer.indexOf(NEWLINE, pos);
    if (end === -1) end = answer.length;
    if (end === pos) break;
    const eq = answer.indexOf(EQUALS, pos);
    if (eq === -1 || eq > end) throw malformed(answer, pos, end);
    const first = answer[pos];
    const keyLength = eq - pos;
    const value = eq + 1;
    if (first === 0x70 /* p */ && keyLength === 10) {
      peer = { publicKey: keyAt(answer, value, end), allowedIps: '', lastHandshakeS: 0, rxBytes: 0, txBytes: 0 };
      peers.push(peer);
    } else if (first === 0x61 /* a */ && keyLength === 10) {
      if (peer !== null && withAllowedIps) {
        const ip = answer.toString('latin1', value, end);
        peer.allowedIps = peer.allowedIps === '' ? ip : `${peer.allowedIps},${ip}`;
      }
    } else if (first === 0x72 /* r */ && keyLength === 8) {
      if (peer !== null) peer.rxBytes = numberAt(answer, value, end);
    } else if (first === 0x74 /* t */ && keyLength === 8) {
      if (peer !== null) peer.txBytes = numberAt(answer, value, end);
    } else if (first === 0x6c /* l */ && keyLength === 23) {
      if (peer !== null) peer.lastHandshakeS = numberAt(answer, value, end);
    } else if (first === 0x70 /* p */ && keyLength === 11) {
      privateKey = keyAt(answer, value, end);
    } else if (first === 0x6c /* l */ && keyLength === 11) {
      listenPort = numberAt(answer, value, end);
    } else if (first === 0x65 /* e */ && keyLength === 5) {
      errno = Math.abs(Number(answer.toString('latin1', value, end)));
    }
    pos = end + 1;
  }
  if (errno === null) throw malformed(answer, 0, Math.min(answer.length, 200));
  if (errno !== 0) throw new UapiError(`wireguard-go could not read its device: ${describeErrno(errno)}`, errno);
  return { privateKey, listenPort, peers };
}

function malformed(answer: Buffer, start: number, end: number): UapiError {
  return new UapiError(`malformed UAPI answer: ${JSON.stringify(answer.toString('latin1', start, end))}`);
}

const KEY_BYTES = 32;
const keyScratch = Buffer.alloc(KEY_BYTES);

/** The 64 hex digits at `start` as the key's base64 (as `wg` prints it). */
function keyAt(buf: Buffer, start: number, end: number): string {
  if (end - start !== KEY_BYTES * 2) throw malformed(buf, start, end);
  for (let i = 0; i < KEY_BYTES; i++) {
    keyScratch[i] = (hexDigit(buf[start + 2 * i]) << 4) | hexDigit(buf[start + 2 * i + 1]);
  }
  return keyScratch.toString('base64');
}

function hexDigit(byte: number | undefined): number {
  if (byte === undefined) return 0;
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  throw new UapiError(`malformed UAPI answer: ${JSON.stringify(String.fromCharCode(byte))} in a key`);
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
