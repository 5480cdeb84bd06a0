/**
 * docs/openapi.json is the committed contract of the API (README "Client libraries"): the served document may add
 * to it, but removing or retyping anything in it fails here unless `info.version` changed its major. Regenerate
 * it after an addition with `npm run gen:openapi`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { openApiDocument } from '../../src/main/openapi.ts';
import { breakingChanges } from '../../sdk/tools/contract.ts';

const CONTRACT = new URL('../../docs/openapi.json', import.meta.url);

/** A small document in the served one's shape: a named schema, an operation with a parameter, a body, answers. */
function sample(version = '1.2'): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: { title: 't', version },
    components: {
      schemas: {
        Device: {
          type: 'object',
          properties: {
            id: { type: 'integer' },
            name: { type: 'string' },
            expires_at: { anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }] },
            dns: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
    paths: {
      '/api/v1/devices': {
        get: {
          parameters: [{ in: 'query', name: 'limit', schema: { type: 'integer' } }],
          responses: {
            200: {
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: {
                      data: { type: 'array', items: { $ref: '#/components/schemas/Device' } },
                      has_more: { type: 'boolean' },
                    },
                  },
                },
              },
            },
          },
        },
        post: {
          requestBody: {
            content: { 'application/json': { schema: { type: 'object', properties: { name: { type: 'string' } } } } },
          },
          responses: { 201: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Device' } } } } },
        },
      },
    },
  };
}

type Sample = ReturnType<typeof sample> & {
  components: { schemas: { Device: { properties: Record<string, unknown> } } };
  paths: Record<string, Record<string, { parameters?: { schema: unknown }[]; responses: Record<string, unknown> }>>;
};

/** The sample, changed by `change` on a copy. */
function changed(change: (document: Sample) => void, version?: string): Record<string, unknown> {
  const document = structuredClone(sample(version)) as Sample;
  change(document);
  return document;
}

describe('the OpenAPI contract (docs/openapi.json)', () => {
  it('the served document removes and retypes nothing of the committed one (npm run gen:openapi adds)', async () => {
    const committed = JSON.parse(readFileSync(CONTRACT, 'utf8'));
    const served = JSON.parse(JSON.stringify(await openApiDocument()));
    assert.deepEqual(breakingChanges(committed, served), []);
  });

  it('names a removed field, a retyped one, a removed parameter, status code and path', () => {
    const committed = sample();
    const served = changed((d) => {
      delete d.components.schemas.Device.properties.name;
      d.components.schemas.Device.properties.id = { type: 'string' };
      d.components.schemas.Device.properties.dns = { type: 'array', items: { type: 'integer' } };
      const get = d.paths['/api/v1/devices']?.get;
      if (get === undefined) throw new Error('sample without GET');
      get.parameters = [];
      delete d.paths['/api/v1/devices']?.post?.responses[201];
    });
    assert.deepEqual(breakingChanges(committed, served).sort(), [
      'GET /api/v1/devices: parameter query limit: removed',
      'GET /api/v1/devices: response 200.data[].dns[]: type string → integer',
      'GET /api/v1/devices: response 200.data[].id: type integer → string',
      'GET /api/v1/devices: response 200.data[].name: removed',
      'POST /api/v1/devices: response 201: removed',
    ]);
    const withoutPath = changed((d) => delete d.paths['/api/v1/devices']);
    assert.deepEqual(breakingChanges(committed, withoutPath), ['/api/v1/devices: removed']);
    const nullableNoMore = changed((d) => {
      d.components.schemas.Device.properties.expires_at = { type: 'string' };
    });
    assert.deepEqual(breakingChanges(committed, nullableNoMore), [
      'GET /api/v1/devices: response 200.data[].expires_at: type null|string → string',
    ]);
  });

  it('lets additions through, and anything under a new major version', () => {
    const committed = sample();
    const added = changed((d) => {
      d.components.schemas.Device.properties.address = { type: 'string' };
      d.paths['/api/v1/plans'] = { get: { responses: { 200: {} } } };
      const post = d.paths['/api/v1/devices']?.post;
      if (post !== undefined) post.responses['4XX'] = {};
    });
    assert.deepEqual(breakingChanges(committed, added), []);
    const nextMajor = changed((d) => delete d.paths['/api/v1/devices'], '2.0');
    assert.deepEqual(breakingChanges(committed, nextMajor), []);
    assert.notDeepEqual(
      breakingChanges(
        committed,
        changed((d) => delete d.paths['/api/v1/devices'], '1.3'),
      ),
      [],
    );
  });
});
