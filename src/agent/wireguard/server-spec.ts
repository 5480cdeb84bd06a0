/** What up() refuses before touching the host. */
import { addressWithPrefix, ipv6Text } from '../../domain/addresses.ts';
import type { ServerProtocol } from '../../domain/protocols.ts';
import { isValidKey } from '../../domain/wireguard-keys.ts';
import type { ServerSpec } from '../driver.ts';

/** What is wrong with `spec`, one line each; empty when it can be applied. */
export function serverSpecProblems(spec: ServerSpec): string[] {
  const problems: string[] = [];
  if (!isValidKey(spec.privateKey)) problems.push('private key is not a WireGuard key');
  if (!Number.isInteger(spec.listenPort) || spec.listenPort < 1 || spec.listenPort > 65535) {
    problems.push(`listen port ${spec.listenPort} is not 1-65535`);
  }
  if (!Number.isInteger(spec.mtu) || spec.mtu < 576 || spec.mtu > 9000) {
    problems.push(`mtu ${spec.mtu} is not 576-9000`);
  }
  if (addressWithPrefix(spec.address)?.family !== 4) {
    problems.push(`address ${JSON.stringify(spec.address)} is not an IPv4 address/prefix`);
  }
  if (spec.address6 !== undefined && address6Of(spec) === undefined) {
    problems.push(`address6 ${JSON.stringify(spec.address6)} is not an IPv6 address/prefix`);
  }
  if ((protocolOf(spec) === 'amneziawg') !== (spec.obfuscation !== undefined)) {
    problems.push('obfuscation is given exactly for an amneziawg server');
  }
  return problems;
}

/** The server's protocol; absent (a panel that predates AmneziaWG) is wireguard. */
export function protocolOf(spec: ServerSpec): ServerProtocol {
  return spec.protocol ?? 'wireguard';
}

/** The server's IPv6 address/prefix as `ip` prints it (`fd00::1/64`); undefined when it has none or it is malformed. */
export function address6Of(spec: ServerSpec): string | undefined {
  const parsed = spec.address6 === undefined ? undefined : addressWithPrefix(spec.address6);
  return parsed?.family === 6 ? `${ipv6Text(parsed.parts)}/${parsed.prefix}` : undefined;
}
