/**
 * The arithmetic of kernel allowances (docs/dataplane.md, "Where each byte is counted"): how many bytes a peer's
 * nftables quota may count, given the bytes the usage ledger says it has left. Pure.
 *
 * The ledger reads WireGuard's counters: each data message is the inner packet padded to a multiple of 16, plus
 * 32 bytes (header and tag), so at most the inner length + 47. The quota counts inner packets as the kernel sees
 * them (`skb->len`): packets shorter than the thresholds below are counted once more for each threshold they are
 * under, so that every packet's count times RATIO is at least what WireGuard counts for it. An allowance of
 * remaining / RATIO therefore never lets WireGuard's count pass the limit, whatever the packets' sizes; the next
 * metering tick moves it up as the ledger sees the true count, so it converges onto the limit from below. One
 * packet of the server's MTU more lets the last step cross the limit, so the ledger sees it reached and the
 * peer is cut off.
 */

/** WireGuard's bytes per data message beyond the inner packet, at most: 32 of header and tag, 15 of padding. */
export const MAX_OVERHEAD_BYTES = 47;
/** Outer bytes per counted byte the conversion assumes: 9/8, held as a fraction so the arithmetic stays exact. */
const RATIO_NUMERATOR = 9;
const RATIO_DENOMINATOR = 8;
/**
 * Packets shorter than each of these are counted once more (so twice under 376 bytes, three times under 38):
 * from 376 bytes up, length + 47 is at most 9/8 of the length; from 38, of twice it; from 20 (an IPv4 header
 * alone), of three times it. Longest first.
 */
export const RECOUNT_BELOW = [376, 38] as const;

/** How many times the quota counts an (unsegmented) packet of `length` bytes. */
export function countsOf(length: number): number {
  return 1 + RECOUNT_BELOW.filter((threshold) => length < threshold).length;
}

/**
 * The bytes a peer's quota may count from now on, when the ledger says `remainingBytes` are left (outer, as
 * WireGuard counts them) on a server whose MTU is `mtu`: none once nothing is left.
 */
export function quotaAllowance(remainingBytes: number, mtu: number): number {
  if (remainingBytes <= 0) return 0;
  return Math.floor((remainingBytes * RATIO_DENOMINATOR) / RATIO_NUMERATOR) + mtu;
}
