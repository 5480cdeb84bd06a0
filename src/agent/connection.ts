import type { TSchema, Static } from 'typebox';
import Value from 'typebox/value';
import type { Agent } from './agent.ts';
import type { ServerState } from './driver.ts';
import {
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
  resync(servers: readonly DesiredServer[]): Promise<ResyncReport>;
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
  resync(servers: readonly DesiredServer[]): Promise<ResyncReport> {
    return this.#agent.resync(servers);
  }
  digest(): Promise<NodeDigest> {
    return this.#agent.digest();
  }
}

/** A call to a node that failed: unreachable, refused, or answered with an error. */
export class NodeCallError extends Error {}

const STATUS_TIMEOUT_MS = 5_000;
/** Applying a server may start wireguard-go and set thousands of peers. */
const APPLY_TIMEOUT_MS = 60_000;
/** The drift check inspects every server of the node; well within the 60 s in which drift is repaired. */
const DIGEST_TIMEOUT_MS = 20_000;

export class HttpNodeConnection implements NodeConnection {
  readonly #baseUrl: string;
  readonly #token: string;

  constructor(baseUrl: string, token: string) {
    this.#baseUrl = baseUrl.replace(/\/+$/, '');
    this.#token = token;
  }

  status(): Promise<AgentStatus> {
    return this.#call('GET', '/v1/status', undefined, STATUS_TIMEOUT_MS, AgentStatusSchema);
  }
  applyServer(desired: DesiredServer): Promise<ServerState> {
    return this.#call('PUT', `/v1/servers/${desired.server.serverId}`, desired, APPLY_TIMEOUT_MS, ServerStateSchema);
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
  resync(servers: readonly DesiredServer[]): Promise<ResyncReport> {
    return this.#call('PUT', '/v1/state', { servers }, APPLY_TIMEOUT_MS * 5, ResyncReportSchema);
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
  async #call(method: string, path: string, body: unknown, timeoutMs: number, schema: TSchema | undefined): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(this.#baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${this.#token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new NodeCallError(`node ${this.#baseUrl} unreachable: ${error instanceof Error ? error.message : String(error)}`);
    }
    const text = await response.text();
    if (!response.ok) throw new NodeCallError(`node ${this.#baseUrl} answered ${response.status}: ${text.slice(0, 500)}`);
    if (schema === undefined) return undefined;
    try {
      return Value.Parse(schema, JSON.parse(text));
    } catch {
      throw new NodeCallError(`node ${this.#baseUrl} sent an answer of the wrong shape to ${method} ${path}`);
    }
  }
}
