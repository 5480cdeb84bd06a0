import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { FastifyReply } from 'fastify';
import type { Page } from '../domain/paging.ts';

/** Types whose nullable form fast-json-stringify writes as a type list. */
const SCALAR_TYPES = new Set(['string', 'integer', 'number', 'boolean']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNullSchema(schema: unknown): boolean {
  return isRecord(schema) && schema.type === 'null' && Object.keys(schema).length === 1;
}

function isStringLiteral(schema: unknown): schema is { type: 'string'; const: string } {
  return isRecord(schema) && schema.type === 'string' && typeof schema.const === 'string';
}

/**
 * The schema with each `anyOf: [scalar, null]` (TypeBox's `Union([T, Null()])`) written as
 * `type: [T, 'null']`, and each `anyOf` of string literals (`Union([Literal(a), …])`) as a string
 * `enum`, which mean the same. fast-json-stringify serialises an anyOf by running an ajv validation of
 * the branches against every value; a type list costs a `typeof`, a string nothing. Other keys are
 * kept; TypeBox's symbol keys are dropped (the serializer reads only JSON Schema).
 */
export function nullableAsTypeList(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(nullableAsTypeList);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) out[key] = nullableAsTypeList(value);
  const { anyOf, ...rest } = out;
  if (!Array.isArray(anyOf)) return out;
  if (anyOf.length > 0 && anyOf.every(isStringLiteral)) {
    return { ...rest, type: 'string', enum: anyOf.map((literal) => literal.const) };
  }
  if (anyOf.length !== 2) return out;
  const nullAt = anyOf.findIndex(isNullSchema);
  const other: unknown = anyOf[1 - nullAt];
  if (nullAt === -1 || !isRecord(other) || typeof other.type !== 'string' || !SCALAR_TYPES.has(other.type)) return out;
  return { ...rest, ...other, type: [other.type, 'null'] };
}

/** Fastify's own serializer factory (fast-json-stringify), given every schema with nullable unions as type lists. */
export const serializerFactory: SerializerFactory = (externalSchemas, options) => {
  const compiler = SerializerSelector()(nullableAsTypeList(externalSchemas), options);
  return (route) => compiler({ ...route, schema: nullableAsTypeList(route.schema) });
};

const PAGE_OPEN = Buffer.from('{"data":[');
const COMMA = Buffer.from(',');
const PAGE_CLOSE = { more: Buffer.from('],"has_more":true}'), last: Buffer.from('],"has_more":false}') };

/**
 * A `Page` (`{data, has_more}`) as the bytes its response schema serialises to, from each item's JSON
 * already serialised: a list route that keeps its items' bytes copies them instead of serialising and
 * encoding the whole page on every request.
 */
export function pageBytes(items: readonly Buffer[], hasMore: boolean): Buffer {
  return listBytes(PAGE_OPEN, items, hasMore ? PAGE_CLOSE.more : PAGE_CLOSE.last);
}

/** `before`, the items' JSON separated by commas, then `after`: a JSON list of kept items inside what holds it. */
function listBytes(before: Buffer, items: readonly Buffer[], after: Buffer): Buffer {
  const parts: Buffer[] = [before];
  for (const [i, item] of items.entries()) {
    if (i > 0) parts.push(COMMA);
    parts.push(item);
  }
  parts.push(after);
  return Buffer.concat(parts);
}

/**
 * The JSON of items whose views are kept per row (rows reused while nothing is committed): each item is
 * serialised once through its response schema (`$ref`, with the route's serializer compiler, so as a page or
 * object schema referring to it would) and kept as bytes while its view object lives. Items must not change
 * once serialised.
 */
export class ItemJson<T extends object> {
  readonly #schema: Record<string, unknown>;
  readonly #json = new WeakMap<T, Buffer>();

  constructor(schemaId: string) {
    this.#schema = { $ref: schemaId };
  }

  bytes(reply: FastifyReply, items: readonly T[]): Buffer[] {
    const serialize = reply.compileSerializationSchema(this.#schema);
    return items.map((item) => {
      let json = this.#json.get(item);
      if (json === undefined) {
        // The serializer takes a record; an item is copied into one once, when first serialised.
        json = Buffer.from(serialize(Object.fromEntries(Object.entries(item))));
        this.#json.set(item, json);
      }
      return json;
    });
  }
}

/**
 * The last bytes made of some items' JSON and a key (the rest of what they are sent in): a page asked for
 * again while nothing was committed has the very same item buffers (ItemJson), so it is sent as the same
 * buffer instead of being copied again. Sent buffers are never changed, so several answers may share one.
 */
class LastBytes {
  #key: string | undefined;
  #items: readonly Buffer[] = [];
  #bytes: Buffer | undefined;

