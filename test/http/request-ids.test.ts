/**
 * The request ids the panel makes (RequestIds): UUIDs of version 8, every one distinct, and distinct between
 * processes (or restarts) by their random part.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestIds } from '../../src/http/request-ids.ts';

const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('RequestIds', () => {
  it('makes distinct version-8 UUIDs, also across the counts whose upper digits change', () => {
    const ids = new RequestIds();
    const made = new Set<string>();
    for (let i = 0; i < 200_000; i++) {
      const id = ids.next();
      if (i % 9973 === 0 || i === 65_535 || i === 65_536) assert.match(id, UUID_V8);
      made.add(id);
    }
    assert.equal(made.size, 200_000);
  });

  it('makes other ids in another process (another RequestIds)', () => {
    const [one, two] = [new RequestIds(), new RequestIds()];
    assert.notEqual(one.next().slice(0, 23), two.next().slice(0, 23));
  });
});
