import { messageOf } from '../domain/errors.ts';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { pipeline } from 'node:stream/promises';
import { crc32, createDeflateRaw, createGunzip } from 'node:zlib';

/**
 * The backup file: a gzip file (`zcat` reads it) of JSON lines:
 *   1. the header, {format, version, created_at, dialect, migrations, secret_fingerprint, tables}
 *   2. one line per row, [table, [values in the header's column order]], table after table
 *   3. the trailer, {rows: {table: count}}
 * The gzip header's comment holds the SHA-256 of every byte after that header, so any truncated or
 * altered byte is found before a restore touches a database.
 */
export const BACKUP_FORMAT = 'vpn-panel-backup';
export const BACKUP_VERSION = 1;

/** A value as the file carries it; binary columns travel as {base64}. */
export type PortableValue = string | number | null | { base64: string };

export interface BackupTable {
  name: string;
  columns: string[];
  /** Highest id the table's counter handed out, when it has one. */
  sequence: number | null;
}

export interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  version: typeof BACKUP_VERSION;
  created_at: string;
  /** The database it was made from (for the reader; a restore goes into either). */
  dialect: string;
  /** Migrations run on the source, in order: its schema level. */
  migrations: string[];
  /** Fingerprint of the panel secret its sealed values need; null when nothing was sealed. */
  secret_fingerprint: string | null;
  /** In foreign key order: rows of a table come after the rows of the tables it references. */
  tables: BackupTable[];
}

export interface BackupTrailer {
  rows: Record<string, number>;
}

/** A file that is no backup, is damaged, or does not fit the database: one line for the operator. */
export class BackupError extends Error {}

const COMMENT_PREFIX = `${BACKUP_FORMAT} sha256=`;
const DIGEST_HEX = 64;
/** ID1 ID2 CM=deflate FLG=FCOMMENT MTIME=0 XFL=0 OS=unknown */
const GZIP_START = Buffer.from([0x1f, 0x8b, 0x08, 0x10, 0, 0, 0, 0, 0, 0xff]);
const HEADER_BYTES = GZIP_START.length + COMMENT_PREFIX.length + DIGEST_HEX + 1;

function gzipHeader(digestHex: string): Buffer {
  return Buffer.concat([GZIP_START, Buffer.from(COMMENT_PREFIX + digestHex, 'latin1'), Buffer.from([0])]);
}

/**
 * Writes `chunks` (text) as a backup file at `path`: first to a temporary file beside it, renamed
 * over `path` only when complete, so a failed backup never leaves a partial file. Returns the digest.
 */
export async function writeBackupFile(path: string, chunks: AsyncIterable<string>): Promise<string> {
  const temporary = `${path}.${process.pid}.partial`;
  // Owner-only (it holds every row), and made anew: 'wx' neither follows a link planted at the
  // predictable name (a backup into /tmp as root) nor writes into a file already there.
  const file = await open(temporary, 'wx', 0o600);
  try {
    const hash = createHash('sha256');
    let position = HEADER_BYTES;
    const append = async (bytes: Buffer) => {
      hash.update(bytes);
      await file.write(bytes, 0, bytes.length, position);
      position += bytes.length;
    };
    let crc = 0;
    let size = 0;
    await pipeline(
      async function* () {
        for await (const text of chunks) {
          const bytes = Buffer.from(text, 'utf8');
          crc = crc32(bytes, crc);
          size += bytes.length;
          yield bytes;
        }
      },
      createDeflateRaw(),
      async (deflated: AsyncIterable<Buffer>) => {
        for await (const chunk of deflated) await append(chunk);
      },
    );
    const gzipTrailer = Buffer.alloc(8);
    gzipTrailer.writeUInt32LE(crc >>> 0, 0);
    gzipTrailer.writeUInt32LE(size % 2 ** 32, 4);
    await append(gzipTrailer);
    const digest = hash.digest('hex');
    await file.write(gzipHeader(digest), 0, HEADER_BYTES, 0);
    await file.sync();
    await file.close();
    await rename(temporary, path);
    return digest;
  } catch (error) {
    await file.close().catch(() => undefined);
    await rm(temporary, { force: true });
    throw error;
  }
}

