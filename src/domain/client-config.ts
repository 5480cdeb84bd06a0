/**
 * The wg-quick (awg-quick for AmneziaWG) config of a device (docs/api.md "Configs"). Pure: the caller reads the
 * device and its server; src/http/qr.ts turns the same text into a QR code.
 */
import { createHash } from 'node:crypto';
import { AppError } from './errors.ts';
import { type Obfuscation, PROTOCOL_NAMES, SPECIAL_JUNK_KEYS, type ServerProtocol } from './protocols.ts';

export interface ClientConfigInput {
  /** null when the client made its own keys (created with `public_key`): its owner adds the line. */
  privateKey: string | null;
  /** The device's IPv4 address, without a prefix. */
  address: string;
  /** The device's IPv6 address, without a prefix; null when its server has no IPv6. */
  address6: string | null;
  dns: readonly string[];
  mtu: number;
  serverPublicKey: string;
  clientAllowedIps: readonly string[];
  /** Host name, IPv4 or IPv6 literal; no brackets, no port. */
  endpoint: string;
  listenPort: number;
  /** Seconds; 0 turns keepalives off. */
  persistentKeepalive: number;
  /** The server's AmneziaWG parameters; absent or null: a WireGuard server. */
  obfuscation?: Obfuscation | null;
}

export interface ClientConfigOptions {
  /** Adds the Linux firewall lines of docs/dataplane.md, "Measured facts" 5 (conf only: phone apps refuse PostUp). */
  killSwitch: boolean;
}

/**
 * The verified lines of docs/dataplane.md ("Measured facts" 5), byte for byte. They match on the fwmark wg-quick sets
 * only when it installs a default route (an AllowedIPs entry ending in /0); without it
 * `wg show %i fwmark` prints `off`, iptables refuses `--mark off` and wg-quick rolls the tunnel back.
 */
const KILL_SWITCH_POST_UP =
  'PostUp = ' +
  'iptables -I OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT' +
  ' && ip6tables -I OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT';
const KILL_SWITCH_PRE_DOWN =
  'PreDown = ' +
  'iptables -D OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT' +
  ' && ip6tables -D OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT';

/**
 * The config text: LF line endings, a trailing newline, values as the server has them.
 *
 * A kill switch on a split tunnel (client_allowed_ips without 0.0.0.0/0 and ::/0) is refused with a 422
 * naming `kill_switch` rather than rendered: the lines would make `wg-quick up` fail (see above), and
 * widening AllowedIPs silently would route all of the user's traffic through a server whose admin chose
 * not to. Asking for a kill switch means "nothing leaves outside the tunnel", which only a full tunnel
 * can keep; the message says what to change on the server.
 */
export function renderClientConfig(input: ClientConfigInput, options: ClientConfigOptions): string {
  if (options.killSwitch && !isFullTunnel(input.clientAllowedIps)) {
    throw new AppError(
      'validation_failed',
      `kill_switch needs a full tunnel: the server's client_allowed_ips (${input.clientAllowedIps.join(', ')}) ` +
        'must include 0.0.0.0/0 and ::/0',
      { kill_switch: "needs the server's client_allowed_ips to include 0.0.0.0/0 and ::/0" },
    );
  }
  const lines = ['[Interface]'];
  if (input.privateKey !== null) lines.push(`PrivateKey = ${token('private key', input.privateKey)}`);
  const addresses = [`${token('address', input.address)}/32`];
  if (input.address6 !== null) addresses.push(`${token('address6', input.address6)}/128`);
  lines.push(`Address = ${addresses.join(', ')}`);
  if (input.dns.length > 0) lines.push(`DNS = ${input.dns.map((server) => token('dns', server)).join(', ')}`);
  lines.push(`MTU = ${input.mtu}`);
  const obfuscation = input.obfuscation ?? null;
  if (obfuscation !== null) lines.push(...obfuscationLines(obfuscation));
  if (options.killSwitch) {
    // awg-quick's interface answers `awg show`, not `wg show` (its UAPI socket is under /var/run/amneziawg/).
    const hooks = [KILL_SWITCH_POST_UP, KILL_SWITCH_PRE_DOWN];
    lines.push(...(obfuscation === null ? hooks : hooks.map((line) => line.replaceAll('$(wg show', '$(awg show'))));
  }
  lines.push(
    '',
    '[Peer]',
    `PublicKey = ${token('server public key', input.serverPublicKey)}`,
    `AllowedIPs = ${input.clientAllowedIps.map((range) => token('client_allowed_ips', range)).join(', ')}`,
    `Endpoint = ${endpointHost(token('endpoint', input.endpoint))}:${input.listenPort}`,
  );
  // wg-quick and the apps treat 0 as off; the line would only add noise.
  if (input.persistentKeepalive > 0) lines.push(`PersistentKeepalive = ${input.persistentKeepalive}`);
  return `${lines.join('\n')}\n`;
}

/**
 * The `[Interface]` keys awg-quick and the AmneziaVPN/AmneziaWG apps read, spelt and ordered as amneziawg-tools
 * writes them (docs/decisions.md "AmneziaWG servers"): Jc, Jmin, Jmax, S1-S4, H1-H4, then I1-I5 when set.
 */
