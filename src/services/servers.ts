import { type Clock, isoAt } from '../domain/clock.ts';
import {
  listenPortInUse,
  listenPortTakenMeanwhile,
  maxDevicesDoNotFit,
  noNodeRunsProtocol,
  noSuchNode,
  protocolUnsupported,
  serverHasDevices,
  serverNotFound,
  subnet6TakenMeanwhile,
} from '../domain/error-cases.ts';
import { AppError, messageOf } from '../domain/errors.ts';
import type { Page, PageRequest } from '../domain/paging.ts';
import {
  type Ipv6Plan,
  type Ipv6Status,
  type ServerCreateInput,
  type ServerPlan,
  patchObfuscation,
  planProtocol,
  planServer,
  planSubnet6,
  SERVER_DEFAULTS,
} from '../domain/servers.ts';
import {
  type Obfuscation,
  type ObfuscationPatch,
  obfuscationJson,
  protocolsOf,
  type ServerProtocol,
} from '../domain/protocols.ts';
import { deviceRoom, ipv4Networks, parseSubnet } from '../domain/subnets.ts';
import { deviceRoom6, ipv6Networks, parseNetwork6 } from '../domain/subnets6.ts';
import { generateKeyPair } from '../domain/wireguard-keys.ts';
import type { ServerState } from '../agent/driver.ts';
import type { AgentStatus, ResyncReport } from '../agent/protocol.ts';
import type { Db } from '../store/db.ts';
import { isUniqueViolation, violationText } from '../store/constraint-violations.ts';
import { findNode, listNodes, type NodeRow } from '../store/nodes.ts';
import { panelUlaPrefix } from '../store/panel-settings.ts';
import { deleteDevicesOfServer, listDevicesOfServer } from '../store/devices.ts';
import { deleteDeviceUsage } from '../store/usage.ts';
import type { UsageService } from './usage.ts';
import {
  deleteServer,
  deleteServersDeploying,
  findServer,
  findServerWithNode,
  insertServer,
  listServerAllocations,
  listServers,
  type ServerRow,
  serverObfuscation,
  setServerIpv6,
  updateServer,
} from '../store/servers.ts';
import { type ChangePublisher, type CommitHook, change } from './changes.ts';
import { desiredServer, desiredStateOfServer } from './desired-state.ts';
import { deviceEventDraft, serverEventDraft } from './events.ts';
import type { CountryLookup } from './geo.ts';
import type { NodeConnections } from './nodes.ts';
import { keptPages } from './row-views.ts';
import { listedServerView, serverView, type ServerView } from './server-views.ts';

export interface ServerPatch {
  name?: string;
  /** Refused unless it is the server's own (protocolFixed). */
  protocol?: ServerProtocol;
  obfuscation?: ObfuscationPatch;
  endpoint?: string;
  listenPort?: number;
  mtu?: number;
  dns?: string[];
  persistentKeepalive?: number;
  clientAllowedIps?: string[];
  clientToClient?: boolean;
  maxDevices?: number;
  country?: string;
  city?: string;
}

/** What the node reported doing with the server's IPv6; an agent older than the report did nothing with it. */
export function ipv6Of(state: ServerState): Ipv6Status {
  return state.ipv6 ?? 'off';
}

/** Each server a resync applied, with its IPv6 as the node reported it: off for all from an agent older than that. */
export function ipv6OfResync(report: ResyncReport): Map<number, Ipv6Status> {
  const modes = new Map((report.ipv6 ?? []).map((s) => [s.serverId, s.mode]));
  return new Map(report.applied.map((id) => [id, modes.get(id) ?? 'off']));
}

/** A new server's place on its node (planServer) and its IPv6 subnet (planSubnet6). */
interface NewServerPlan {
  plan: ServerPlan;
  plan6: Ipv6Plan;
  protocol: ServerProtocol;
  obfuscation: Obfuscation | null;
}