/** The digest the file's gzip header promises, or a BackupError when it is no backup of this format. */
async function promisedDigest(path: string): Promise<string> {
  const file = await open(path, 'r').catch((error: unknown) => {
    throw new BackupError(`cannot read ${path}: ${messageOf(error)}`);
  });
  try {
    const start = Buffer.alloc(HEADER_BYTES);
    const { bytesRead } = await file.read(start, 0, HEADER_BYTES, 0);
    const header = start.subarray(0, bytesRead);
    const comment = header.subarray(GZIP_START.length, HEADER_BYTES - 1).toString('latin1');
    const digest = comment.slice(COMMENT_PREFIX.length);
    const shaped =
      bytesRead === HEADER_BYTES &&
      header.subarray(0, GZIP_START.length).equals(GZIP_START) &&
      header[HEADER_BYTES - 1] === 0;
    if (!shaped || !comment.startsWith(COMMENT_PREFIX) || !/^[0-9a-f]{64}$/.test(digest)) {
      throw new BackupError(`${path} is not a vpn-panel backup (or its first bytes are damaged)`);
    }
    return digest;
  } finally {
    await file.close();
  }
}

/** Checks every byte of the file against its checksum, then returns its header line. */
export async function verifyBackupFile(path: string): Promise<BackupHeader> {
  const promised = await promisedDigest(path);
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { start: HEADER_BYTES })) hash.update(chunk);
  if (hash.digest('hex') !== promised)
    throw new BackupError(`${path} is damaged: its SHA-256 checksum does not match (the file is truncated or altered)`);
  for await (const line of backupLines(path)) return parseHeader(line);
  throw new BackupError(`${path} is empty`);
}

/** The file's JSON lines in order, each parsed. */
export async function* backupLines(path: string): AsyncGenerator<unknown> {
  const decoder = new StringDecoder('utf8');
  let carry = '';
  const gunzip = createGunzip();
  const reading = pipeline(createReadStream(path), gunzip);
  try {
    for await (const chunk of gunzip) {
      const lines = (carry + decoder.write(chunk)).split('\n');
      carry = lines.pop() ?? '';
      for (const line of lines) yield parseLine(line);
    }
    await reading;
  } finally {
    gunzip.destroy();
    await reading.catch(() => undefined);
  }
  if (carry + decoder.end() !== '') throw new BackupError('the backup ends in the middle of a line');
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new BackupError(`the backup holds a line that is not JSON: ${line.slice(0, 80)}`);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

function isTable(value: unknown): value is BackupTable {
  return (
    isRecord(value) &&
    typeof value.name === 'string' &&
    isStringArray(value.columns) &&
    (value.sequence === null || typeof value.sequence === 'number')
  );
}

function parseHeader(line: unknown): BackupHeader {
  if (!isRecord(line) || line.format !== BACKUP_FORMAT)
    throw new BackupError('the backup does not start with its header');
  if (line.version !== BACKUP_VERSION)
    throw new BackupError(
      `the backup has format version ${String(line.version)}; this vpn-panel reads version ${BACKUP_VERSION}`,
    );
  const { created_at, dialect, migrations, secret_fingerprint, tables } = line;
  if (
    typeof created_at !== 'string' ||
    typeof dialect !== 'string' ||
    !isStringArray(migrations) ||
    !(secret_fingerprint === null || typeof secret_fingerprint === 'string') ||
    !Array.isArray(tables) ||
    !tables.every(isTable)
  ) {
    throw new BackupError('the backup header is incomplete');
  }
  return {
    format: BACKUP_FORMAT,
    version: BACKUP_VERSION,
    created_at,
    dialect,
    migrations,
    secret_fingerprint,
    tables,
  };
}

function isPortableValue(value: unknown): value is PortableValue {
  return (
    value === null ||
    typeof value === 'string' ||
    typeof value === 'number' ||
    (isRecord(value) && typeof value.base64 === 'string')
  );
}

/** A row line: [table, values]; undefined for any other line (the trailer). */
export function parseRow(line: unknown): { table: string; values: PortableValue[] } | undefined {
  if (!Array.isArray(line)) return undefined;
  const [table, values] = line;
  if (line.length !== 2 || typeof table !== 'string' || !Array.isArray(values) || !values.every(isPortableValue))
    throw new BackupError('the backup holds a malformed row');
  return { table, values };
}

export function parseTrailer(line: unknown): BackupTrailer {
  if (!isRecord(line) || !isRecord(line.rows))
    throw new BackupError('the backup holds a malformed line where its trailer should be');
  const rows: Record<string, number> = {};
  for (const [table, count] of Object.entries(line.rows)) {
    if (typeof count !== 'number') throw new BackupError('the backup trailer is malformed');
    rows[table] = count;
  }
  return { rows };
}
