import Type from 'typebox';
import type { ServerView } from '../../services/server-views.ts';
import type { ServerService } from '../../services/servers.ts';
import type { NodeService, NodeView } from '../../services/nodes.ts';
import type { Api } from '../api.ts';
import { actorOf } from '../auth.ts';
import { operation } from '../operation.ts';
import { PageQueryFields, pageRequest } from '../paging.ts';
import { IdParams, Page } from '../schemas/common.ts';
import { PageWriter } from '../serialization.ts';
import { ServerCreateBody, ServerPatchBody } from '../schemas/servers.ts';

const ServerRef = Type.Ref('Server');
const NodeRef = Type.Ref('Node');
export function serverRoutes(api: Api, services: { servers: ServerService; nodes: NodeService }): void {
  serverCollectionRoutes(api, services.servers);
  serverItemRoutes(api, services.servers);
  nodeRoutes(api, services.nodes);
}

/** The server list and create. */
function serverCollectionRoutes(api: Api, servers: ServerService): void {
  // Server pages are kept pages (ServerService.list): each is serialised once.
  const serverPages = new PageWriter<ServerView>('Server');

  api.get(
    '/servers',
    operation('servers:read', {
      summary: 'List servers, oldest first',
      tags: ['servers'],
      querystring: Type.Object(
        { country: Type.Optional(Type.String({ pattern: '^[A-Za-z]{2}$' })), ...PageQueryFields },
        { additionalProperties: false },
      ),
      response: { 200: Page(ServerRef) },
    }),
    async (request, reply) => {
      const page = await servers.list({ country: request.query.country?.toUpperCase() }, pageRequest(request.query));
      return serverPages.send(reply, page);
    },
  );

  api.post(
    '/servers',
    operation(
      'servers:write',
      {
        summary: 'Create and deploy a server',
        tags: ['servers'],
        body: ServerCreateBody,
        response: { 201: ServerRef },
      },
      { idempotent: true },
    ),
    async (request, reply) => {
      const b = request.body;
      const claim = request.idempotencyClaim;
      const server = await servers.create(
        {
          name: b.name,
          nodeId: b.node_id,
          protocol: b.protocol,
          obfuscation: b.obfuscation,
          endpoint: b.endpoint,
          listenPort: b.listen_port,
          address: b.address,
          address6: b.address6,
          maxDevices: b.max_devices,
          dns: b.dns,
          mtu: b.mtu,
          persistentKeepalive: b.persistent_keepalive,
          clientAllowedIps: b.client_allowed_ips,
          clientToClient: b.client_to_client,
          country: b.country,
          city: b.city,
        },
        actorOf(request),
        claim ? (tx, result) => claim.storeReply(tx, 201, result) : undefined,
      );
      return reply.code(201).send(server);
    },
  );
}

/** One server: read, change, delete. */
function serverItemRoutes(api: Api, servers: ServerService): void {
  api.get(
    '/servers/:id',
    operation('servers:read', {
      summary: 'Get a server',
      tags: ['servers'],
      params: IdParams,
      response: { 200: ServerRef },
    }),
    (request) => servers.get(request.params.id),
  );

  api.patch(
    '/servers/:id',
    operation('servers:write', {
      summary: 'Change a server',
      description:
        'A new listen_port or mtu recreates the interface (connections drop for a moment); client_to_client ' +
        "changes the node's rules in place; obfuscation (AmneziaWG) is merged over the current parameters, " +
        "applied by the node and changes every device's config (event server.obfuscation_changed); other changes " +
        'apply to configs issued from then on. address, node and protocol are fixed.',
      tags: ['servers'],
      params: IdParams,
      body: ServerPatchBody,
      response: { 200: ServerRef },
    }),
    (request) => {
      const b = request.body;
      return servers.update(
        request.params.id,
        {
          name: b.name,
          protocol: b.protocol,
          obfuscation: b.obfuscation,
          endpoint: b.endpoint,
          listenPort: b.listen_port,
          mtu: b.mtu,
          dns: b.dns,
          persistentKeepalive: b.persistent_keepalive,
          clientAllowedIps: b.client_allowed_ips,
          clientToClient: b.client_to_client,
          maxDevices: b.max_devices,
          country: b.country,
          city: b.city,
        },
        actorOf(request),
      );
    },
  );

  api.delete(
    '/servers/:id',
    operation('servers:write', {
      summary: 'Delete a server and its devices',
      description: 'A server with devices needs force=true (else 409 server_has_devices).',
      tags: ['servers'],
      params: IdParams,
      querystring: Type.Object(
        { force: Type.Optional(Type.Boolean({ default: false })) },
        { additionalProperties: false },
      ),
      response: { 204: Type.Null() },
    }),
    async (request, reply) => {
      await servers.delete(request.params.id, request.query.force ?? false, actorOf(request));
      return reply.code(204).send(null);
    },
  );
}

function nodeRoutes(api: Api, nodes: NodeService): void {
  // Node pages are kept pages (NodeService.list): each is serialised once.
  const nodePages = new PageWriter<NodeView>('Node');

  api.get(
    '/nodes',
    operation('servers:read', { summary: 'List nodes', tags: ['nodes'], response: { 200: Page(NodeRef) } }),
    async (_request, reply) => nodePages.send(reply, await nodes.list()),
  );

  api.get(
    '/nodes/:id',
    operation('servers:read', { summary: 'Get a node', tags: ['nodes'], params: IdParams, response: { 200: NodeRef } }),
    (request) => nodes.get(request.params.id),
  );
}