  of(key: string, items: readonly Buffer[], make: () => Buffer): Buffer {
    const last = this.#bytes;
    const same =
      key === this.#key && items.length === this.#items.length && items.every((item, i) => item === this.#items[i]);
    if (last !== undefined && same) return last;
    const bytes = make();
    this.#key = key;
    this.#items = items;
    this.#bytes = bytes;
    return bytes;
  }
}

/**
 * Sends pages whose items' JSON is kept (ItemJson): a page shown again is copied from their bytes, or reused; the
 * very page object sent last (a kept page: keptPages) is sent as the same body at once. Pages must not change once
 * sent.
 */
export class PageWriter<T extends object> {
  readonly #items: ItemJson<T>;
  readonly #last = new LastBytes();
  #lastText: { bytes: Buffer; text: string } | undefined;
  #lastSent: { page: Page<T>; body: Buffer | string } | undefined;

  constructor(schemaId: string) {
    this.#items = new ItemJson(schemaId);
  }

  send(reply: FastifyReply, page: Page<T>): FastifyReply {
    if (this.#lastSent?.page !== page) {
      const items = this.#items.bytes(reply, page.data);
      const bytes = this.#last.of(String(page.has_more), items, () => pageBytes(items, page.has_more));
      this.#lastSent = { page, body: this.#small(bytes) };
    }
    return reply.type('application/json; charset=utf-8').send(this.#lastSent.body);
  }

  /**
   * A small page goes as text: Node writes a text body with its headers in one piece, and a buffer beside them
   * (two pieces, writev), which costs more than encoding a few hundred bytes. The text is kept with its bytes.
   */
  #small(bytes: Buffer): Buffer | string {
    if (bytes.length > SMALL_PAGE_BYTES) return bytes;
    if (this.#lastText?.bytes !== bytes) this.#lastText = { bytes, text: bytes.toString('utf8') };
    return this.#lastText.text;
  }
}

/** A page up to this size is sent as text (see PageWriter). */
const SMALL_PAGE_BYTES = 4096;

/**
 * Sends objects (a group) one list field of which holds items whose JSON is kept (ItemJson, a group's page of
 * devices): only the object's own fields are serialised (its schema, with the list empty), the items' bytes are
 * spliced in (withListBytes).
 */
export class ListFieldWriter<T extends object> {
  readonly #schema: Record<string, unknown>;
  readonly #field: string;
  readonly #items: ItemJson<T>;
  readonly #last = new LastBytes();

  constructor(schemaId: string, field: string, itemSchemaId: string) {
    this.#schema = { $ref: schemaId };
    this.#field = field;
    this.#items = new ItemJson(itemSchemaId);
  }

  send(reply: FastifyReply, object: Record<string, unknown>, items: readonly T[]): FastifyReply {
    const itemBytes = this.#items.bytes(reply, items);
    const envelope = reply.compileSerializationSchema(this.#schema)({ ...object, [this.#field]: [] });
    const bytes = this.#last.of(envelope, itemBytes, () => withListBytes(envelope, this.#field, itemBytes));
    return reply.type('application/json; charset=utf-8').send(bytes);
  }
}

/**
 * `envelope`, an object's JSON in which the list `field` was serialised empty, with that list made of the
 * items' JSON: an object that carries a page of kept items (a group and its devices) serialises only its own
 * few fields. The list is found by its key: no string can hold `"field":` (a string's quotes are escaped), so
 * only another key of that name in the envelope could, which it must not have.
 */
export function withListBytes(envelope: string, field: string, items: readonly Buffer[]): Buffer {
  const empty = `${JSON.stringify(field)}:[]`;
  const at = envelope.indexOf(empty);
  if (at === -1) throw new Error(`the serialised object has no empty list ${field}`);
  const open = at + empty.length - 1;
  return listBytes(Buffer.from(envelope.slice(0, open)), items, Buffer.from(envelope.slice(open)));
}
