/** The reference for bench/http.ts: bare Fastify answering, for each path, the JSON body given in BODIES. */
import Fastify from 'fastify';

const bodies: Record<string, string> = JSON.parse(process.env.BODIES ?? '{}');
const app = Fastify({ logger: false });
for (const [path, body] of Object.entries(bodies)) {
  app.get(path.split('?')[0] ?? path, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(body),
  );
}
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
