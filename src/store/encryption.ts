import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import {
  AliasNode,
  ColumnNode,
  type ColumnUpdateNode,
  InsertQueryNode,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  PrimitiveValueListNode,
  type QueryResult,
  ReferenceNode,
  type RootOperationNode,
  sql,
  TableNode,
  type UnknownRow,
  UpdateQueryNode,
  ValueListNode,
  ValueNode,
  ValuesNode,
} from 'kysely';
import { SECRET_BYTES } from '../domain/panel-secret.ts';
import type { Dialect, Queryable } from './db.ts';
import type { Store } from './open.ts';
import { describeTable } from './introspect.ts';
import { deriveImmediateReads } from './query-shapes.ts';
import type { Database } from './schema.ts';

/** Every value the database holds of these columns is sealed: no private key or credential is in it in plain. */
export const ENCRYPTED_COLUMNS = {
  devices: ['private_key'],
  servers: ['private_key'],
  nodes: ['token'],
  webhooks: ['secret'],
  // Links are found by the token's SHA-256; the token is kept only to show its URL again.
  share_links: ['token'],
  // A replayed POST /devices answer carries the device's config with its private key.
  idempotency_keys: ['response_body'],
} as const satisfies { [T in keyof Database]?: readonly (keyof Database[T] & string)[] };

/** Versioned, so a later scheme can sit beside this one while old values are re-sealed. */
const SEALED_PREFIX = 'enc:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/**
 * Opened values are kept by their sealed text: opening costs about 5 µs, and a page of 200 device
 * configs would otherwise open 200 keys on every request. Sealed texts never repeat (random IV).
 */
const OPENED_CACHE_SIZE = 20_000;

/** A sealed value that does not open: the secret is not the one it was sealed with, or the value was altered. */
export class SealedValueError extends Error {}

/** AES-256-GCM under a key derived from the panel secret. */
export class SecretBox {
  readonly #key: KeyObject;
  readonly #opened = new Map<string, string>();
  /** Names the secret without revealing it; the database keeps it to refuse any other secret. */
  readonly fingerprint: string;

  constructor(secret: Buffer) {
    if (secret.length !== SECRET_BYTES) throw new Error(`a panel secret is ${SECRET_BYTES} bytes`);
    this.#key = createSecretKey(
      Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'vpn-panel column encryption v1', 32)),
    );
    this.fingerprint = createHmac('sha256', secret)
      .update('vpn-panel secret fingerprint v1')
      .digest('base64url')
      .slice(0, 22);
  }

  static isSealed(text: string): boolean {
    return text.startsWith(SEALED_PREFIX);
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return SEALED_PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  open(sealed: string): string {
    const cached = this.#opened.get(sealed);
    if (cached !== undefined) return cached;
    const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64url');
    let plaintext: string;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, IV_BYTES));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      plaintext =
        decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES), undefined, 'utf8') + decipher.final('utf8');
    } catch {
      throw new SealedValueError(
        'a sealed value in the database does not open with the panel secret (another secret, or the value was altered)',
      );
    }
    if (this.#opened.size >= OPENED_CACHE_SIZE) this.#opened.delete(this.#opened.keys().next().value ?? '');
    this.#opened.set(sealed, plaintext);
    return plaintext;
  }
}

const SEALED_BY_TABLE = new Map<string, ReadonlySet<string>>(
  Object.entries(ENCRYPTED_COLUMNS).map(([table, columns]) => [table, new Set(columns)]),
);
const SEALED_NAMES: readonly string[] = [...new Set(Object.values(ENCRYPTED_COLUMNS).flat())];

/** The sealed columns the rows have (all rows of one query have the first one's columns). */
function sealedNamesIn(rows: readonly unknown[]): readonly string[] {
  const [first] = rows;
  if (typeof first !== 'object' || first === null) return [];
  return SEALED_NAMES.filter((name) => name in first);
}

function tableName(node: OperationNode | undefined): string | undefined {
  if (node === undefined) return undefined;
  if (TableNode.is(node)) return node.table.identifier.name;
  if (AliasNode.is(node)) return tableName(node.node);
  return undefined;
}

function columnName(node: OperationNode): string | undefined {
  if (ColumnNode.is(node)) return node.column.name;
  if (ReferenceNode.is(node) && ColumnNode.is(node.column)) return node.column.column.name;
  return undefined;
}

/**
 * Seals the encrypted columns on their way into the database and opens them on the way out, so
 * services and store functions only ever see plain values and the database only sealed ones.
 * Writes must give these columns as plain values (not expressions or raw SQL), or the query is refused.
 */
export class EncryptionPlugin implements KyselyPlugin {
  readonly #box: SecretBox;

