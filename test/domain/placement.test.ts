/**
 * `server_id: auto` (docs/decisions.md "Automatic placement"): "picks the running server with the fewest
 * devices that still has room"; narrowed by country and city; on a move "never the device's own server"; none
 * found is 409 `no_server_available` (docs/api.md "Errors").
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError } from '../../src/domain/errors.ts';
import { type PlacementRequest, type PlacementServer, pickServer } from '../../src/domain/placement.ts';

/** A running /24 server in Amsterdam with room for 253 devices, with `fields` changed. */
function server(id: number, fields: Partial<PlacementServer> = {}): PlacementServer {
  const subnet = `10.${id}.0.0/24`;
  return { id, status: 'running', country: 'NL', city: 'Amsterdam', capacity: 253, subnet, device_count: 0, ...fields };
}

/** The id picked among `servers` holding `counts` devices (by server id; a missing one holds none). */
function picked(servers: PlacementServer[], counts: Record<number, number>, request: PlacementRequest = {}): number {
  return pickServer(
    servers.map((s) => ({ ...s, device_count: counts[s.id] ?? 0 })),
    request,
  ).id;
}

function assertNoneAvailable(
  servers: PlacementServer[],
  counts: Record<number, number>,
  request: PlacementRequest = {},
): void {
  assert.throws(
    () => picked(servers, counts, request),
    (error: unknown) => error instanceof AppError && error.code === 'no_server_available',
  );
}

describe('server_id auto', () => {
  test('picks the server with the fewest devices; a server not in the counts has none', () => {
    assert.equal(picked([server(1), server(2), server(3)], { 1: 5, 2: 3, 3: 4 }), 2);
    assert.equal(picked([server(1), server(2)], { 1: 1 }), 2);
  });

  test('on a tie picks the oldest server (lowest id), whatever the order given', () => {
    assert.equal(picked([server(3), server(2), server(1)], { 1: 2, 2: 2, 3: 2 }), 1);
  });

  test('picks only a running server: deploying and error ones are never picked, however empty', () => {
    const servers = [server(1, { status: 'deploying' }), server(2, { status: 'error' }), server(3)];
    assert.equal(picked(servers, { 3: 100 }), 3);
    assertNoneAvailable([server(1, { status: 'deploying' }), server(2, { status: 'error' })], {});
  });

  test('skips a server at its capacity, and one whose subnet is full below its capacity', () => {
    assert.equal(picked([server(1, { capacity: 2 }), server(2)], { 1: 1, 2: 10 }), 1, 'room for one more');
    assert.equal(picked([server(1, { capacity: 2 }), server(2)], { 1: 2, 2: 10 }), 2, 'at capacity');
    // A /30 holds one device beside the server's own address, whatever the capacity says.
    assert.equal(picked([server(1, { capacity: 253, subnet: '10.1.0.0/30' }), server(2)], { 1: 1, 2: 10 }), 2);
    assertNoneAvailable([server(1, { capacity: 2 }), server(2, { capacity: 3 })], { 1: 2, 2: 3 });
  });

  test('narrows by country (an ISO code in any case) and by city (any case)', () => {
    const servers = [
      server(1, { country: 'DE', city: 'Berlin' }),
      server(2, { country: 'NL', city: 'Amsterdam' }),
      server(3, { country: 'NL', city: 'Rotterdam' }),
    ];
    const counts = { 1: 0, 2: 5, 3: 9 };
    assert.equal(picked(servers, counts), 1, 'no place asked: the emptiest anywhere');
    assert.equal(picked(servers, counts, { country: 'nl' }), 2);
    assert.equal(picked(servers, counts, { city: 'ROTTERDAM' }), 3);
    assert.equal(picked(servers, counts, { country: 'NL', city: 'rotterdam' }), 3);
    assertNoneAvailable(servers, counts, { country: 'JP' });
    assertNoneAvailable(servers, counts, { country: 'DE', city: 'Amsterdam' });
  });

  test('the room rule applies within the place asked: a full server there is not traded for one elsewhere', () => {
    const servers = [server(1, { country: 'NL', capacity: 1 }), server(2, { country: 'DE' })];
    assertNoneAvailable(servers, { 1: 1 }, { country: 'NL' });
  });

  test('a move never picks the server the device is on, even the emptiest; alone it leaves none', () => {
    assert.equal(picked([server(1), server(2)], { 1: 0, 2: 7 }, { current: 1 }), 2);
    assertNoneAvailable([server(1)], { 1: 0 }, { current: 1 });
  });
});
