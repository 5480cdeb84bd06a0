/** The reference for bench/http.ts: bare Fastify answering, for each URL, the JSON body given in BODIES. */
import Fastify from 'fastify';

const bodies: Record<string, string> = JSON.parse(process.env.BODIES ?? '{}');
const app = Fastify({ logger: false });
// URLs that differ only in their query share a route; the body is the one of the whole URL.
for (const path of new Set(Object.keys(bodies).map((url) => url.split('?')[0] ?? url))) {
  app.get(path, async (request, reply) => reply.type('application/json; charset=utf-8').send(bodies[request.url]));
}
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
