/**
 * The arithmetic of kernel allowances (src/agent/quota/allowance.ts): every packet's count covers what WireGuard
 * counts for it, and a peer that sends as fast as it can, metered every tick, ends within one packet past its
 * limit, never before its last step.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { countsOf, MAX_OVERHEAD_BYTES, quotaAllowance } from '../../../src/agent/quota/allowance.ts';

/** WireGuard's count of one data message: the inner packet padded to 16, plus 32 bytes of header and tag. */
function outerOf(inner: number): number {
  return Math.ceil(inner / 16) * 16 + 32;
}

const MTU = 1420;

/**
 * A peer that sends `packet`-byte inner packets as fast as the quota lets it, with the agent moving the quota
 * every tick from the ledger's count (outer); the outer bytes counted when the peer is cut off, and the ticks.
 */
function saturate(limit: number, packet: number): { outer: number; ticks: number } {
  let outer = 0;
  let ticks = 0;
  while (outer < limit) {
    ticks++;
    let allowance = quotaAllowance(limit - outer, MTU);
    // The quota drops the packet that would take its count past the allowance: what passes stays within it.
    while (allowance >= countsOf(packet) * packet) {
      allowance -= countsOf(packet) * packet;
      outer += outerOf(packet);
    }
  }
  return { outer, ticks };
}

describe('kernel allowances: the arithmetic', () => {
  test('every packet from an IPv4 header alone to a jumbo frame counts at least 8/9 of what WireGuard counts', () => {
    for (let length = 20; length <= 9000; length++) {
      const counted = countsOf(length) * length;
      assert.ok(counted * 9 >= outerOf(length) * 8, `${length} bytes: counted ${counted}, outer ${outerOf(length)}`);
      assert.ok(outerOf(length) - length <= MAX_OVERHEAD_BYTES);
    }
    assert.deepEqual([20, 37, 38, 375, 376, 1420].map(countsOf), [3, 3, 2, 2, 1, 1]);
  });

  test('the allowance is 8/9 of what is left, plus one packet of the MTU; nothing once nothing is left', () => {
    assert.equal(quotaAllowance(9_000_000, MTU), 8_000_000 + MTU);
    assert.equal(quotaAllowance(1, MTU), MTU);
    assert.equal(quotaAllowance(0, MTU), 0);
    assert.equal(quotaAllowance(-5, MTU), 0);
  });

  test('a peer sending as fast as it can converges onto its limit and passes it by less than one packet', () => {
    for (const packet of [1420, 1000, 576, 52, 20]) {
      for (const limit of [100_000_000, 20_000_000, 1_000_000, 5000]) {
        const { outer, ticks } = saturate(limit, packet);
        assert.ok(outer >= limit && outer - limit < outerOf(MTU), `${packet}-byte packets, ${limit}: ${outer}`);
        assert.ok(ticks <= 12, `${packet}-byte packets, ${limit}: ${ticks} ticks`);
      }
    }
  });
});
