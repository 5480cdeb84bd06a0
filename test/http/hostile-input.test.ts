/**
 * Hostile input, generated from the OpenAPI document a started panel serves (issue 11 item 5): for
 * every operation, every body field, query parameter and path parameter gets values of the wrong type,
 * out of range, huge, nested 5,000 deep, with control characters, and impossible date-times, with a
 * key of every scope and the ids of real resources (a server on the dry-run driver, a device, a
 * webhook). No answer may be a 5xx or carry a stack trace; every 4xx carries the error body (docs/api.md "Errors");
 * a value that no rule may let through (see `mustFail`) must be a 4xx; and /healthz answers after
 * each operation's batch. A value that happens to be valid may succeed (2xx).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { callApi, type PanelProcess, startPanel } from '../support/panel.ts';

/** The part of a JSON Schema (as the document prints it) this test reads. */
interface Schema {
  type?: string | string[];
  anyOf?: Schema[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  format?: string;
  $ref?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
}

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  schema: Schema;
}

interface Operation {
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
}

/** One hostile value: its JSON text (built as text: a 5,000-deep value cannot go through JSON.stringify). */
interface Hostile {
  label: string;
  json: string;
  /** Why no rule may let it through, whatever the field; undefined when only the schema decides. */
  never?: string;
}

/** One request and what its answer must be. */
interface Case {
  operation: string;
  what: string;
  method: string;
  path: string;
  body?: string;
  headers: Record<string, string>;
  /** Set when a 2xx would be a bug. */
  mustFail?: string;
}

const DEPTH = 5_000;
const deepArray = `${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`;
const deepObject = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
/** One of each kind issue 11 names: NUL, ESC, a line break, DEL, C1, U+2028, a bidi override, a lone surrogate. */
const CONTROL = ['\u0000', '\u001B[2J', '\n', '\u007F', '\u009B', '\u2028', '\u202E', '\uD800'];
/** Date-times that name no instant (or no instant JavaScript can print back the same way). */
const BAD_DATES = [
  '2026-06-30T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-04-31T00:00:00Z',
  '2026-02-29T00:00:00Z',
  '2026-01-01T24:00:00Z',
  '2026-01-01T00:00:00+24:00',
  '2026-01-01T00:00:00+23:60',
  '9999-12-31T23:59:59-01:00',
  '+275760-09-13T00:00:00Z',
  '275761-01-01T00:00:00Z',
  '2026-01-01',
  '2026-01-01T00:00:00',
  '2026-01-01 00:00:00Z',
  'now',
];
/** What the issue found accepted, per field; each must now be refused. */
const FIELD_EXTRAS: Record<string, string[]> = {
  public_key: [
    'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
    'AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
    '7P///////////////////////////////////////38=',
  ],
  address: ['127.0.0.1/24', '169.254.169.1/24', '8.8.8.1/24', '10.0.0.1/99', '10.0.0.1'],
  endpoint: [':', 'vpn.example.com:51820', 'https://vpn.example.com', '[2001:db8::1]', 'a b', 'fe80::1%eth0'],
  client_allowed_ips: [['0.0.0.0/999'], ['10.0.0.1/8'], ['::/129'], ['example.com/24']].map((v) => JSON.stringify(v)),
  dns: [['dns.example'], ['1.1.1.1/32'], [':']].map((v) => JSON.stringify(v)),
  // Sent to the AmneziaWG server of the sweep (PATCH) and with POST's default protocol: each breaks a rule.
  obfuscation: [
    { jc: -1 },
    { jmin: 90, jmax: 80 },
    { s1: 20, s2: 76 },
    { h1: '3' },
    { h1: '10-20', h2: '15' },
    { h2: '20-10' },
    { h3: '99999999999' },
    { i1: '<b 0x00>\nPostUp = touch /tmp/pwned' },
    { i2: '<b 0x00> # cut' },
    { jc: 5, extra: 1 },
  ].map((v) => JSON.stringify(v)),
  protocol: ['openvpn', 'AmneziaWG'],
  metadata: [
    JSON.stringify({ big: 'x'.repeat(5_000) }),
    `${'{"a":'.repeat(33)}{}${'}'.repeat(33)}`,
    `{"list":${'['.repeat(40)}${']'.repeat(40)}}`,
  ],
};
const RAW_FIELD_EXTRAS = new Set(['client_allowed_ips', 'dns', 'metadata', 'obfuscation']);
const GROUP = 'hostile-group';
/** `{id}` texts: none a number >= 1 of a resource. */
const BAD_IDS = ['abc', '0', '-1', '1.5', '1e308', '9007199254740993', 'x'.repeat(2_000)];
BAD_IDS.push('%00', '%1B', '%0A', '%E2%80%AE', '%', '%FF', '..%2F..%2Fhealthz');
/** `{external_id}` texts: control characters, too long, malformed escapes, or no such group. */
const BAD_EXTERNAL_IDS = ['%00', '%1B%5B2J', '%0A', '%C2%85', '%E2%80%A8', '%E2%80%AE', '%ED%A0%80'];
BAD_EXTERNAL_IDS.push('x'.repeat(300), '%', '%FF', 'no-such-group');
const BAD_QUERY_TEXTS = ['abc', '-1', '0', '1.5', '1e308', '9007199254740993', '', 'x'.repeat(8_000), 'true'];
BAD_QUERY_TEXTS.push('%00', '%1B%5B2J', '%0A', '%C2%9B', '%E2%80%AE', '%ED%A0%80', '%', '%FF');

