import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import Value from 'typebox/value';
import {
  type DesiredServer,
  DesiredServerSchema,
  digestWithoutIpv6,
  UsageCollectSchema,
  type UsageBatch,
} from '../../src/agent/protocol.ts';

/**
 * A stand-in for a remote node agent, for tests about the panel's HTTP conventions (idempotency,
 * draining), not about nodes: it speaks the agent protocol and can hold or fail server deploys.
 * It records; it does not simulate a data plane. It answers as an agent that predates IPv6: no `ipv6`
 * in its server states, resync report or digest, and a digest that hashes no IPv6 field.
 */
export class FakeAgent {
  readonly token = `fake-agent-token-${randomUUID()}`;
  readonly applied: number[] = [];
  /** While set, PUT /v1/servers waits for this promise before answering. */
  hold: Promise<void> | undefined;
  /** While true, PUT /v1/servers answers 500. */
  failDeploys = false;
  /** While true, POST /v1/servers/{id}/peers answers 500. */
  failPeerChanges = false;
  /** The host networks its status reports; undefined leaves them out, as an agent older than the field. */
  networks: string[] | undefined = ['192.0.2.20/24'];
  /** The protocols its status reports; undefined leaves them out, as an agent older than AmneziaWG. */
  protocols: string[] | undefined;
  /** Every peer change received, in order. */
  readonly peerChanges: { serverId: number; body: unknown }[] = [];
  /** Usage batches it reports (journal `fake`) until the panel acknowledges them; a test pushes them. */
  readonly usage: UsageBatch[] = [];
  /** The desired state of each server it was sent whole (deploy or resync), for its digest. */
  readonly held = new Map<number, DesiredServer>();
  #server: Server | undefined;

  get url(): string {
    const address = this.#server?.address();
    if (address === null || address === undefined || typeof address === 'string')
      throw new Error('the fake agent is not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  async start(): Promise<void> {
    const bootId = randomUUID();
    this.#server = createServer(async (req, res) => {
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.headers.authorization !== `Bearer ${this.token}`) return send(401, { error: 'bad token', failures: [] });
      const body = await readJson(req);
      if (req.method === 'GET' && req.url === '/v1/status') {
        const status = { bootId, version: 'fake', driver: 'dry-run', serverIds: [] };
        const reported = this.protocols === undefined ? status : { ...status, protocols: this.protocols };
        return send(200, this.networks === undefined ? reported : { ...reported, networks: this.networks });
      }
      if (req.method === 'PUT' && req.url === '/v1/state') {
        const servers = isStateBody(body) ? body.servers.filter((s) => Value.Check(DesiredServerSchema, s)) : [];
        this.held.clear();
        for (const desired of servers) this.held.set(desired.server.serverId, desired);
        return send(200, { applied: [...this.held.keys()], removed: [], failures: [] });
      }
      if (req.method === 'GET' && req.url === '/v1/digest') {
        const servers = [...this.held].map(([serverId, desired]) => {
          return { serverId, digest: digestWithoutIpv6(desired), discrepancies: [] };
        });
        return send(200, { servers });
      }
      if (req.method === 'POST' && req.url === '/v1/usage') {
        const acked = Value.Check(UsageCollectSchema, body) ? (body.ack?.seq ?? 0) : 0;
        this.usage.splice(0, this.usage.filter((batch) => batch.seq <= acked).length);
        return send(200, { journalId: 'fake', batches: this.usage, handshakes: [] });
      }
      const match = /^\/v1\/servers\/([0-9]+)$/.exec(req.url ?? '');
      if (match && req.method === 'PUT') {
        await this.hold;
        if (this.failDeploys)
          return send(500, { error: 'deploy refused by the fake agent', failures: ['scripted failure'] });
        const id = Number(match[1]);
        this.applied.push(id);
        if (Value.Check(DesiredServerSchema, body)) this.held.set(id, body);
        const server = isServerBody(body) ? body.server : { listenPort: 0, address: '', mtu: 0 };
        return send(200, {
          serverId: id,
          listenPort: server.listenPort,
          address: server.address,
          mtu: server.mtu,
          publicKey: 'fake',
          peerCount: 0,
        });
      }
      const peers = /^\/v1\/servers\/([0-9]+)\/peers$/.exec(req.url ?? '');
      if (peers && req.method === 'POST') {
        if (this.failPeerChanges)
          return send(500, { error: 'peer change refused by the fake agent', failures: ['scripted failure'] });
        this.peerChanges.push({ serverId: Number(peers[1]), body });
        res.writeHead(204);
        return res.end();
      }
      if (match && req.method === 'DELETE') {
        this.held.delete(Number(match[1]));
        res.writeHead(204);
        return res.end();
      }
      send(404, { error: 'no such route', failures: [] });
    });
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    this.#server?.close();
  }
}

interface ServerBody {
  server: { listenPort: number; address: string; mtu: number };
}

function isStateBody(body: unknown): body is { servers: unknown[] } {
  return typeof body === 'object' && body !== null && 'servers' in body && Array.isArray(body.servers);
}

function isServerBody(body: unknown): body is ServerBody {
  return (
    typeof body === 'object' &&
    body !== null &&
    'server' in body &&
    typeof body.server === 'object' &&
    body.server !== null
  );
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return text === '' ? undefined : JSON.parse(text);
}
