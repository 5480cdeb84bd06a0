import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { SCOPES } from '../../src/domain/api-keys.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { API_TYPES, apiTypesSource } from '../support/generate-api-types.ts';
import { type PanelProcess, startPanel } from '../support/panel.ts';

interface Operation {
  security?: Record<string, string[]>[];
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
            const needs = method === 'post' ? [] : [{ consoleSession: [] }];
            assert.deepEqual(operation.security, needs, `${where}: signing in needs nothing, the rest a session`);
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

  it('is what the committed API types of the console and the test client were generated from', async () => {
    const committed = readFileSync(API_TYPES, 'utf8');
    assert.equal(
      committed,
      await apiTypesSource(document),
      'console/src/api-types.ts is stale: run npm run gen:api-types',
    );
  });
});
