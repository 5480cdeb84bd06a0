/**
 * A forward proxy for a test host in a network namespace: the only way out of it, to the package
 * registries and nowhere else. Plain HTTP requests in absolute form (apt) and CONNECT tunnels (npm over
 * HTTPS) to a host:port on the list are passed on; anything else is answered 403 and counted.
 */
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface RegistryProxy {
  /** `http://HOST:PORT`, for `http_proxy` and `https_proxy`. */
  readonly url: string;
  /** Every `host:port` a request was refused for. */
  readonly refused: string[];
  /** `host:port` of every request passed on. */
  readonly passed: string[];
  close(): Promise<void>;
}

export async function startRegistryProxy(host: string, allowed: readonly string[]): Promise<RegistryProxy> {
  const refused: string[] = [];
  const passed: string[] = [];
  const sockets = new Set<Socket>();
  const allow = (target: string): boolean => {
    if (allowed.includes(target)) {
      passed.push(target);
      return true;
    }
    refused.push(target);
    return false;
  };
  const server = createServer((req, res) => {
    const target = URL.canParse(req.url ?? '') ? new URL(req.url ?? '') : undefined;
    if (target === undefined || target.protocol !== 'http:' || !allow(`${target.hostname}:${target.port || '80'}`)) {
      res.writeHead(403).end();
      return;
    }
    const upstream = request(target, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    const [name, port] = (req.url ?? '').split(':');
    if (name === undefined || port === undefined || !allow(`${name}:${port}`)) {
      client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    const upstream = connect(Number(port), name, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, host);
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    url: `http://${host}:${address.port}`,
    refused,
    passed,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