  constructor(box: SecretBox) {
    this.#box = box;
  }

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (InsertQueryNode.is(node)) return this.#sealInsert(node);
    if (UpdateQueryNode.is(node)) return this.#sealUpdate(node);
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const names = sealedNamesIn(result.rows);
    if (names.length === 0) return result;
    return { ...result, rows: result.rows.map((row) => this.#openRow(row, names)) };
  }

  /** The rows with their sealed values opened as they are read; the same array when they hold none. */
  openRows<R>(rows: readonly R[]): readonly R[] {
    const names = sealedNamesIn(rows);
    return names.length === 0 ? rows : rows.map((row) => this.#openRow(row, names));
  }

  /**
   * The row with each sealed value opened when it is first read: most reads of these tables (a
   * node's resync, device pages without configs) never look at the private key, and opening one
   * costs more than reading its row.
   */
  #openRow<R>(row: R, names: readonly string[]): R {
    if (typeof row !== 'object' || row === null) return row;
    let out = row;
    for (const name of names) {
      const value: unknown = Reflect.get(row, name);
      if (typeof value !== 'string' || !SecretBox.isSealed(value)) continue;
      if (out === row) out = { ...row };
      const target = out;
      const settle = (plain: unknown) =>
        Object.defineProperty(target, name, { value: plain, writable: true, enumerable: true, configurable: true });
      Object.defineProperty(target, name, {
        enumerable: true,
        configurable: true,
        get: () => {
          const plain = this.#box.open(value);
          settle(plain);
          return plain;
        },
        set: settle,
      });
    }
    return out;
  }

  #sealValue(value: unknown, column: string): unknown {
    if (value === null || value === undefined) return value;
    if (typeof value !== 'string') throw new Error(`${column} is stored encrypted and takes text`);
    return this.#box.seal(value);
  }

  #sealNode(node: OperationNode, column: string): OperationNode {
    if (ValueNode.is(node)) return ValueNode.create(this.#sealValue(node.value, column));
    if (node.kind === 'DefaultInsertValueNode') return node;
    throw new Error(`${column} is stored encrypted: write it as a value, not an expression`);
  }

  #sealUpdates(
    updates: readonly ColumnUpdateNode[] | undefined,
    table: string | undefined,
  ): readonly ColumnUpdateNode[] | undefined {
    if (updates === undefined) return undefined;
    const sealed = table === undefined ? undefined : SEALED_BY_TABLE.get(table);
    return updates.map((update) => {
      const column = columnName(update.column);
      if (column === undefined) return update;
      if (table === undefined && SEALED_NAMES.includes(column))
        throw new Error(`${column} may be stored encrypted: update it through one named table`);
      return sealed?.has(column) ? { ...update, value: this.#sealNode(update.value, `${table}.${column}`) } : update;
    });
  }

  #sealInsert(node: InsertQueryNode): InsertQueryNode {
    const table = tableName(node.into);
    const sealed = table === undefined ? undefined : SEALED_BY_TABLE.get(table);
    if (table === undefined || sealed === undefined) return node;
    const positions = new Map<number, string>();
    (node.columns ?? []).forEach((c, i) => {
      if (sealed.has(c.column.name)) positions.set(i, `${table}.${c.column.name}`);
    });
    const onConflict = node.onConflict && {
      ...node.onConflict,
      updates: this.#sealUpdates(node.onConflict.updates, table),
    };
    if (positions.size === 0) return { ...node, onConflict };
    if (node.values === undefined || !ValuesNode.is(node.values))
      throw new Error(`${table} has encrypted columns: insert them as values`);
    const values = ValuesNode.create(
      node.values.values.map((list) =>
        PrimitiveValueListNode.is(list)
          ? PrimitiveValueListNode.create(list.values.map((v, i) => this.#sealValueAt(positions, i, v)))
          : ValueListNode.create(
              list.values.map((v, i) => {
                const column = positions.get(i);
                return column === undefined ? v : this.#sealNode(v, column);
              }),
            ),
      ),
    );
    return { ...node, values, onConflict };
  }

  #sealValueAt(positions: ReadonlyMap<number, string>, index: number, value: unknown): unknown {
    const column = positions.get(index);
    return column === undefined ? value : this.#sealValue(value, column);
  }

  #sealUpdate(node: UpdateQueryNode): UpdateQueryNode {
    return { ...node, updates: this.#sealUpdates(node.updates, tableName(node.table)) };
  }
}

/** The store whose queries seal and open the encrypted columns with `box`. */
export function withEncryption(store: Store, box: SecretBox): Store {
  const plugin = new EncryptionPlugin(box);
  const db = store.db.withPlugin(plugin);
  deriveImmediateReads(store.db, db, (rows) => plugin.openRows(rows));
  return { ...store, db };
}

/**
 * Seals every value of the encrypted columns still held in plain (written before encryption
 * existed, or restored from such a backup), row by row through the primary key. Returns how many.
 */
export async function sealPlainValues(db: Queryable, dialect: Dialect, box: SecretBox): Promise<number> {
  let changed = 0;
  for (const [table, columns] of Object.entries(ENCRYPTED_COLUMNS)) {
    const key = (await describeTable(db, dialect, table)).primaryKey;
    if (key.length === 0) throw new Error(`${table} has encrypted columns but no primary key to seal them by`);
    const keyRefs = sql.join(key.map((c) => sql.ref(c)));
    for (const column of columns) {
      const plain = await sql<UnknownRow>`select ${keyRefs}, ${sql.ref(column)} from ${sql.table(table)}
        where ${sql.ref(column)} is not null and ${sql.ref(column)} not like ${`${SEALED_PREFIX}%`}`.execute(db);
      for (const row of plain.rows) {
        const value = row[column];
        if (typeof value !== 'string') continue;
        const where = sql`(${keyRefs}) = (${sql.join(key.map((c) => row[c]))})`;
        await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${box.seal(value)} where ${where}`.execute(db);
        changed++;
      }
    }
  }
  return changed;
}
