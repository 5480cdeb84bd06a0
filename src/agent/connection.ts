import { collectAll } from '../domain/async-iterables.ts';
import { TLSSocket } from 'node:tls';
import type { TSchema, Static } from 'typebox';
import { Compile } from 'typebox/compile';
import Value from 'typebox/value';
import type { Dispatcher, Response } from 'undici';
import type { Agent } from './agent.ts';
import { certSha256 } from './certificate.ts';
import type { ServerState } from './driver.ts';
import {
  AgentErrorSchema,
  type AgentStatus,
  AgentStatusSchema,
  type DesiredServer,
  type NodeDigest,
  NodeDigestSchema,
  type PeerChange,
  type ResyncReport,
  ResyncReportSchema,
  ServerStateSchema,
  type UsageAck,
  type UsageReport,
  UsageReportSchema,
} from './protocol.ts';

/** How the panel reaches a node: in process for the local node, over HTTP for a remote agent. */
export interface NodeConnection {
  status(): Promise<AgentStatus>;
  applyServer(desired: DesiredServer): Promise<ServerState>;
  changePeers(serverId: number, change: PeerChange): Promise<void>;
  /** Acknowledges the usage batches stored last time and takes every one not yet acknowledged. */
  collectUsage(ack: UsageAck | null): Promise<UsageReport>;
  removeServer(serverId: number): Promise<void>;
  /** Makes the node hold exactly `servers` (Agent.resync), sent as they come: a server at a time on the wire. */
  resync(servers: AsyncIterable<DesiredServer>): Promise<ResyncReport>;
  /** The drift check: each server's desired-state digest and what its host differs in (Agent.digest). */
  digest(): Promise<NodeDigest>;
}

export class LocalNodeConnection implements NodeConnection {
  readonly #agent: Agent;
  constructor(agent: Agent) {
    this.#agent = agent;
  }
  status(): Promise<AgentStatus> {
    return this.#agent.status();
  }
  applyServer(desired: DesiredServer): Promise<ServerState> {
    return this.#agent.applyServer(desired);
  }
  changePeers(serverId: number, change: PeerChange): Promise<void> {
    return this.#agent.changePeers(serverId, change);
  }
  collectUsage(ack: UsageAck | null): Promise<UsageReport> {
    return Promise.resolve(this.#agent.collectUsage(ack));
  }
  removeServer(serverId: number): Promise<void> {
    return this.#agent.removeServer(serverId);
  }
  async resync(servers: AsyncIterable<DesiredServer>): Promise<ResyncReport> {
    return this.#agent.resync(await collectAll(servers));
  }
  digest(): Promise<NodeDigest> {
    return this.#agent.digest();
  }
}

/**
 * A call to a node that failed: unreachable, refused, or answered with an error. The message names
 * the node by its name and may reach API clients; the cause holds the URL and the underlying error,
 * for the panel's log only (errorDetail in src/platform/error-detail.ts).
 */
export class NodeCallError extends Error {
  constructor(message: string, detail: string, cause?: unknown) {
    super(message, { cause: new Error(detail, { cause }) });
    this.name = 'NodeCallError';
  }
}

/** The agent served a certificate other than the pinned one; the connection was closed before any request. */
export class CertificatePinError extends Error {
  constructor(pinned: string, served: string | undefined) {
    super(`its certificate (sha256 ${served ?? 'none'}) is not the pinned --cert-sha256 ${pinned}`);
    this.name = 'CertificatePinError';
  }
}

function causeOfType<T extends Error>(error: unknown, type: new (...args: never[]) => T): T | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) if (e instanceof type) return e;
  return undefined;
}

/**
 * Connections that trust exactly the certificate with SHA-256 `pin`, whatever its issuer or names:
 * the check runs when the handshake is done, before undici writes a byte of the request. No TLS
 * session is cached, so every connection shows its certificate.
 */
async function pinnedDispatcher(pin: string): Promise<Dispatcher> {
  const { Agent: UndiciAgent, buildConnector } = await import('undici');
  const connect = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 0 });
  return new UndiciAgent({
    connect(options, callback) {
      connect(options, (error, socket) => {
        if (error !== null) return callback(error, null);
        const served = socket instanceof TLSSocket ? socket.getPeerCertificate().raw : undefined;
        const sha256 = served === undefined ? undefined : certSha256(served);
        if (sha256 === pin) return callback(null, socket);
        socket.destroy();
        callback(new CertificatePinError(pin, sha256), null);
      });
    },
  });
}

const STATUS_TIMEOUT_MS = 5_000;
/** Applying a server may start wireguard-go and set thousands of peers. */
const APPLY_TIMEOUT_MS = 60_000;
/** The drift check inspects every server of the node; well within the 60 s in which drift is repaired. */
const DIGEST_TIMEOUT_MS = 20_000;

export interface RemoteNode {
  /** The node's name in the panel: what error messages call it. */
  name: string;
  url: string;
  token: string;
  /** certSha256 form; when set, the agent's certificate must be exactly this one (no CA, no host name check). */
  certSha256: string | null;
}

export class HttpNodeConnection implements NodeConnection {
  readonly #name: string;
  readonly #baseUrl: string;
  readonly #token: string;
  readonly #certSha256: string | null;
  /**
   * Made at the first call; undefined: undici's global dispatcher, which verifies with the system CAs and
   * NODE_EXTRA_CA_CERTS.
   */
  #dispatcher: Promise<Dispatcher> | undefined;

  constructor(node: RemoteNode) {
    this.#name = node.name;
    this.#baseUrl = node.url.replace(/\/+$/, '');
    this.#token = node.token;
    this.#certSha256 = node.certSha256;
  }