function obfuscationLines(o: Obfuscation): string[] {
  const lines = [
    `Jc = ${o.jc}`,
    `Jmin = ${o.jmin}`,
    `Jmax = ${o.jmax}`,
    `S1 = ${o.s1}`,
    `S2 = ${o.s2}`,
    `S3 = ${o.s3}`,
    `S4 = ${o.s4}`,
    `H1 = ${token('h1', o.h1)}`,
    `H2 = ${token('h2', o.h2)}`,
    `H3 = ${token('h3', o.h3)}`,
    `H4 = ${token('h4', o.h4)}`,
  ];
  for (const key of SPECIAL_JUNK_KEYS) {
    const value = o[key];
    if (value !== undefined) lines.push(`${key.toUpperCase()} = ${junkTags(key, value)}`);
  }
  return lines;
}

/** A special junk packet holds spaces between its tags' parts (`<b 0x…>`), but never a line break or `#`. */
function junkTags(label: string, value: string): string {
  if (value === '' || /[#\p{Cc}\u2028\u2029]/u.test(value)) {
    throw new AppError('internal_error', `the stored ${label} is empty or holds a line break or '#'`);
  }
  return value;
}

/** What a config is for: which protocol, and which apps open it (the share page and the download say so). */
export interface ConfigKind {
  protocol: ServerProtocol;
  /** The protocol as people name it. */
  name: string;
  /** The apps that import the file or scan its QR code. */
  apps: string;
}

export function configKind(protocol: ServerProtocol): ConfigKind {
  const apps =
    protocol === 'amneziawg'
      ? 'the AmneziaVPN or AmneziaWG app (the WireGuard app cannot open it)'
      : 'the WireGuard app';
  return { protocol, name: PROTOCOL_NAMES[protocol], apps };
}

/**
 * An IPv4 and an IPv6 /0, as verified. wg-quick sets the fwmark for any entry ending in /0 (its
 * `add_route`), so one family's /0 would let the lines install, but they would then cut the other
 * family off instead of tunnelling it: unverified, and the admin can add the missing /0 instead.
 */
function isFullTunnel(allowedIps: readonly string[]): boolean {
  const fullRanges = allowedIps.filter((range) => range.endsWith('/0'));
  return fullRanges.some((range) => !range.includes(':')) && fullRanges.some((range) => range.includes(':'));
}

/** An IPv6 literal needs brackets, or its colons would read as the port separator. */
function endpointHost(endpoint: string): string {
  return endpoint.includes(':') ? `[${endpoint}]` : endpoint;
}

/**
 * A stored value goes into a file that wg-quick runs hooks from as root: a line break in it could add a
 * PostUp line, and `#` starts a comment that cuts the line. The API's schemas do not exclude these for
 * every field, so the renderer refuses them rather than write a config that does something else.
 */
function token(label: string, value: string): string {
  if (value === '' || /[\s#\p{Cc}]/u.test(value)) {
    // The value stays out of the message: it may be a private key.
    throw new AppError(
      'internal_error',
      `the stored ${label} is empty or holds a space, line break or '#', so it cannot go into a WireGuard config`,
    );
  }
  return value;
}

/** wg-quick's interface-name rule (`[a-zA-Z0-9_=+.-]{1,15}`, IFNAMSIZ - 1 on Linux). */
const INTERFACE_NAME_MAX_CHARS = 15;
/** Names Windows cannot save as a file, with or without an extension. */
const WINDOWS_RESERVED_NAME = /^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\.|$)/i;
const NAME_HASH_HEX_CHARS = 8;

/**
 * The download name `<name>.conf`. wg-quick takes the interface name from the file name and refuses the
 * file unless that name is 1 to 15 of `[a-zA-Z0-9_=+.-]`, so a config saved as downloaded works with
 * `wg-quick up ./<name>.conf`, and the apps name the tunnel after it.
 *
 * From the device name, deterministically: accents are dropped (`Zoë` → `Zoe`), every run of other
 * characters becomes one `-`, leading `-` and `.` go (`ip` would read a leading `-` as an option, a
 * leading `.` hides the file, `.` and `..` are not interface names), then the first 15 characters
 * without a trailing `-` or `.`. Truncation can give two devices one name: names stay readable, and the
 * user can rename.
 * When nothing readable is left (empty, or all in another script), `wg-` and a hash of the name keep
 * two devices' files apart. Windows' reserved names get a `wg-` prefix so the file can be saved there.
 */
export function configFileName(deviceName: string): string {
  const readable = fitInterfaceName(
    deviceName
      .normalize('NFKD')
      .replace(/\p{M}/gu, '')
      .replace(/[^a-zA-Z0-9_=+.-]+/g, '-')
      .replace(/^[-.]+/, ''),
  );
  if (readable === '')
    return `wg-${createHash('sha256').update(deviceName).digest('hex').slice(0, NAME_HASH_HEX_CHARS)}.conf`;
  return `${WINDOWS_RESERVED_NAME.test(readable) ? fitInterfaceName(`wg-${readable}`) : readable}.conf`;
}

/** The first 15 characters, without a trailing `-` or `.` left by the cut. */
function fitInterfaceName(name: string): string {
  return name.slice(0, INTERFACE_NAME_MAX_CHARS).replace(/[-.]+$/, '');
}
