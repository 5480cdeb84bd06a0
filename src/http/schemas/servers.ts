import Type from 'typebox';
import { OBFUSCATION_LIMITS, SERVER_PROTOCOLS, SPECIAL_JUNK_MAX_CHARS } from '../../domain/protocols.ts';
import { IPV6_STATUSES } from '../../domain/servers.ts';
import { MAX_PREFIX6, MIN_PREFIX6 } from '../../domain/subnets6.ts';
import { DateTime, Id, PlainText } from './common.ts';

const Country = Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 code' });
/** Formats `host`, `ip` and `network` are src/domain/addresses.ts's rules (src/http/validation.ts). */
const Host = Type.String({
  minLength: 1,
  maxLength: 253,
  format: 'host',
  description: 'host name (RFC 1123 labels) or IPv4/IPv6 address clients connect to; no scheme, port or brackets',
});
const ServerName = PlainText({ minLength: 1, maxLength: 64 });
const City = PlainText({ maxLength: 64 });
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
const Mtu = Type.Integer({ minimum: 1280, maximum: 9000 });
const Keepalive = Type.Integer({ minimum: 0, maximum: 65535, description: 'seconds; 0 turns it off' });
const IpAddress = Type.String({ minLength: 1, maxLength: 45, format: 'ip', description: 'IPv4 or IPv6 address' });
const DnsList = Type.Array(IpAddress, { maxItems: 8 });
const Network = Type.String({
  minLength: 1,
  maxLength: 64,
  format: 'network',
  description: 'network in CIDR notation, host bits zero: 0.0.0.0/0, 10.0.0.0/8, ::/0',
});
const AllowedIps = Type.Array(Network, { minItems: 1, maxItems: 64 });
const MaxDevices = Type.Integer({ minimum: 1, maximum: 65533 });
const ClientToClient = Type.Boolean({
  description: 'clients of this server may reach each other; default false (docs/dataplane.md, "Client isolation")',
});

const Protocol = Type.Union(
  SERVER_PROTOCOLS.map((p) => Type.Literal(p)),
  { description: 'wireguard, or amneziawg: WireGuard with a wire image DPI does not recognise; fixed at creation' },
);
const Header = Type.String({
  maxLength: 21,
  pattern: '^[0-9]{1,10}(-[0-9]{1,10})?$',
  description:
    `a number or a range "A-B" in ${OBFUSCATION_LIMITS.headerMin}-${OBFUSCATION_LIMITS.headerMax}; ` +
    'the four never overlap',
});
const SpecialJunk = Type.String({
  minLength: 1,
  maxLength: SPECIAL_JUNK_MAX_CHARS,
  description:
    'a special junk packet as tags: <b 0x…> bytes, <r N> <rc N> <rd N> random bytes, letters, digits, <c> <t>',
});
const padding = (what: string) =>
  Type.Integer({
    minimum: 0,
    maximum: OBFUSCATION_LIMITS.paddingBytesMax,
    description: `bytes of padding before ${what}`,
  });
/** The integer and header fields, as POST and PATCH take them (each optional there). */
const obfuscationFields = {
  jc: Type.Integer({ minimum: 0, maximum: OBFUSCATION_LIMITS.jcMax, description: 'junk packets before a handshake' }),
  jmin: Type.Integer({ minimum: 0, maximum: OBFUSCATION_LIMITS.junkBytesMax, description: 'junk packet bytes, least' }),
  jmax: Type.Integer({ minimum: 0, maximum: OBFUSCATION_LIMITS.junkBytesMax, description: 'junk packet bytes, most' }),
  s1: padding('the handshake initiation; s1 + 56 != s2'),
  s2: padding('the handshake response'),
  s3: padding('the cookie reply'),
  s4: padding('each transport message'),
  h1: Header,
  h2: Header,
  h3: Header,
  h4: Header,
};

/** A server's AmneziaWG parameters as the server JSON shows them; i1-i5 only when set. */
const Obfuscation = Type.Object({
  ...obfuscationFields,
  i1: Type.Optional(SpecialJunk),
  i2: Type.Optional(SpecialJunk),
  i3: Type.Optional(SpecialJunk),
  i4: Type.Optional(SpecialJunk),
  i5: Type.Optional(SpecialJunk),
});

const ObfuscationCreate = Type.Partial(Obfuscation, {
  additionalProperties: false,
  description: 'AmneziaWG parameters; each one omitted is drawn at random for this server (i1-i5 are not)',
});

const NullableJunk = Type.Optional(Type.Union([SpecialJunk, Type.Null()]));
const ObfuscationPatch = Type.Object(
  {
    ...Type.Partial(Type.Object(obfuscationFields)).properties,
    i1: NullableJunk,
    i2: NullableJunk,
    i3: NullableJunk,
    i4: NullableJunk,
    i5: NullableJunk,
  },
  {
    additionalProperties: false,
    description: 'the fields given replace the current ones (null removes an i1-i5); the node applies the result',
  },
);

