import Type from 'typebox';
import { DateTime } from './common.ts';

const Country = Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 code' });
/** A host name, an IPv4 or a bare IPv6 address: nothing that could break out of a config line. */
const HOST_PATTERN = '^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$';
const Host = Type.String({ minLength: 1, maxLength: 253, pattern: HOST_PATTERN, description: 'host name or IP address clients connect to (no port)' });
const ServerName = Type.String({ minLength: 1, maxLength: 64 });
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
const Mtu = Type.Integer({ minimum: 1280, maximum: 9000 });
const Keepalive = Type.Integer({ minimum: 0, maximum: 65535, description: 'seconds; 0 turns it off' });
const DnsList = Type.Array(Type.String({ minLength: 1, maxLength: 253, pattern: HOST_PATTERN }), { maxItems: 8 });
const AllowedIps = Type.Array(Type.String({ minLength: 1, maxLength: 64, pattern: '^[0-9a-fA-F.:]+/[0-9]{1,3}$' }), { minItems: 1, maxItems: 64 });
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
    status: Type.Union([Type.Literal('deploying'), Type.Literal('running'), Type.Literal('node_offline'), Type.Literal('error')]),
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
    node_id: Type.Optional(Type.Integer({ minimum: 1, description: 'default: the local node, or the only node' })),
    endpoint: Type.Optional(Host),
    listen_port: Type.Optional(Port),
    address: Type.Optional(Type.String({ description: 'CIDR, e.g. 10.200.0.1/20; default the next free /24 of 10.128.0.0/9' })),
    max_devices: Type.Optional(MaxDevices),
    dns: Type.Optional(DnsList),
    mtu: Type.Optional(Mtu),
    persistent_keepalive: Type.Optional(Keepalive),
    client_allowed_ips: Type.Optional(AllowedIps),
    client_to_client: Type.Optional(ClientToClient),
    country: Type.Optional(Country),
    city: Type.Optional(Type.String({ maxLength: 64 })),
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
    city: Type.Optional(Type.String({ maxLength: 64 })),
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