/** Percent-decoded query text; a malformed escape stays as sent. */
function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function hostileValues(field: string): Hostile[] {
  const values: Hostile[] = [
    { label: 'null', json: 'null' },
    { label: 'true', json: 'true' },
    { label: '0', json: '0' },
    { label: '-1', json: '-1' },
    { label: '1.5', json: '1.5' },
    { label: '1e308', json: '1e308' },
    { label: '-1e308', json: '-1e308' },
    { label: '2**53+1', json: '9007199254740993' },
    { label: 'a number as text', json: '"5"' },
    { label: 'empty text', json: '""' },
    { label: '60 KB of text', json: JSON.stringify('A'.repeat(60_000)) },
    { label: '100 KB of text', json: JSON.stringify('A'.repeat(100_000)), never: 'a body over the 64 KB limit' },
    { label: 'an object', json: '{"x":1}' },
    { label: 'an array', json: '[1,"a",null]' },
    { label: 'an array 5,000 deep', json: deepArray, never: 'nested 5,000 deep' },
    { label: 'an object 5,000 deep', json: deepObject, never: 'nested 5,000 deep' },
  ];
  for (const c of CONTROL) {
    const label = `text with ${JSON.stringify(c)}`;
    values.push({ label, json: JSON.stringify(`a${c}b`), never: 'a control character' });
  }
  for (const extra of FIELD_EXTRAS[field] ?? []) {
    const json = RAW_FIELD_EXTRAS.has(field) ? extra : JSON.stringify(extra);
    values.push({ label: `issue 11: ${extra.slice(0, 60)}`, json, never: 'found accepted in issue 11' });
  }
  return values;
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/**
 * Why the schema refuses `value` whatever else holds, or undefined when it may pass. Only types,
 * enums, ranges and lengths are read: a value this cannot rule out is left to the panel (2xx allowed).
 */
function schemaRefuses(schema: Schema, value: unknown): string | undefined {
  if (schema.anyOf !== undefined) {
    const reasons = schema.anyOf.map((s) => schemaRefuses(s, value));
    return reasons.every((r) => r !== undefined) ? reasons.join(' and ') : undefined;
  }
  if (schema.$ref !== undefined) return undefined;
  const type = jsonType(value);
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const fits = types.includes(type) || (type === 'integer' && types.includes('number'));
    if (!fits) return `${type} where ${types.join('|')} goes`;
  }
  if (schema.enum !== undefined && !schema.enum.includes(value)) return 'not one of the enum';
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) return `below ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `above ${schema.maximum}`;
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (schema.maxLength !== undefined && length > schema.maxLength) return `longer than ${schema.maxLength}`;
    if (schema.minLength !== undefined && length < schema.minLength) return `shorter than ${schema.minLength}`;
    if (schema.format === 'date-time' && BAD_DATES.includes(value)) return 'no real instant';
  }
  return undefined;
}

/** True when the field takes text (alone or among other types). */
function takesText(schema: Schema): boolean {
  if (schema.anyOf !== undefined) return schema.anyOf.some(takesText);
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  return types.includes('string');
}

function takesDateTime(schema: Schema): boolean {
  return schema.format === 'date-time' || (schema.anyOf ?? []).some(takesDateTime);
}

/** Query text as ajv coerces it for the parameter's type (only the cases this test sends). */
function coerced(schema: Schema, text: string): unknown {
  const types = (schema.anyOf ?? [schema]).flatMap((s) => (Array.isArray(s.type) ? s.type : [s.type]));
  const numeric = types.includes('integer') || types.includes('number');
  if (numeric) return text === '' || Number.isNaN(Number(text)) ? text : Number(text);
  if (types.includes('boolean')) return text === 'true' ? true : text === 'false' ? false : text;
  return text;
}

/** The characters issue 11 wants out of every name and identifier (the test's own list, not the panel's). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for.
const UNSAFE = /[\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069\uD800-\uDFFF]/;
const STACK_TRACE = /\n\s+at |node_modules|\.ts:\d+|\.js:\d+/;

describe('hostile input, generated from the OpenAPI document', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let receiver: Server;
  let key: string;
  let document: { paths: Record<string, Record<string, Operation>> };
  /** Real ids by path parameter, per path prefix. */
  const ids = { server: 0, device: 0, webhook: 0, node: 0, group: '' };
  let receiverUrl = '';
  let names = 0;

  before(async () => {
    db = await createTestDatabase('sqlite');
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const address = receiver.address();
    if (address === null || typeof address === 'string') throw new Error('receiver not listening');
    receiverUrl = `http://127.0.0.1:${address.port}/hook`;
    panel = await startPanel({ database: db, env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
    key = await panel.createKey('hostile', 'all', ['--no-rate-limit']);
    // An AmneziaWG server: its PATCH judges every obfuscation rule, and its devices' configs carry the keys.
    const serverBody = { name: 'hostile-1', protocol: 'amneziawg' as const };
    const server = (await callApi(panel.url, key, 'POST', '/servers', serverBody)).expect(201);
    ids.server = server.id;
    ids.node = server.node.id;
    const device = await callApi(panel.url, key, 'POST', '/devices', { server_id: ids.server, external_id: GROUP });
    ids.device = device.expect(201).id;
    ids.group = GROUP;
    const webhookBody = { url: receiverUrl, events: ['device.created'] };
    ids.webhook = (await callApi(panel.url, key, 'POST', '/webhooks', webhookBody)).expect(201).id;
    document = await (await fetch(`${panel.url}/api/v1/openapi.json`)).json();
  });

  after(async () => {
    await panel?.stop();
    receiver?.close();
    await db?.drop();
  });

  /** A real id for `{id}` of this path (a missing one for DELETE, so the resources stay), or the group's. */
  function realPath(path: string, method: string): string {
    const owner = (['servers', 'devices', 'webhooks'] as const).find((p) => path.startsWith(`/api/v1/${p}`));
    const byOwner = { servers: ids.server, devices: ids.device, webhooks: ids.webhook };
    const id = method === 'DELETE' ? 999_999_999 : owner === undefined ? ids.node : byOwner[owner];
    const group = method === 'DELETE' ? 'no-such-group' : ids.group;
    return path.replace('{id}', String(id)).replace('{external_id}', encodeURIComponent(group));
  }

  /** Valid values for the required fields of a body, so a hostile field is what the panel judges. */
  function baseBody(schema: Schema): Record<string, unknown> {
    const valid: Record<string, () => unknown> = {
      name: () => `hostile-${++names}`,
      server_id: () => ids.server,
      url: () => receiverUrl,
      events: () => ['device.created'],
    };
    return Object.fromEntries((schema.required ?? []).map((field) => [field, valid[field]?.()]));
  }

  /** `base` with `field` set to raw JSON text. */
  function bodyWith(base: Record<string, unknown>, field: string, json: string): string {
    const rest = Object.entries(base).filter(([k]) => k !== field);
    const head = rest.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
    return `{${[...head, `${JSON.stringify(field)}:${json}`].join(',')}}`;
  }

  function casesOf(path: string, method: string, operation: Operation): Case[] {
    const cases: Case[] = [];
    const params = operation.parameters ?? [];
    const idempotent = params.some((p) => p.in === 'header' && p.name === 'idempotency-key');
    const bodySchema = operation.requestBody?.content['application/json']?.schema;
    const base = bodySchema === undefined ? undefined : baseBody(bodySchema);
    const baseText = base === undefined ? undefined : JSON.stringify(base);
    const real = realPath(path, method);
    const add = (what: string, concretePath: string, body: string | undefined, mustFail: string | undefined) =>
      cases.push({
        operation: `${method} ${path}`,
        what,
        method,
        path: concretePath,
        body,
        mustFail,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(idempotent ? { 'idempotency-key': randomUUID() } : {}),
        },
      });

    for (const param of params.filter((p) => p.in === 'path')) {
      const texts = param.name === 'id' ? BAD_IDS : BAD_EXTERNAL_IDS;
      for (const text of texts) {
        const concrete = realPath(path.replace(`{${param.name}}`, text), method);
        add(`path ${param.name}=${text.slice(0, 40)}`, concrete, baseText, 'no resource has this id');
      }
    }

    for (const param of params.filter((p) => p.in === 'query')) {
      // Query text stays under Node's 16 KB header limit, past which Node itself answers 431 without a body.
      const dates = takesDateTime(param.schema) ? BAD_DATES : BAD_DATES.slice(0, 2);
      for (const text of [...BAD_QUERY_TEXTS, ...dates.map(encodeURIComponent)]) {
        const decoded = percentDecoded(text);
        const refused = schemaRefuses(param.schema, coerced(param.schema, decoded));
        const mustFail = UNSAFE.test(decoded) && takesText(param.schema) ? 'a control character' : refused;
        add(`query ${param.name}=${text.slice(0, 40)}`, `${real}?${param.name}=${text}`, baseText, mustFail);
      }
      add(`query ${param.name} twice`, `${real}?${param.name}=1&${param.name}=2`, baseText, undefined);
    }

    if (bodySchema !== undefined && base !== undefined) {
      for (const [field, schema] of Object.entries(bodySchema.properties ?? {})) {
        for (const value of hostileValues(field)) {
          // A value with `never` set is refused whatever the field; the others as the field's schema says.
          const mustFail = value.never ?? schemaRefuses(schema, JSON.parse(value.json));
          add(`body ${field}=${value.label}`, real, bodyWith(base, field, value.json), mustFail);
        }
        if (takesDateTime(schema)) {
          for (const date of BAD_DATES) {
            add(`body ${field}=${date}`, real, bodyWith(base, field, JSON.stringify(date)), 'no real instant');
          }
        }
      }
      if (bodySchema.additionalProperties === false) {
        add('an unknown field', real, bodyWith(base, 'no_such_field', '1'), 'unknown field');
      }
    }

    if (method !== 'GET') {
      const object = bodySchema && 'not an object';
      const wholeBodies: Array<[string, string, string | undefined]> = [
        ['an array body', '[]', object],
        ['a text body', '"x"', object],
        ['a number body', '5', object],
        ['a null body', 'null', object],
        ['malformed JSON', '{', 'malformed JSON'],
        ['a body array 5,000 deep', deepArray, 'nested 5,000 deep'],
        ['a body object 5,000 deep', deepObject, 'nested 5,000 deep'],
        ['an unknown field 5,000 deep', `{"zzz":${deepArray}}`, 'nested 5,000 deep'],
        ['__proto__', '{"__proto__":{"polluted":1}}', bodySchema && 'prototype poisoning'],
        ['a 100 KB body', JSON.stringify({ name: 'A'.repeat(100_000) }), 'over the 64 KB body limit'],
      ];
      for (const [what, body, mustFail] of wholeBodies) add(what, real, body, mustFail);
    }
    return cases;
  }

  /** Every problem with one answer, as text; [] when it is as the issue requires. */
  async function judge(c: Case): Promise<string[]> {
    let response: Response;
    try {
      response = await fetch(`${panel.url}${c.path}`, { method: c.method, headers: c.headers, body: c.body });
    } catch (error) {
      return [`no answer: ${error instanceof Error ? `${error.message} ${String(error.cause)}` : String(error)}`];
    }
    const text = await response.text();
    const problems: string[] = [];
    if (response.status >= 500) problems.push(`answered ${response.status}`);
    if (STACK_TRACE.test(text) && response.status >= 400) problems.push('a stack trace in the answer');
    if (c.mustFail !== undefined && (response.status < 400 || response.status >= 500)) {
      problems.push(`answered ${response.status}, but this must be refused (${c.mustFail})`);
    }
    if (response.status >= 400) {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      const error = (body as { error?: { code?: unknown; message?: unknown; fields?: unknown } } | undefined)?.error;
      const fields = error?.fields;
      const isObject = typeof fields === 'object' && fields !== null && !Array.isArray(fields);
      const fieldsOk = isObject && Object.values(fields).every((v) => typeof v === 'string');
      const shaped = typeof error?.code === 'string' && typeof error.message === 'string' && fieldsOk;
      if (!shaped) problems.push(`no error body: ${text.slice(0, 200)}`);
    }
    return problems.map((p) => `${c.operation} with ${c.what}: ${p}`);
  }

  it('answers hostile values with 4xx and the error body (2xx when valid), never 5xx, and keeps serving', async () => {
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, op]) => path.startsWith('/api/v1/') && path !== '/api/v1/openapi.json' && op !== undefined)
        .map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
    );
    assert.ok(operations.length >= 30, `the document lists ${operations.length} operations`);
    const problems: string[] = [];
    let requests = 0;
    let next = 0;

    // Operations in parallel (the key is exempt from the rate limit), each one's batch in order.
    const worker = async () => {
      for (let i = next++; i < operations.length; i = next++) {
        const { path, method, op } = operations[i] ?? { path: '', method: '', op: {} };
        for (const c of casesOf(path, method, op)) {
          problems.push(...(await judge(c)));
          requests++;
        }
        const health = await fetch(`${panel.url}/healthz`);
        if (health.status !== 200) problems.push(`/healthz answered ${health.status} after ${method} ${path}`);
      }
    };
    await Promise.all(Array.from({ length: 6 }, worker));
    assert.ok(requests > 2_000, `sent ${requests} requests`);
    // 5xx answers first: they are what the issue found, and what would hide behind a long list.
    problems.sort((a, b) => Number(/answered 5/.test(b)) - Number(/answered 5/.test(a)));
    assert.deepEqual(problems.slice(0, 100), [], `${problems.length} problems of ${requests} requests`);
    // The resources the test made are as they were: hostile requests changed nothing they must not.
    assert.equal((await callApi(panel.url, key, 'GET', `/devices/${ids.device}`)).status, 200);
    assert.equal((await callApi(panel.url, key, 'GET', `/servers/${ids.server}`)).status, 200);
    assert.doesNotMatch(panel.output(), /request failed/, 'the panel logged no failed request');
  });

  it('refuses control characters in names given to the CLI: API keys and nodes', async () => {
    // Each CLI run starts a process (about a second): one name per kind of character, run side by side.
    const token = 'x'.repeat(32);
    const runs = [
      ['keys', 'create', '--name', 'bad\u001b[2Jkey', '--scopes', 'devices:read'],
      ['nodes', 'add', '--name', 'bad\nnode', '--url', 'http://127.0.0.1:9', '--token', token],
      ['nodes', 'add', '--name', 'bad\u009b\u202enode', '--url', 'http://127.0.0.1:9', '--token', token],
      ['nodes', 'add', '--name', 'edge', '--url', 'http://127.0.0.1:9', '--token', token, '--public-host', 'a:'],
    ];
    const results = await Promise.all(runs.map((args) => panel.cli(args)));
    for (const [i, result] of results.entries()) {
      assert.equal(result.code, 1, `${JSON.stringify(runs[i])}: ${result.stdout}${result.stderr}`);
    }
    assert.match(results[1]?.stderr ?? '', /control/);
    assert.match(results[3]?.stderr ?? '', /public host/);
    const nodes = await panel.cli(['nodes', 'list', '--json']);
    assert.deepEqual(
      JSON.parse(nodes.stdout).map((n: { name: string }) => n.name),
      ['local'],
      'no node was added',
    );
  });
});