export const ServerSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    node: Type.Object({ id: Type.Integer(), name: Type.String() }),
    country: Type.String({ description: 'ISO country code; empty when it could not be guessed' }),
    city: Type.String(),
    status: Type.Union([
      Type.Literal('deploying'),
      Type.Literal('running'),
      Type.Literal('node_offline'),
      Type.Literal('error'),
    ]),
    protocol: Protocol,
    obfuscation: Type.Union([Obfuscation, Type.Null()], { description: 'AmneziaWG parameters; null for WireGuard' }),
    endpoint: Type.String(),
    listen_port: Type.Integer(),
    public_key: Type.String(),
    address: Type.String({ description: "the server's own address in its subnet, CIDR" }),
    subnet: Type.String(),
    address6: Type.Union([Type.String(), Type.Null()], {
      description: "the server's own IPv6 address in its subnet6, CIDR (RFC 5952 text); null: the server has no IPv6",
    }),
    subnet6: Type.Union([Type.String(), Type.Null()], {
      description: 'IPv6 subnet, CIDR: unique local (NAT66 at the node) or a global prefix routed to the node',
    }),
    ipv6: Type.Union(
      IPV6_STATUSES.map((s) => Type.Literal(s)),
      {
        description:
          "what the node does with the server's IPv6, as it last reported: off (none, or not reported yet), " +
          'nat66 (clients reach IPv6 beyond the node through NAT66), routed (subnet6 routed without NAT), ' +
          "tunnel_only (the node has no IPv6 uplink: only the server's own IPv6 address answers)",
      },
    ),
    dns: Type.Array(Type.String()),
    dns_on_server: Type.Boolean(),
    client_to_client: Type.Boolean({ description: 'clients of this server may reach each other (default false)' }),
    mtu: Type.Integer(),
    persistent_keepalive: Type.Integer(),
    client_allowed_ips: Type.Array(Type.String()),
    device_count: Type.Integer(),
    capacity: Type.Integer({ description: 'how many devices fit' }),
    created_at: DateTime,
  },
  { $id: 'Server', title: 'Server' },
);

export const ServerCreateBody = Type.Object(
  {
    name: ServerName,
    node_id: Type.Optional(
      Type.Integer({
        ...Id,
        description: 'default: the local node, or the only node (of those that can run the protocol)',
      }),
    ),
    protocol: Type.Optional(Protocol),
    obfuscation: Type.Optional(ObfuscationCreate),
    endpoint: Type.Optional(Host),
    listen_port: Type.Optional(Port),
    address: Type.Optional(
      Type.String({
        maxLength: 18,
        description:
          'IPv4 CIDR /16 to /30, e.g. 10.200.0.1/20, in 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10 ' +
          "and off the node's own networks; default the next free /24 of 10.128.0.0/9",
      }),
    ),
    address6: Type.Optional(
      Type.String({
        maxLength: 49,
        description:
          `IPv6 CIDR /${MIN_PREFIX6} to /${MAX_PREFIX6}, e.g. fd12:3456:789a:1::1/64, ` +
          'in fc00::/7 (NAT66 at the node) ' +
          'or a global prefix of 2000::/3 routed to the node; host bits zero (fd12:3456:789a:1::/64) give the server ' +
          "the first address; off the node's own networks and every other server's subnet6; " +
          "default the next free /64 of the panel's ULA /48",
      }),
    ),
    max_devices: Type.Optional(MaxDevices),
    dns: Type.Optional(DnsList),
    mtu: Type.Optional(Mtu),
    persistent_keepalive: Type.Optional(Keepalive),
    client_allowed_ips: Type.Optional(AllowedIps),
    client_to_client: Type.Optional(ClientToClient),
    country: Type.Optional(Country),
    city: Type.Optional(City),
  },
  { additionalProperties: false },
);

export const ServerPatchBody = Type.Object(
  {
    name: Type.Optional(ServerName),
    protocol: Type.Optional(Protocol),
    obfuscation: Type.Optional(ObfuscationPatch),
    endpoint: Type.Optional(Host),
    listen_port: Type.Optional(Port),
    mtu: Type.Optional(Mtu),
    dns: Type.Optional(DnsList),
    persistent_keepalive: Type.Optional(Keepalive),
    client_allowed_ips: Type.Optional(AllowedIps),
    client_to_client: Type.Optional(ClientToClient),
    max_devices: Type.Optional(MaxDevices),
    country: Type.Optional(Country),
    city: Type.Optional(City),
  },
  { additionalProperties: false },
);

export const NodeSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    status: Type.Union([Type.Literal('online'), Type.Literal('offline')]),
    public_host: Type.String(),
    version: Type.Union([Type.String(), Type.Null()]),
    last_seen_at: Type.Union([DateTime, Type.Null()]),
    server_count: Type.Integer(),
    device_count: Type.Integer(),
    free_capacity: Type.Integer(),
    driver: Type.Union([Type.String(), Type.Null()]),
    protocols: Type.Array(Protocol, {
      description: 'the protocols the node can run servers of, as it last reported (["wireguard"] before it does)',
    }),
  },
  { $id: 'Node', title: 'Node' },
);
