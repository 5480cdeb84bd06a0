import { type Clock, isoAt } from '../domain/clock.ts';
import { isHost, unbracketed } from '../domain/addresses.ts';
import { nodeNameTaken, nodeNotFound } from '../domain/error-cases.ts';
import { AppError } from '../domain/errors.ts';
import { protocolsOf, type ServerProtocol } from '../domain/protocols.ts';
import { requirePlainText } from '../domain/text.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import { parseCertSha256 } from '../agent/certificate.ts';
import { HttpNodeConnection, type NodeConnection } from '../agent/connection.ts';
import { SYSTEM_ACTOR } from '../domain/events.ts';
import type { Db } from '../store/db.ts';
import { localNodeHostChanged, nodeAdded, nodeRemoved } from './change-kinds.ts';
import type { ChangePublisher } from './changes.ts';
import { keptPages } from './row-views.ts';
import {
  deleteNode,
  findLocalNode,
  findNode,
  findNodeByName,
  findNodeSummary,
  insertNode,
  listNodeSummaries,
  type NodeRow,
  type NodeSummaryRow,
  updateNode,
} from '../store/nodes.ts';
import { listServerAllocations } from '../store/servers.ts';

/** A node as `GET /nodes` shows it (docs/decisions.md "Nodes"). */
export interface NodeView {
  id: number;
  name: string;
  status: 'online' | 'offline';
  public_host: string;
  version: string | null;
  last_seen_at: string | null;
  server_count: number;
  device_count: number;
  free_capacity: number;
  driver: string | null;
  /** What the node can run servers of, as it last reported; WireGuard only before it does. */
  protocols: ServerProtocol[];
}

/** A node as `vpn-panel nodes list` shows it to the operator: also where it is and why it is offline. */
export interface NodeAdminView extends NodeView {
  url: string | null;
  cert_sha256: string | null;
  last_error: string | null;
}

export const LOCAL_NODE_NAME = 'local';

/** The connection to each node: the embedded agent for the local node, HTTP for the others. */
export class NodeConnections {
  readonly #local: NodeConnection | undefined;
  readonly #remote = new Map<string, HttpNodeConnection>();

  constructor(local: NodeConnection | undefined) {
    this.#local = local;
  }

  for(node: NodeRow): NodeConnection {
    if (node.url === null || node.token === null) {
      if (!this.#local)
        throw new AppError(
          'deploy_failed',
          `node ${node.name} is the local node, but this panel runs without one (LOCAL_NODE=off)`,
        );
      return this.#local;
    }
    const key = `${node.name} ${node.url} ${node.token} ${node.cert_sha256 ?? ''}`;
    let connection = this.#remote.get(key);
    if (!connection) {
      const remote = { name: node.name, url: node.url, token: node.token, certSha256: node.cert_sha256 };
      connection = new HttpNodeConnection(remote);
      this.#remote.set(key, connection);
    }
    return connection;
  }
}

type NewNode = Pick<NodeRow, 'name' | 'url' | 'token' | 'cert_sha256' | 'public_host'>;

/** Node names show in `nodes list`, events, mails and client-facing server views: short plain text. */
const NODE_NAME_MAX = 64;

function requireNodeName(name: string): void {
  if (name.length < 1 || name.length > NODE_NAME_MAX) {
    const length = `1 to ${NODE_NAME_MAX} characters`;
    throw new AppError('validation_failed', `a node name is ${length}`, { name: length });
  }
  requirePlainText('name', name);
}

export interface AddNodeInput {
  name: string;
  url: string;
  token: string;
  publicHost: string | undefined;
  /** The agent's certificate fingerprint to pin (https only), as `nodes add --cert-sha256` takes it. */
  certSha256: string | undefined;
}

export class NodeService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #changes: ChangePublisher;

  constructor(db: Db, clock: Clock, changes: ChangePublisher) {
    this.#db = db;
    this.#clock = clock;
    this.#changes = changes;
  }