  status(): Promise<AgentStatus> {
    return this.#call('GET', '/v1/status', undefined, STATUS_TIMEOUT_MS, AgentStatusSchema);
  }
  async applyServer(desired: DesiredServer): Promise<ServerState> {
    const path = `/v1/servers/${desired.server.serverId}`;
    const state = await this.#call('PUT', path, desired, APPLY_TIMEOUT_MS, ServerStateSchema);
    // An agent that predates IPv6 sends no `ipv6`: it made none.
    return { ...state, ipv6: state.ipv6 ?? 'off' };
  }
  collectUsage(ack: UsageAck | null): Promise<UsageReport> {
    return this.#call('POST', '/v1/usage', { ack }, APPLY_TIMEOUT_MS, UsageReportSchema);
  }
  async changePeers(serverId: number, change: PeerChange): Promise<void> {
    await this.#call('POST', `/v1/servers/${serverId}/peers`, change, APPLY_TIMEOUT_MS, undefined);
  }
  async removeServer(serverId: number): Promise<void> {
    await this.#call('DELETE', `/v1/servers/${serverId}`, undefined, APPLY_TIMEOUT_MS, undefined);
  }
  resync(servers: AsyncIterable<DesiredServer>): Promise<ResyncReport> {
    const body = new StreamedBody(desiredStateText(servers));
    return this.#call('PUT', '/v1/state', body, APPLY_TIMEOUT_MS * 5, ResyncReportSchema);
  }
  digest(): Promise<NodeDigest> {
    return this.#call('GET', '/v1/digest', undefined, DIGEST_TIMEOUT_MS, NodeDigestSchema);
  }

  async #call<S extends TSchema | undefined>(
    method: string,
    path: string,
    body: unknown,
    timeoutMs: number,
    schema: S,
  ): Promise<S extends TSchema ? Static<S> : undefined>;
  async #call(
    method: string,
    path: string,
    body: unknown,
    timeoutMs: number,
    schema: TSchema | undefined,
  ): Promise<unknown> {
    const node = `node '${this.#name}'`;
    const where = `${method} ${this.#baseUrl}${path}`;
    let response: Response;
    try {
      // undici is loaded at the first call to a remote node: a panel whose one node is in process never loads it.
      const { fetch } = await import('undici');
      if (this.#certSha256 !== null) this.#dispatcher ??= pinnedDispatcher(this.#certSha256);
      response = await fetch(this.#baseUrl + path, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : body instanceof StreamedBody ? body.bytes() : JSON.stringify(body),
        duplex: 'half',
        signal: AbortSignal.timeout(timeoutMs),
        dispatcher: await this.#dispatcher,
      });
    } catch (error) {
      // The body's source failed (the database, while the state was being read): that error, not the node's.
      if (body instanceof StreamedBody && body.failure !== undefined) throw body.failure;
      const pin = causeOfType(error, CertificatePinError);
      if (pin) throw new NodeCallError(`${node} is unreachable: ${pin.message}`, where, error);
      if (causeOfType(error, DOMException)?.name === 'TimeoutError') {
        throw new NodeCallError(`${node} did not answer within ${timeoutMs / 1000} s`, where, error);
      }
      throw new NodeCallError(`${node} is unreachable`, where, error);
    }
    const text = await response.text();
    if (!response.ok) {
      const detail = `${where} answered ${response.status}: ${text.slice(0, 500)}`;
      if (response.status === 401) throw new NodeCallError(`${node} refused the panel's node token`, detail);
      throw new NodeCallError(`${node} answered ${response.status}: ${agentError(text)}`, detail);
    }
    if (schema === undefined) return undefined;
    try {
      return compiled(schema).Parse(JSON.parse(text));
    } catch (error) {
      throw new NodeCallError(`${node} sent an answer of the wrong shape to ${method} ${path}`, where, error);
    }
  }
}

/**
 * A JSON request body sent as its source makes it (chunked), so it is never whole in memory. A failure of the
 * source aborts the request and is kept, for the caller to see instead of the aborted request's.
 */
class StreamedBody {
  readonly #chunks: AsyncIterable<string>;
  #failure: unknown;

  constructor(chunks: AsyncIterable<string>) {
    this.#chunks = chunks;
  }

  async *bytes(): AsyncGenerator<Uint8Array> {
    try {
      for await (const chunk of this.#chunks) yield Buffer.from(chunk);
    } catch (error) {
      this.#failure = error;
      throw error;
    }
  }

  /** What the source threw, if it did. */
  get failure(): unknown {
    return this.#failure;
  }
}

/** PUT /v1/state's body (DesiredStateSchema), a server at a time. */
async function* desiredStateText(servers: AsyncIterable<DesiredServer>): AsyncGenerator<string> {
  let separator = '';
  yield '{"servers":[';
  for await (const server of servers) {
    yield separator + JSON.stringify(server);
    separator = ',';
  }
  yield ']}';
}

const validators = new WeakMap<TSchema, ReturnType<typeof Compile>>();

/**
 * The answer schema's compiled validator, made once: a usage report of 100,000 entries is checked in
 * about 20 ms, where the interpreting `Value.Parse` takes most of a second.
 */
function compiled(schema: TSchema): ReturnType<typeof Compile> {
  let validator = validators.get(schema);
  if (validator === undefined) {
    validator = Compile(schema);
    validators.set(schema, validator);
  }
  return validator;
}

/** The agent's own error text from its error body (AgentErrorSchema), without anything else it sent. */
function agentError(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    if (Value.Check(AgentErrorSchema, parsed)) return [...new Set([parsed.error, ...parsed.failures])].join('; ');
  } catch {
    // not JSON: a proxy or another server answered
  }
  return "an error that is not the agent's";
}
