import { messageOf } from '../domain/errors.ts';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import Type from 'typebox';
import type { Agent } from './agent.ts';
import { DriverError } from './driver.ts';
import { jsonValidatorCompiler } from '../platform/json-validation.ts';
import {
  AgentErrorSchema,
  AgentStatusSchema,
  DesiredServerSchema,
  DesiredStateSchema,
  NodeDigestSchema,
  NodePeersSchema,
  PeerChangeSchema,
  ResyncReportSchema,
  ServerStateSchema,
  UsageCollectSchema,
  UsageReportSchema,
} from './protocol.ts';

export interface AgentHttpOptions {
  agent: Agent;
  token: string;
  logger: FastifyBaseLogger;
  https?: { key: Buffer; cert: Buffer };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The agent's API for the panel: desired state in, state reached out. Every call needs the node token. */
export async function buildAgentApp(options: AgentHttpOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: 64 * 1024 * 1024,
    ...(options.https ? { https: options.https } : {}),
  });
  // Bodies are checked without type coercion: a null limit must never turn into 0 (or 0 into null).
  app.setValidatorCompiler(jsonValidatorCompiler());
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const expected = digest(options.token);

  app.addHook('onRequest', async (request, reply) => {
    const given = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? '';
    // Equal-length digests, compared in constant time, so the token leaks nothing through timing.
    if (!timingSafeEqual(digest(given), expected))
      return reply.code(401).send({ error: 'bad node token', failures: [] });
  });
  app.setErrorHandler((error, request, reply) => {
    if (error instanceof DriverError) return reply.code(500).send({ error: error.message, failures: error.failures });
    const status =
      typeof error === 'object' && error !== null && 'statusCode' in error && typeof error.statusCode === 'number'
        ? error.statusCode
        : 500;
    if (status >= 500) request.log.error({ err: error }, 'agent request failed');
    return reply.code(status).send({ error: messageOf(error), failures: [] });
  });

  const ServerIdParams = Type.Object({ id: Type.Integer({ minimum: 1 }) });
  api.get('/v1/status', { schema: { response: { 200: AgentStatusSchema } } }, () => options.agent.status());
  api.get('/v1/digest', { schema: { response: { 200: NodeDigestSchema } } }, () => options.agent.digest());
  api.get('/v1/peers', { schema: { response: { 200: NodePeersSchema } } }, () => options.agent.peersOnNode());
  api.post('/v1/usage', { schema: { body: UsageCollectSchema, response: { 200: UsageReportSchema } } }, (request) =>
    options.agent.collectUsage(request.body.ack),
  );
  api.put(
    '/v1/servers/:id',
    {
      schema: {
        params: ServerIdParams,
        body: DesiredServerSchema,
        response: { 200: ServerStateSchema, 400: AgentErrorSchema },
      },
    },
    async (request, reply) => {
      if (request.body.server.serverId !== request.params.id)
        return reply.code(400).send({ error: 'server id of path and body differ', failures: [] });
      return options.agent.applyServer(request.body);
    },
  );
  api.post(
    '/v1/servers/:id/peers',
    { schema: { params: ServerIdParams, body: PeerChangeSchema } },
    async (request, reply) => {
      await options.agent.changePeers(request.params.id, request.body);
      return reply.code(204).send();
    },
  );
  api.delete('/v1/servers/:id', { schema: { params: ServerIdParams } }, async (request, reply) => {
    await options.agent.removeServer(request.params.id);
    return reply.code(204).send();
  });
  api.put('/v1/state', { schema: { body: DesiredStateSchema, response: { 200: ResyncReportSchema } } }, (request) =>
    options.agent.resync(request.body.servers),
  );
  return app;
}
