import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { actorFilter, fieldChanges } from '../../src/domain/activity.ts';

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
    assert.deepEqual(fieldChanges(null, device), { before: null, after: expectedFields });
    assert.deepEqual(fieldChanges(device, null), { before: expectedFields, after: null });
  });

  it('keeps only the fields an update changed', () => {
    const changed = { ...device, enabled: 0, metadata: '{"plan":"basic"}', updated_at: 'T2' };
    assert.deepEqual(fieldChanges(device, changed), {
      before: { enabled: true, metadata: { plan: 'pro' } },
      after: { enabled: false, metadata: { plan: 'basic' } },
    });
    assert.deepEqual(fieldChanges(device, { ...device, updated_at: 'T3' }), { before: {}, after: {} });
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
        const text = JSON.stringify([
          fieldChanges(null, row),
          fieldChanges(row, null),
          fieldChanges(row, { ...row, ...others }),
        ]);
        assert.doesNotMatch(text, /secret|key_hash|token|private_key|password|whsec_x|scrypt|"h"|"t"|"p"|"th"/);
      }
    },
  );
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