/** A server's capacity fits in its subnet and subnet6. */
function checkRoom(server: ServerRow, maxDevices: number): void {
  const room = Math.min(
    deviceRoom(parseSubnet(server.subnet)),
    server.subnet6 === null ? Number.POSITIVE_INFINITY : deviceRoom6(parseNetwork6(server.subnet6)),
  );
  if (maxDevices > room) {
    const subnets = server.subnet6 === null ? server.subnet : `${server.subnet} and ${server.subnet6}`;
    throw maxDevicesDoNotFit(maxDevices, subnets, room);
  }
}

/** A patched boolean as its 0/1 column; undefined, a field the patch leaves as it is. */
function flagColumn(value: boolean | undefined): 0 | 1 | undefined {
  return value === undefined ? undefined : value ? 1 : 0;
}

/**
 * Whether the node applies a patch now: a new listen port or MTU recreates the interface, a new
 * client_to_client changes its rules in place, new obfuscation parameters go to amneziawg-go; other fields only go
 * into configs issued from then on.
 */
function appliesOnNode(current: ServerRow, patch: ServerPatch, obfuscation: Obfuscation | undefined): boolean {
  if (obfuscation !== undefined) return true;
  const recreate =
    (patch.listenPort ?? current.listen_port) !== current.listen_port || (patch.mtu ?? current.mtu) !== current.mtu;
  const clientToClient = flagColumn(patch.clientToClient);
  return recreate || (clientToClient !== undefined && clientToClient !== current.client_to_client);
}

function normaliseCountry(country: string): string {
  const code = country.toUpperCase();
  if (!/^[A-Z]{2}$/.test(code))
    throw new AppError('validation_failed', 'country must be an ISO 3166-1 alpha-2 code such as DE', {
      country: 'ISO 3166-1 alpha-2 code',
    });
  return code;
}

export class ServerService {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #connections: NodeConnections;
  readonly #countries: CountryLookup;
  readonly #usage: UsageService;
  readonly #changes: ChangePublisher;

  constructor(
    db: Db,
    clock: Clock,
    connections: NodeConnections,
    countries: CountryLookup,
    usage: UsageService,
    changes: ChangePublisher,
  ) {
    this.#db = db;
    this.#clock = clock;
    this.#connections = connections;
    this.#countries = countries;
    this.#usage = usage;
    this.#changes = changes;
  }

