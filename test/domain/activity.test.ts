import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ACTIVITY_RESOURCES, actorFilter, fieldChanges, readableResources } from '../../src/domain/activity.ts';
import { CONSOLE_ADMIN, type Requirement, scopesOfRole } from '../../src/domain/console-users.ts';

describe('fieldChanges (what an activity entry keeps of a change)', () => {
  const device = {
    id: 3,
    name: 'd1',
    enabled: 1,
    metadata: '{"plan":"pro"}',
    private_key: 'PRIVATE',
    public_key: 'PUBLIC',
    expires_at: null,
    updated_at: 'T1',
    created_at: 'T0',
  };

  it('keeps every field of a create or delete, without secrets or timestamps, shown as the API shows them', () => {
    const expectedFields = {
      id: 3,
      name: 'd1',
      enabled: true,
      metadata: { plan: 'pro' },
      public_key: 'PUBLIC',
      expires_at: null,
    };
    assert.deepEqual(fieldChanges('device', null, device), { before: null, after: expectedFields });
    assert.deepEqual(fieldChanges('device', device, null), { before: expectedFields, after: null });
  });

  it('keeps only the fields an update changed', () => {
    const changed = { ...device, enabled: 0, metadata: '{"plan":"basic"}', updated_at: 'T2' };
    assert.deepEqual(fieldChanges('device', device, changed), {
      before: { enabled: true, metadata: { plan: 'pro' } },
      after: { enabled: false, metadata: { plan: 'basic' } },
    });
    assert.deepEqual(fieldChanges('device', device, { ...device, updated_at: 'T3' }), { before: {}, after: {} });
  });

  it(
    'never keeps webhook secrets, API key hashes, node tokens, ' +
      'private keys or console password and session hashes',
    () => {
      const rows = [
        { secret: 'whsec_x', url: 'a' },
        { key_hash: 'h', name: 'k' },
        { token: 't', name: 'n' },
        { private_key: 'p', name: 's' },
        { password_hash: 'scrypt$x', name: 'u' },
        { token_hash: 'th', user_id: 1 },
      ];
      const others = {
        secret: 'other',
        key_hash: 'other',
        token: 'other',
        private_key: 'other',
        password_hash: 'other',
        token_hash: 'other',
      };
      for (const row of rows) {
        const text = JSON.stringify(
          ACTIVITY_RESOURCES.map((resource) => [
            fieldChanges(resource, null, row),
            fieldChanges(resource, row, null),
            fieldChanges(resource, row, { ...row, ...others }),
          ]),
        );
        assert.doesNotMatch(text, /secret|key_hash|token|private_key|password|whsec_x|scrypt|"h"|"t"|"p"|"th"/);
      }
    },
  );
});

describe('what an entry keeps of nodes and webhooks (what their routes hide)', () => {
  const node = {
    id: 2,
    name: 'edge',
    url: 'https://10.0.0.2:7000',
    token: 'edge-token-0123456789',
    cert_sha256: 'ab'.repeat(32),
    public_host: 'edge.example.net',
    status: 'offline',
    last_error: 'connect ECONNREFUSED 10.0.0.2:7000',
  };

  it("never keeps a node's agent URL, certificate pin or last error", () => {
    const kept = { id: 2, name: 'edge', public_host: 'edge.example.net', status: 'offline' };
    assert.deepEqual(fieldChanges('node', null, node), { before: null, after: kept });
    assert.deepEqual(fieldChanges('node', node, null), { before: kept, after: null });
    const moved = { ...node, url: 'https://10.0.0.3:7000', cert_sha256: 'cd'.repeat(32), last_error: null };
    assert.deepEqual(fieldChanges('node', node, moved), { before: {}, after: {} });
  });

  it("keeps a webhook's URL as its origin only: path, query and user info often hold the receiver's secret", () => {
    const hook = {
      id: 4,
      url: 'https://user:pw@hooks.example.com:8443/services/T1/B2/SECRET?token=RECEIVER',
      secret: 's',
    };
    assert.deepEqual(fieldChanges('webhook', null, hook), {
      before: null,
      after: { id: 4, url: 'https://hooks.example.com:8443/…' },
    });
    assert.deepEqual(fieldChanges('webhook', null, { id: 5, url: 'http://hooks.example.com/' }).after, {
      id: 5,
      url: 'http://hooks.example.com',
    });
    // Another path only: the URL changed, though both sides read the same.
    const next = { ...hook, url: 'https://hooks.example.com:8443/services/T1/B2/OTHER' };
    assert.deepEqual(fieldChanges('webhook', hook, next), {
      before: { url: 'https://hooks.example.com:8443/…' },
      after: { url: 'https://hooks.example.com:8443/…' },
    });
  });
});

describe('readableResources (whose entries a caller reads)', () => {
  const of = (requirements: readonly Requirement[]) => readableResources((r) => requirements.includes(r));

  it('gives each resource to whoever may read the resource itself', () => {
    assert.deepEqual(of([]), []);
    assert.deepEqual(of(['events:read']), []);
    assert.deepEqual(of(['events:read', 'devices:read']), ['device', 'plan']);
    assert.deepEqual(of([...scopesOfRole('viewer')]), ['device', 'server', 'node', 'plan']);
    assert.deepEqual(of([...scopesOfRole('admin')]), ['device', 'server', 'webhook', 'node', 'plan']);
    assert.deepEqual(of([...scopesOfRole('admin'), CONSOLE_ADMIN]), [...ACTIVITY_RESOURCES]);
  });
});

describe('actorFilter (--actor as a person types it)', () => {
  for (const [typed, actor] of [
    ['admin', 'admin'],
    ['system', 'system'],
    ['via API key shop', 'via API key shop'],
    ['via console user alice', 'via console user alice'],
    ['shop', 'via API key shop'],
    [' shop bot ', 'via API key shop bot'],
  ] as const) {
    it(`'${typed}' is ${actor}`, () => assert.equal(actorFilter(typed), actor));
  }
});
