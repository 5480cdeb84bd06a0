/** The reference for bench/http.ts: bare Fastify answering the same JSON as the API's empty page. */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/api/v1/servers', async () => ({ data: [], has_more: false }));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