  /**
   * The node a new server goes on: the one given, else the local node or the only node among those that reported
   * running `protocol` (a node that has not reported yet runs WireGuard only).
   */
  async #nodeFor(nodeId: number | undefined, protocol: ServerProtocol): Promise<NodeRow> {
    if (nodeId !== undefined) {
      const node = await findNode(this.#db, nodeId);
      if (!node) throw noSuchNode(nodeId);
      return node;
    }
    const nodes = (await listNodes(this.#db)).filter((n) => protocolsOf(n.protocols).includes(protocol));
    const local = nodes.find((n) => n.url === null);
    if (local) return local;
    const [only] = nodes;
    if (only && nodes.length === 1) return only;
    if (nodes.length === 0 && protocol !== 'wireguard') throw noNodeRunsProtocol(protocol);
    throw new AppError('validation_failed', 'this panel has several nodes and no local one: give node_id', {
      node_id: 'required',
    });
  }

  /**
   * The networks of the node's own interfaces, asked of its agent now (a new server's subnet and subnet6
   * must not overlap one), and whether it runs `protocol` now. A node that cannot answer could not deploy the
   * server either: deploy_failed, nothing saved. So does an agent too old to report its networks: the check is
   * never skipped. One that lacks the protocol: protocolUnsupported, nothing saved.
   */
  async #askNode(node: NodeRow, protocol: ServerProtocol): Promise<string[]> {
    let status: AgentStatus;
    try {
      status = await this.#connections.for(node).status();
    } catch (error) {
      const message = `node ${node.name} did not answer, so nothing was made: ${messageOf(error)}`;
      throw new AppError('deploy_failed', message, {}, undefined, error);
    }
    if (!(status.protocols ?? ['wireguard']).includes(protocol)) throw protocolUnsupported(node.name, protocol);
    if (status.networks === undefined) {
      const why = `node ${node.name} runs an agent that does not report its networks; upgrade it to add servers there`;
      throw new AppError('deploy_failed', why);
    }
    return status.networks;
  }

  async get(id: number): Promise<ServerView> {
    const row = await findServerWithNode(this.#db, id);
    if (!row) throw serverNotFound(id);
    return listedServerView(row);
  }

  /** Pages of listed servers' views, kept per reused rows (listServers). */
  readonly #listedPage = keptPages(listedServerView);

  async list(filter: { country?: string }, page: PageRequest): Promise<Page<ServerView>> {
    return this.#listedPage(await listServers(this.#db, filter, page), page);
  }

  /**
   * Creates and deploys a server. The row is written first (its unique port claims the port), the node
   * deploys, and only then is the server `running` with its event. A failed deploy removes both the row
   * and whatever the node made, and answers deploy_failed.
   */
  async create(input: ServerCreateInput, actor: string, onCommit?: CommitHook<ServerView>): Promise<ServerView> {
    const kind = planProtocol(input);
    const node = await this.#nodeFor(input.nodeId, kind.protocol);
    const row = await this.#insert(input, node, { ...(await this.#plan(input, node, kind.protocol)), ...kind });
    const ipv6 = await this.#deploy(row, node);
    return this.#changes.commit(async (tx) => {
      const running = await updateServer(tx, row.id, { status: 'running', ipv6 });
      const summary = `server ${row.name} created on node ${node.name}`;
      return {
        result: serverView(running, node, 0),
        change: change({
          events: [serverEventDraft('server.created', row, node, actor, summary)],
          activity: [
            { resource: 'server', resourceId: row.id, verb: 'created', summary, actor, before: null, after: running },
          ],
        }),
      };
    }, onCommit);
  }

