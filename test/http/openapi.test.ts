import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { SCOPES } from '../../src/domain/api-keys.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { typescriptFile } from '../../sdk/tools/generate.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

interface Operation {
  security?: Record<string, string[]>[];
  requestBody?: { required?: boolean; content: Record<string, { schema: { required?: string[] } }> };
  responses?: Record<string, unknown>;
  description?: string;
}

describe('OpenAPI description', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let document: Record<string, unknown>;

  before(async () => {
    db = await createTestDatabase('sqlite');
    panel = await startPanel({ database: db });
    const response = await fetch(`${panel.url}/api/v1/openapi.json`);
    assert.equal(response.status, 200, 'served without a key');
    document = await response.json();
  });
  after(async () => {
    await panel.stop();
    await db.drop();
  });

  it('is a valid OpenAPI 3.1 document with description version 1.2', async () => {
    assert.equal(document.openapi, '3.1.0');
    assert.deepEqual((document.info as { version: string }).version, '1.2');
    const result = await new Validator().validate(document);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  });

  it(
    'states the bearer scheme and the scope of every operation ' + 'under /api/v1, and the console session beside it',
    () => {
      const components = document.components as { securitySchemes: Record<string, Record<string, string>> };
      assert.deepEqual(components.securitySchemes.bearerAuth, {
        ...components.securitySchemes.bearerAuth,
        type: 'http',
        scheme: 'bearer',
      });
      assert.deepEqual(components.securitySchemes.consoleSession, {
        ...components.securitySchemes.consoleSession,
        type: 'apiKey',
        in: 'cookie',
        name: 'vpn_panel_session',
      });
      const paths = document.paths as Record<string, Record<string, Operation>>;
      let guarded = 0;
      for (const [path, item] of Object.entries(paths)) {
        for (const [method, operation] of Object.entries(item)) {
          const where = `${method.toUpperCase()} ${path}`;
          if (path === '/api/v1/openapi.json' || path === '/healthz') {
            assert.deepEqual(operation.security, [], `${where} needs no key`);
            continue;
          }
          if (path === '/console/session') {
            // Signing out needs no session either: it answers 204 with or without one.
            const needs = { post: [], get: [{ consoleSession: [] }], delete: [{ consoleSession: [] }, {}] }[method];
            assert.deepEqual(
              operation.security,
              needs,
              `${where}: signing in and out need nothing, the rest a session`,
            );
            continue;
          }
          if (path.startsWith('/api/v1/api-keys') || path.startsWith('/api/v1/console-users')) {
            // Keys and users are managed only from an admin's console session (console:admin): no key reaches them.
            assert.deepEqual(operation.security, [{ consoleSession: [] }], `${where}: an admin's session only`);
            assert.match(operation.description ?? '', /console:admin/, `${where} says so`);
            continue;
          }
          assert.deepEqual(operation.security?.[1], { consoleSession: [] }, `${where} takes a console session too`);
          const scopes = operation.security?.[0]?.bearerAuth ?? [];
          assert.equal(scopes.length, 1, `${where} names its scope`);
          assert.ok((SCOPES as readonly string[]).includes(scopes[0] ?? ''), `${where}: ${scopes[0]} is a spec scope`);
          assert.ok(operation.responses?.['4XX'] !== undefined, `${where} documents its error body`);
          guarded++;
        }
      }
      assert.ok(guarded >= 8, `found ${guarded} guarded operations`);
    },
  );

  it('marks a body required for a PATCH and where an empty one is refused (else one left out is read as {})', () => {
    const paths = document.paths as Record<string, Record<string, Operation>>;
    let bodies = 0;
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const body = operation.requestBody;
        if (body === undefined) continue;
        const required = body.content['application/json']?.schema.required ?? [];
        const needed = method === 'patch' || required.length > 0;
        assert.equal(body.required, needed, `${method.toUpperCase()} ${path}: fields ${required}`);
        bodies++;
      }
    }
    assert.equal(paths['/api/v1/devices/{id}/share']?.post?.requestBody?.required, false, 'optional fields');
    assert.equal(paths['/api/v1/plans/{id}']?.patch?.requestBody?.required, true, 'a PATCH is the change');
    assert.equal(paths['/api/v1/devices']?.post?.requestBody?.required, true, 'a create that needs server_id');
    assert.ok(bodies >= 10, `found ${bodies} bodies`);
  });

  it('spells its patterns so engines over code points compile them: no surrogate escapes', () => {
    const patterns = new Set<string>();
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) for (const item of value) collect(item);
      else if (typeof value === 'object' && value !== null) {
        for (const [name, child] of Object.entries(value)) {
          if (name === 'pattern' && typeof child === 'string') patterns.add(child);
          else collect(child);
        }
      }
    };
    collect(document);
    assert.ok(patterns.size > 0);
    for (const pattern of patterns) {
      // Rust's regex engine (schemathesis checks patterns with it) and Python's refuse a surrogate in a class.
      assert.doesNotMatch(pattern, /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/, pattern);
      const regex = new RegExp(pattern, 'u');
      if (regex.test('plain')) {
        assert.equal(regex.test('emoji \u{1F600} ok'), true, `${pattern} takes a character beyond U+FFFF`);
      }
    }
  });

  it('is what the committed API types of the SDK, the console and the test client were generated from', async () => {
    const generated = await typescriptFile(document);
    assert.equal(
      readFileSync(new URL(`../../${generated.path}`, import.meta.url), 'utf8'),
      generated.text,
      `${generated.path} is stale: run npm run gen:sdk`,
    );
  });
});
