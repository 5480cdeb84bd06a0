/**
 * Addresses, networks and host names as clients may give them for a server: each shape written out
 * whole, so nothing a rule lets through can break a config line (`Endpoint = host:port`, `DNS = …`,
 * `AllowedIPs = …`) or name something other than it seems.
 */

const IPV4 = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;

/** The four octets of a dotted IPv4 address (no leading zeros), or undefined. */
export function ipv4Octets(text: string): number[] | undefined {
  const match = IPV4.exec(text);
  if (match === null) return undefined;
  const octets = match.slice(1, 5).map(Number);
  return octets.every((o) => o <= 255) ? octets : undefined;
}

/**
 * The eight 16-bit groups of an IPv6 address in RFC 4291 §2.2 text (`::` once at most, an IPv4 tail
 * allowed), or undefined. No zone (`%eth0`) and no brackets: neither belongs in a config value.
 */
export function ipv6Groups(text: string): number[] | undefined {
  if (text.length > 45 || !/^[0-9A-Fa-f:.]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parse = (part: string, last: boolean): number[] | undefined => {
    if (part === '') return [];
    const groups: number[] = [];
    const pieces = part.split(':');
    for (const [i, piece] of pieces.entries()) {
      if (last && i === pieces.length - 1 && piece.includes('.')) {
        const v4 = ipv4Octets(piece);
        if (v4 === undefined) return undefined;
        groups.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else {
        if (!/^[0-9A-Fa-f]{1,4}$/.test(piece)) return undefined;
        groups.push(parseInt(piece, 16));
      }
    }
    return groups;
  };
  const [head = '', tail] = halves;
  const front = parse(head, tail === undefined);
  const back = tail === undefined ? [] : parse(tail, true);
  if (front === undefined || back === undefined) return undefined;
  if (tail === undefined) return front.length === 8 ? front : undefined;
  // `::` stands for at least one group of zeros.
  const missing = 8 - front.length - back.length;
  return missing >= 1 ? [...front, ...new Array<number>(missing).fill(0), ...back] : undefined;
}

/** An IPv4 or IPv6 address, nothing else. */
export function isIpAddress(text: string): boolean {
  return ipv4Octets(text) !== undefined || ipv6Groups(text) !== undefined;
}

/**
 * A network in CIDR notation: an IPv4 address with a prefix of 0-32 or an IPv6 address with 0-128,
 * and no host bits set (`10.0.0.0/8`, not `10.0.0.1/8`): what a client routes is then exactly what the
 * text says, and `0.0.0.1/0` cannot pass for "everything".
 */
export function isNetwork(text: string): boolean {
  const parsed = addressWithPrefix(text);
  return parsed !== undefined && networkParts(parsed).every((part, i) => part === parsed.parts[i]);
}

/**
 * The network an `address/prefix` lies in, written as `wg` prints an allowed-ips entry: host bits cleared,
 * IPv6 in its short form (`10.128.0.77/24` is `10.128.0.0/24`, `FD00:0::2/64` is `fd00::/64`); undefined when
 * the text is not an address with a prefix.
 */
export function canonicalNetwork(text: string): string | undefined {
  const parsed = addressWithPrefix(text);
  if (parsed === undefined) return undefined;
  const network = networkParts(parsed);
  return `${parsed.family === 4 ? network.join('.') : ipv6Text(network)}/${parsed.prefix}`;
}

/** An `address/prefix` taken apart: the address's four octets or eight groups, host bits as written. */
export interface AddressWithPrefix {
  family: 4 | 6;
  parts: number[];
  prefix: number;
}

/** `address/prefix` with an IPv4 address and a prefix of 0-32, or an IPv6 one and 0-128; else undefined. */
export function addressWithPrefix(text: string): AddressWithPrefix | undefined {
  const match = /^([^/]+)\/(0|[1-9][0-9]{0,2})$/.exec(text);
  if (match === null) return undefined;
  const [, address = '', prefixText = ''] = match;
  const prefix = Number(prefixText);
  const v4 = ipv4Octets(address);
  if (v4 !== undefined) return prefix <= 32 ? { family: 4, parts: v4, prefix } : undefined;
  const v6 = ipv6Groups(address);
  return v6 !== undefined && prefix <= 128 ? { family: 6, parts: v6, prefix } : undefined;
}

/** The parts with the host bits cleared. */
function networkParts({ family, parts, prefix }: AddressWithPrefix): number[] {
  const bitsEach = family === 4 ? 8 : 16;
  return parts.map((part, i) => {
    const networkBits = Math.min(bitsEach, Math.max(0, prefix - i * bitsEach));
    return part - (part % 2 ** (bitsEach - networkBits));
  });
}

/** Eight 16-bit groups in RFC 5952 text: lower case, the first longest run of two or more zero groups as `::`. */
export function ipv6Text(groups: readonly number[]): string {
  let best = { at: -1, length: 1 };
  for (let i = 0; i < groups.length; i++) {
    let j = i;
    while (j < groups.length && groups[j] === 0) j++;
    if (j - i > best.length) best = { at: i, length: j - i };
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.length).join(':')}`;
}

const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/**
 * A host name of RFC 1123 §2.1 labels (letters, digits, inner hyphens, 1-63 each, 253 in all), with no
 * trailing dot, whose last label is not all digits (RFC 3696 §2: `1.2.3.999` is a broken address, not a name).
 */
export function isHostName(text: string): boolean {
  if (text.length === 0 || text.length > 253) return false;
  const labels = text.split('.');
  return labels.every((l) => LABEL.test(l)) && !/^[0-9]+$/.test(labels.at(-1) ?? '');
}

/**
 * A host as people write it, brackets taken off an IPv6 literal (`[2001:db8::1]` is `2001:db8::1`, the way URLs
 * and `host:port` write it): the form the panel stores and configs bracket again where a port follows.
 */
export function unbracketed(text: string): string {
  const inner = /^\[(.*)\]$/.exec(text)?.[1];
  return inner !== undefined && ipv6Groups(inner) !== undefined ? inner : text;
}

/** Where clients connect: a host name or an IP address; no scheme, port, brackets or spaces. */
export function isHost(text: string): boolean {
  return isHostName(text) || isIpAddress(text);
}
