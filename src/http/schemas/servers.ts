import Type from 'typebox';
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
    endpoint: Type.String(),
    listen_port: Type.Integer(),
    public_key: Type.String(),
    address: Type.String({ description: "the server's own address in its subnet, CIDR" }),
    subnet: Type.String(),
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
    node_id: Type.Optional(Type.Integer({ ...Id, description: 'default: the local node, or the only node' })),
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
  },
  { $id: 'Node', title: 'Node' },
);
