import {
  api,
  type Device,
  type FleetUsage,
  type PanelNode,
  type Pages,
  type Result,
  read,
  readPages,
  type Usage,
} from '../api.ts';
import { useMemo } from 'preact/hooks';
import { everyDay, todayIn, UsageChart } from '../chart.tsx';
import { formatBytes, formatCount } from '../format.ts';
import { Badge, Link, Page, Show, Table, Time, useCanWrite, useLoad } from '../ui.tsx';
import { protocolName } from '../protocols.tsx';
import { ServersTable } from '../servers.tsx';

/** How often the overview asks again: online state and counts follow the data plane by themselves. */
const POLL_MS = 15_000;
/** The devices counted for "online now": 5 pages of 200. */
const DEVICE_PAGES = 5;
/** The days the usage chart shows, today the last. */
const CHART_DAYS = 30;
/** Webhooks whose deliveries are counted. */
const WEBHOOKS_COUNTED = 20;

interface DeliveryCounts {
  pending: number;
  failed: number;
  /** A webhook had more of a state than one page shows. */
  atLeast: boolean;
}

async function deliveryCounts(): Promise<Result<DeliveryCounts>> {
  const hooks = await read(api.GET('/api/v1/webhooks', { params: { query: { limit: WEBHOOKS_COUNTED } } }));
  if (!hooks.ok) return hooks;
  const counts = { pending: 0, failed: 0, atLeast: false };
  const pages = await Promise.all(
    hooks.data.data.flatMap((hook) =>
      (['pending', 'failed'] as const).map(async (state) => ({
        state,
        page: await read(
          api.GET('/api/v1/webhooks/{id}/deliveries', {
            params: { path: { id: hook.id }, query: { state, limit: 200 } },
          }),
        ),
      })),
    ),
  );
  for (const { state, page } of pages) {
    if (!page.ok) return page;
    counts[state] += page.data.data.length;
    counts.atLeast ||= page.data.has_more;
  }
  return { ok: true, data: counts };
}

function DeviceSummary({ devices }: { devices: Pages<Device> }) {
  const online = devices.items.filter((device) => device.online).length;
  const counted = devices.complete ? '' : ` (of the first ${formatCount(devices.items.length)} devices)`;
  const byStatus = (status: Device['status']) => devices.items.filter((device) => device.status === status).length;
  return (
    <section class="tile" aria-labelledby="online-now">
      <h2 id="online-now">Online now</h2>
      <p class="big">
        {formatCount(online)} <span class="muted">of {formatCount(devices.items.length)} devices</span>
      </p>
      <p class="muted">
        {formatCount(byStatus('disabled'))} disabled, {formatCount(byStatus('expired'))} expired,{' '}
        {formatCount(byStatus('limit_reached'))} at their limit{counted}
      </p>
    </section>
  );
}

function UsageTile({ id, title, usage, zone }: { id: string; title: string; usage: Usage; zone: string }) {
  return (
    <section class="tile" aria-labelledby={id} title={`Days and months of the panel time zone, ${zone}`}>
      <h2 id={id}>{title}</h2>
      <p class="big">{formatBytes(usage.total_bytes)}</p>
      <p class="muted">
        {formatBytes(usage.rx_bytes)} down, {formatBytes(usage.tx_bytes)} up
      </p>
    </section>
  );
}

function FleetUsageChart({ usage }: { usage: FleetUsage }) {
  // Drawn again only when a poll brings new figures.
  const rows = useMemo(() => everyDay(usage.daily, todayIn(usage.time_zone), CHART_DAYS), [usage]);
  return (
    <>
      <UsageChart rows={rows} monthly={false} caption={`Usage per day, last ${CHART_DAYS} days`} />
      <p class="muted small">Days of the panel time zone, {usage.time_zone}.</p>
    </>
  );
}

/** The whole fleet's traffic (GET /usage): deleted devices' included, untouched by usage resets. */
function FleetUsageTiles({ usage }: { usage: FleetUsage }) {
  return (
    <>
      <UsageTile id="usage-today" title="Usage today" usage={usage.today} zone={usage.time_zone} />
      <UsageTile id="usage-month" title="Usage this month" usage={usage.this_month} zone={usage.time_zone} />
    </>
  );
}

function NodesTable({ nodes }: { nodes: PanelNode[] }) {
  return (
    <Table caption="Nodes" head={['Node', 'State', 'Protocols', 'Version', 'Last seen', 'Servers', 'Devices']}>
      {nodes.map((node) => (
        <tr key={node.id}>
          <td>{node.name}</td>
          <td>
            <Badge status={node.status} />
          </td>
          <td>{node.protocols.map(protocolName).join(', ')}</td>
          <td>{node.version ?? 'unknown'}</td>
          <td>
            <Time iso={node.last_seen_at} relative />
          </td>
          <td>{formatCount(node.server_count)}</td>
          <td>{formatCount(node.device_count)}</td>
        </tr>
      ))}
    </Table>
  );
}

/** Webhooks need webhooks:write even to be read (docs/api.md "Keys and scopes"): an admin's tile, not a viewer's. */
function DeliveriesTile() {
  const [deliveries] = useLoad(deliveryCounts, [], POLL_MS * 2);
  return (
    <section class="tile" aria-labelledby="deliveries">
      <h2 id="deliveries">Webhook deliveries</h2>
      <Show loaded={deliveries} what="deliveries">
        {(counts) => (
          <p class="big">
            {formatCount(counts.pending)}
            {counts.atLeast ? '+' : ''} <span class="muted">pending</span>, {formatCount(counts.failed)}
            {counts.atLeast ? '+' : ''} <span class="muted">failed</span>
          </p>
        )}
      </Show>
      <p>
        <Link href="/webhooks">Webhooks</Link>
      </p>
    </section>
  );
}

export function OverviewPage() {
  const [nodes] = useLoad(() => read(api.GET('/api/v1/nodes')), [], POLL_MS);
  const [servers] = useLoad(
    () => readPages((after) => api.GET('/api/v1/servers', { params: { query: { after, limit: 200 } } }), 10),
    [],
    POLL_MS,
  );
  const [devices] = useLoad(
    () => readPages((after) => api.GET('/api/v1/devices', { params: { query: { after, limit: 200 } } }), DEVICE_PAGES),
    [],
    POLL_MS,
  );
  const [usage] = useLoad(
    () => read(api.GET('/api/v1/usage', { params: { query: { days: CHART_DAYS } } })),
    [],
    POLL_MS,
  );
  return (
    <Page title="Overview">
      <div class="tiles">
        <Show loaded={devices} what="devices">
          {(data) => <DeviceSummary devices={data} />}
        </Show>
        <Show loaded={usage} what="usage">
          {(data) => <FleetUsageTiles usage={data} />}
        </Show>
        {useCanWrite() && <DeliveriesTile />}
      </div>
      <section aria-labelledby="usage-days">
        <h2 id="usage-days">Usage, last {CHART_DAYS} days</h2>
        <Show loaded={usage} what="usage">
          {(data) => <FleetUsageChart usage={data} />}
        </Show>
      </section>
      <section aria-labelledby="nodes">
        <h2 id="nodes">Nodes</h2>
        <Show loaded={nodes} what="nodes">
          {(data) => <NodesTable nodes={data.data} />}
        </Show>
      </section>
      <section aria-labelledby="servers">
        <h2 id="servers">Servers</h2>
        <Show loaded={servers} what="servers">
          {(data) => <ServersTable servers={data.items} />}
        </Show>
      </section>
    </Page>
  );
}
