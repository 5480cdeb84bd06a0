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

/** A `Page` (`{data, has_more}`) as the bytes its response schema serialises to, from each item's JSON. */
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

/** What PageWriter keeps per page (or list): its items' JSON, and the body last made of them with an envelope. */
interface KeptBody {
  items: readonly Buffer[];
  envelope: string | undefined;
  body: Buffer | string;
}

/**
 * Sends pages, and lists of items inside an object (a group's page of devices), keeping the body made of each
 * per its identity: a service answers the same page object again only while it would be made the same (a kept
 * page: KeptPages; docs/architecture.md, "Reused reads"), so a page asked for again is sent as the body made the
 * first time. A page or list is serialised once, item by item through the item's response schema (`$ref`, with
 * the route's serializer compiler, as the page or object schema referring to it would), the items' JSON joined
 * (pageBytes, withListBytes). Nothing sent may change afterwards: pages are read-only, sent bodies are shared.
 */
export class PageWriter<T extends object> {
  readonly #item: Record<string, unknown>;
  /** Fastify compiles a serializer once per schema object: the same object for a schema id every time. */
  readonly #envelopes = new Map<string, Record<string, unknown>>();
  readonly #kept = new WeakMap<object, KeptBody>();

  constructor(itemSchemaId: string) {
    this.#item = { $ref: itemSchemaId };
  }

  /** A page (`{data, has_more}`), its body kept per page object. */
  send(reply: FastifyReply, page: Page<T>): FastifyReply {
    const close = page.has_more ? 'more' : 'last';
    const body = this.#body(reply, page, page.data, close, (items) => pageBytes(items, page.has_more));
    return reply.type('application/json; charset=utf-8').send(body);
  }

  /**
   * `object`, of the response schema `schemaId`, with `items` in its list `field`: only the object's own fields
   * are serialised on each request (the schema with the list empty); the list's JSON is kept per `items` array.
   */
  sendWithin(
    reply: FastifyReply,
    schemaId: string,
    object: Record<string, unknown>,
    field: string,
    items: readonly T[],
  ): FastifyReply {
    let schema = this.#envelopes.get(schemaId);
    if (schema === undefined) {
      schema = { $ref: schemaId };
      this.#envelopes.set(schemaId, schema);
    }
    const envelope = reply.compileSerializationSchema(schema)({ ...object, [field]: [] });
    const body = this.#body(reply, items, items, envelope, (json) => withListBytes(envelope, field, json));
    return reply.type('application/json; charset=utf-8').send(body);
  }

  /** The body of `items` (kept per `identity`) in `envelope`, made by `join` when the envelope is not the last one. */
  #body(
    reply: FastifyReply,
    identity: object,
    items: readonly T[],
    envelope: string,
    join: (json: readonly Buffer[]) => Buffer,
  ): Buffer | string {
    let kept = this.#kept.get(identity);
    if (kept === undefined) {
      const serialize = reply.compileSerializationSchema(this.#item);
      // The serializer takes a record; each item is copied into one.
      const json = items.map((item) => Buffer.from(serialize(Object.fromEntries(Object.entries(item)))));
      kept = { items: json, envelope: undefined, body: '' };
      this.#kept.set(identity, kept);
    }
    if (kept.envelope !== envelope) {
      kept.envelope = envelope;
      kept.body = small(join(kept.items));
    }
    return kept.body;
  }
}

/**
 * A small body goes as text: Node writes a text body with its headers in one piece, and a buffer beside them
 * (two pieces, writev), which costs more than encoding a few hundred bytes. Kept bodies are made once.
 */
function small(bytes: Buffer): Buffer | string {
  return bytes.length > SMALL_BODY_BYTES ? bytes : bytes.toString('utf8');
}

/** A body up to this size is sent as text (see small). */
const SMALL_BODY_BYTES = 4096;

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