  /** The row of the panel's embedded node, made on first start; its public host follows the configuration. */
  async ensureLocal(publicHost: string): Promise<NodeRow> {
    const existing = await findLocalNode(this.#db);
    if (existing) {
      if (existing.public_host === publicHost) return existing;
      const changed = { ...existing, public_host: publicHost };
      await this.#changes.commit(async (tx) => {
        await updateNode(tx, existing.id, { public_host: publicHost });
        return { result: undefined, change: localNodeHostChanged(existing, changed) };
      });
      return changed;
    }
    const local = { name: LOCAL_NODE_NAME, url: null, token: null, cert_sha256: null, public_host: publicHost };
    return this.#insert(local, SYSTEM_ACTOR);
  }

  #insert(node: NewNode, actor: string): Promise<NodeRow> {
    return this.#changes.commit(async (tx) => {
      const row = await insertNode(tx, { ...node, status: 'offline', created_at: isoAt(this.#clock.nowMs()) });
      return { result: row, change: nodeAdded(row, actor) };
    });
  }

  async add(input: AddNodeInput, actor: string): Promise<NodeRow> {
    let url: URL;
    try {
      url = new URL(input.url);
    } catch {
      throw new AppError('validation_failed', `${input.url} is not a URL`, { url: 'not a URL' });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new AppError('validation_failed', 'the agent URL must be http or https', { url: 'http or https' });
    if (input.token.length < 16)
      throw new AppError('validation_failed', 'the node token must be at least 16 characters', { token: 'too short' });
    const pin = input.certSha256 === undefined ? null : parseCertSha256(input.certSha256);
    if (pin === undefined) {
      const problem = 'the certificate fingerprint must be 64 hex digits (colons allowed)';
      throw new AppError('validation_failed', problem, { cert_sha256: 'not a SHA-256' });
    }
    if (pin !== null && url.protocol !== 'https:') {
      throw new AppError('validation_failed', 'a pinned certificate needs an https URL', { url: 'https with a pin' });
    }
    requireNodeName(input.name);
    // An IPv6 agent URL's hostname comes in brackets (`https://[2001:db8::2]:7000`): stored without, like a given one.
    const publicHost = unbracketed(input.publicHost ?? url.hostname);
    if (input.publicHost !== undefined && !isHost(publicHost)) {
      const what = 'the public host must be a host name or an IP address, without scheme or port';
      throw new AppError('validation_failed', what, { public_host: 'not a host name or address' });
    }
    if (await findNodeByName(this.#db, input.name)) throw nodeNameTaken(input.name);
    const row = { name: input.name, url: url.toString().replace(/\/+$/, ''), token: input.token, cert_sha256: pin };
    return this.#insert({ ...row, public_host: publicHost }, actor);
  }

  async remove(idOrName: string, actor: string): Promise<NodeRow> {
    const node = /^[1-9][0-9]*$/.test(idOrName)
      ? await findNode(this.#db, Number(idOrName))
      : await findNodeByName(this.#db, idOrName);
    if (!node) throw nodeNotFound(idOrName);
    const servers = (await listServerAllocations(this.#db)).filter((s) => s.node_id === node.id).length;
    if (servers > 0)
      throw new AppError('validation_failed', `node ${node.name} still runs ${servers} server(s); delete them first`, {
        node: 'has servers',
      });
    await this.#changes.commit(async (tx) => {
      await deleteNode(tx, node.id);
      return { result: undefined, change: nodeRemoved(node, actor) };
    });
    return node;
  }

  /** Every node's view on one page, kept per reused rows (listNodeSummaries). */
  readonly #listedPage = keptPages(publicView);

  async list(): Promise<Page<NodeView>> {
    return this.#listedPage(await listNodeSummaries(this.#db), EVERY_NODE);
  }

  async listForAdmin(): Promise<NodeAdminView[]> {
    return (await listNodeSummaries(this.#db)).rows.map(adminView);
  }

  /** One node, read by its id (not the list filtered). */
  async get(id: number): Promise<NodeView> {
    const found = await findNodeSummary(this.#db, id);
    if (!found) throw nodeNotFound(id);
    return publicView(found);
  }
}

function adminView(node: NodeSummaryRow): NodeAdminView {
  return {
    id: node.id,
    name: node.name,
    status: node.status,
    public_host: node.public_host,
    version: node.version,
    last_seen_at: node.last_seen_at,
    server_count: node.server_count,
    device_count: node.device_count,
    free_capacity: node.capacity - node.device_count,
    driver: node.driver,
    protocols: protocolsOf(node.protocols),
    url: node.url,
    cert_sha256: node.cert_sha256,
    last_error: node.last_error,
  };
}

/** The node list is not paged: every node on its one page (`has_more` false). */
const EVERY_NODE: PageRequest = { afterId: 0, limit: Number.MAX_SAFE_INTEGER };

function publicView(node: NodeSummaryRow): NodeView {
  const { url: _url, cert_sha256: _pin, last_error: _error, ...view } = adminView(node);
  return view;
}