  /** Where a new server goes on the node: its subnet, port and capacity, and its subnet6. */
  async #plan(
    input: ServerCreateInput,
    node: NodeRow,
    protocol: ServerProtocol,
  ): Promise<Omit<NewServerPlan, 'protocol' | 'obfuscation'>> {
    const hostNetworks = await this.#askNode(node, protocol);
    const allocations = await listServerAllocations(this.#db);
    const onNode = allocations.filter((a) => a.node_id === node.id);
    const plan = planServer(
      input,
      {
        subnets: onNode.map((a) => parseSubnet(a.subnet)),
        listenPorts: onNode.map((a) => a.listen_port),
        hostNetworks: ipv4Networks(hostNetworks),
      },
      allocations.map((a) => parseSubnet(a.subnet)),
    );
    const plan6 = planSubnet6(input, {
      ulaPrefix: await panelUlaPrefix(this.#db),
      panelSubnets: allocations.flatMap((a) => (a.subnet6 === null ? [] : [parseNetwork6(a.subnet6)])),
      hostNetworks: ipv6Networks(hostNetworks),
    });
    return { plan, plan6 };
  }

  /** The new server's row, `deploying`, with fresh keys: its unique indexes claim the planned port and subnet6. */
  async #insert(
    input: ServerCreateInput,
    node: NodeRow,
    { plan, plan6, protocol, obfuscation }: NewServerPlan,
  ): Promise<ServerRow> {
    const endpoint = input.endpoint ?? node.public_host;
    const country =
      input.country !== undefined
        ? normaliseCountry(input.country)
        : ((await this.#countries.countryOf(endpoint)) ?? '');
    const keys = generateKeyPair();
    const now = isoAt(this.#clock.nowMs());
    try {
      return await insertServer(this.#db, {
        node_id: node.id,
        name: input.name,
        country,
        city: input.city ?? '',
        status: 'deploying',
        protocol,
        obfuscation: obfuscation === null ? null : obfuscationJson(obfuscation),
        endpoint,
        listen_port: plan.listenPort,
        private_key: keys.privateKey,
        public_key: keys.publicKey,
        address: plan.address,
        subnet: plan.subnet,
        address6: plan6.address6,
        subnet6: plan6.subnet6,
        dns: JSON.stringify(input.dns ?? SERVER_DEFAULTS.dns),
        dns_on_server: 0,
        client_to_client: input.clientToClient === true ? 1 : 0,
        mtu: input.mtu ?? SERVER_DEFAULTS.mtu,
        persistent_keepalive: input.persistentKeepalive ?? SERVER_DEFAULTS.persistentKeepalive,
        client_allowed_ips: JSON.stringify(input.clientAllowedIps ?? SERVER_DEFAULTS.clientAllowedIps),
        capacity: Math.min(plan.capacity, plan6.room),
        created_at: now,
        updated_at: now,
      });
    } catch (error) {
      // The unique indexes: another create took the port or the subnet6 between the plan and the insert.
      if (!isUniqueViolation(error)) throw error;
      if (/subnet6/.test(violationText(error))) {
        throw subnet6TakenMeanwhile(plan6.subnet6);
      }
      throw listenPortTakenMeanwhile(plan.listenPort);
    }
  }

  /**
   * The node makes the new server and says what it did with its IPv6. A node that cannot: whatever it made
   * and the row are removed, deploy_failed.
   */
  async #deploy(row: ServerRow, node: NodeRow): Promise<Ipv6Status> {
    const connection = this.#connections.for(node);
    try {
      return ipv6Of(await connection.applyServer(desiredServer(row, [], this.#usage)));
    } catch (error) {
      await connection.removeServer(row.id).catch(() => undefined);
      await deleteServer(this.#db, row.id);
      const message = `deploying server ${row.name} on node '${node.name}' failed: ${messageOf(error)}`;
      throw new AppError('deploy_failed', message, {}, undefined, error);
    }
  }

  /**
   * Changes a server. A new listen port or MTU recreates its interface on the node (peers come back);
   * a new client_to_client changes the node's isolation rules in place; other fields apply to configs
   * issued from then on. A node that cannot apply the change gets it from
   * the reconcile loop later, and the caller is told apply_failed with the change saved.
   */
  async update(id: number, patch: ServerPatch, actor: string): Promise<ServerView> {
    const current = await findServer(this.#db, id);
    if (!current) throw serverNotFound(id);
    const node = await findNode(this.#db, current.node_id);
    if (!node) throw new Error(`server ${id} refers to missing node ${current.node_id}`);
    if (patch.listenPort !== undefined && patch.listenPort !== current.listen_port) {
      const taken = (await listServerAllocations(this.#db)).some(
        (a) => a.node_id === node.id && a.listen_port === patch.listenPort,
      );
      if (taken) throw listenPortInUse(patch.listenPort);
    }
    if (patch.maxDevices !== undefined) checkRoom(current, patch.maxDevices);
    const obfuscation = patchObfuscation(
      { protocol: current.protocol, obfuscation: serverObfuscation(current), mtu: current.mtu },
      patch,
    );
    const updated = await this.#save(current, node, patch, obfuscation, actor);
    if (appliesOnNode(current, patch, obfuscation)) await this.#applyOnNode(node, updated);
    return this.get(updated.id);
  }

  /** The patch saved, with its event and activity row. */
  #save(
    current: ServerRow,
    node: NodeRow,
    patch: ServerPatch,
    obfuscation: Obfuscation | undefined,
    actor: string,
  ): Promise<ServerRow> {
    const id = current.id;
    return this.#changes.commit(async (tx) => {
      let row: ServerRow;
      try {
        row = await updateServer(tx, id, {
          name: patch.name,
          endpoint: patch.endpoint,
          listen_port: patch.listenPort,
          mtu: patch.mtu,
          dns: patch.dns === undefined ? undefined : JSON.stringify(patch.dns),
          persistent_keepalive: patch.persistentKeepalive,
          client_allowed_ips: patch.clientAllowedIps === undefined ? undefined : JSON.stringify(patch.clientAllowedIps),
          client_to_client: flagColumn(patch.clientToClient),
          capacity: patch.maxDevices,
          country: patch.country === undefined ? undefined : normaliseCountry(patch.country),
          city: patch.city,
          obfuscation: obfuscation === undefined ? undefined : obfuscationJson(obfuscation),
          updated_at: isoAt(this.#clock.nowMs()),
        });
      } catch (error) {
        // Only the node's listen port is unique among what a patch changes.
        if (!isUniqueViolation(error)) throw error;
        throw listenPortInUse(patch.listenPort ?? current.listen_port);
      }
      const summary = `server ${row.name} updated`;
      const events = [serverEventDraft('server.updated', row, node, actor, `server ${row.name} changed`)];
      // The event names the server, never the parameters: every device's config changed with them.
      const changedObfuscation = `server ${row.name}'s obfuscation changed: its devices need their new configs`;
      if (obfuscation !== undefined)
        events.push(serverEventDraft('server.obfuscation_changed', row, node, actor, changedObfuscation));
      return {
        result: row,
        change: change({
          events,
          activity: [
            { resource: 'server', resourceId: id, verb: 'updated', summary, actor, before: current, after: row },
          ],
        }),
      };
    });
  }

  /** The node applies a saved change now, or the caller hears apply_failed (the reconcile loop converges it). */
  async #applyOnNode(node: NodeRow, server: ServerRow): Promise<void> {
    try {
      const state = await this.#connections
        .for(node)
        .applyServer(await desiredStateOfServer(this.#db, server, this.#usage));
      await setServerIpv6(this.#db, server.id, ipv6Of(state));
    } catch (error) {
      const message = `the change was saved, but node '${node.name}' could not apply it yet: ${messageOf(error)}`;
      throw new AppError('apply_failed', message, {}, undefined, error);
    }
  }

  /** Deletes a server and (with `force`) its devices; the node removes its namespace and interface. */
  async delete(id: number, force: boolean, actor: string): Promise<void> {
    const server = await this.get(id);
    if (server.device_count > 0 && !force) {
      throw serverHasDevices(id, server.device_count);
    }
    const node = await findNode(this.#db, server.node.id);
    await this.#changes.commit(async (tx) => {
      const row = await findServer(tx, id);
      const devices = await listDevicesOfServer(tx, id);
      const deleted = change({});
      for (const device of devices) {
        const summary = `device ${device.name} deleted with server ${server.name}`;
        deleted.events.push(deviceEventDraft('device.deleted', device, server, server.node, actor, summary));
        deleted.activity.push({
          resource: 'device',
          resourceId: device.id,
          verb: 'deleted',
          summary,
          actor,
          before: device,
          after: null,
        });
      }
      await deleteDeviceUsage(
        tx,
        devices.map((d) => d.id),
      );
      await deleteDevicesOfServer(tx, id);
      await deleteServer(tx, id);
      const summary = `server ${server.name} deleted`;
      deleted.events.push(serverEventDraft('server.deleted', server, server.node, actor, summary));
      deleted.activity.push({
        resource: 'server',
        resourceId: id,
        verb: 'deleted',
        summary,
        actor,
        before: row ?? null,
        after: null,
      });
      return { result: undefined, change: deleted };
    });
    // A node that is down now drops the server at its next resync, which removes servers it should not run.
    if (node)
      await this.#connections
        .for(node)
        .removeServer(id)
        .catch(() => undefined);
  }

  /** Rows a crash left between insert and deploy: removed, and the node's resync drops what it made. */
  async discardUnfinishedDeploys(): Promise<void> {
    await deleteServersDeploying(this.#db);
  }
}
