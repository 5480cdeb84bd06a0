/**
 * Device pieces more than one page shows: the devices table and its self-refreshing list, the data used
 * against the limit, and the limit fields of the new device's, the limits' and the plans' forms.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type Device, type Problem, read } from './api.ts';
import type { paths } from './api-types.ts';
import { formatBytes } from './format.ts';
import { loadAllServers } from './servers.tsx';
import { Badge, FIRST_PAGE, Link, Online, Pager, SelectField, Show, Table, TextField, Time, useLoad } from './ui.tsx';

type DeviceQuery = NonNullable<paths['/api/v1/devices']['get']['parameters']['query']>;
/** What a list of devices is filtered by: the devices query without its paging. */
export type DeviceFilter = Omit<DeviceQuery, 'after' | 'limit'>;

/** Online state changes with every handshake: lists and the device page ask again this often. */
export const DEVICE_POLL_MS = 10_000;
const PAGE_SIZE = 50;

export function DataLimit({ device }: { device: Device }) {
  if (device.data_limit === 0) return <>{formatBytes(device.period_usage.total_bytes)} (no limit)</>;
  const per = device.limit_period === 'monthly' ? 'a month' : 'in total';
  return (
    <>
      {formatBytes(device.period_usage.total_bytes)} of {formatBytes(device.data_limit)} {per}
    </>
  );
}

export function DeviceRows({ devices, servers }: { devices: Device[]; servers: ReadonlyMap<number, string> }) {
  if (devices.length === 0) return <p>No devices.</p>;
  return (
    <Table caption="Devices" head={['Device', 'Status', 'Online', 'Server', 'Data used', 'Expires']}>
      {devices.map((device) => (
        <tr key={device.id}>
          <td>
            <Link href={`/devices/${device.id}`}>{device.name}</Link>
            {device.external_id !== null && <div class="muted small">{device.external_id}</div>}
          </td>
          <td>
            <Badge status={device.status} />
          </td>
          <td>
            <Online online={device.online} />
          </td>
          <td>{servers.get(device.server_id) ?? `#${device.server_id}`}</td>
          <td>
            <DataLimit device={device} />
          </td>
          <td>
            <Time iso={device.expires_at} />
          </td>
        </tr>
      ))}
    </Table>
  );
}

/** One page of devices matching `filter`, refreshed by itself, with cursor paging. */
export function DeviceList({ filter }: { filter: DeviceFilter }) {
  const [cursor, setCursor] = useState(FIRST_PAGE);
  const { after } = cursor;
  const key = JSON.stringify(filter);
  // A new filter starts again at the first page.
  useEffect(() => setCursor(FIRST_PAGE), [key]);
  const [servers] = useLoad(loadAllServers, []);
  const [page] = useLoad(
    () =>
      read(
        api.GET('/api/v1/devices', {
          params: { query: { ...filter, after: after === '' ? undefined : Number(after), limit: PAGE_SIZE } },
        }),
      ),
    [key, after],
    DEVICE_POLL_MS,
  );
  const names = new Map<number, string>(
    servers.state === 'ready' ? servers.data.items.map((server) => [server.id, server.name]) : [],
  );
  return (
    <Show loaded={page} what="devices">
      {(data) => (
        <>
          <DeviceRows devices={data.data} servers={names} />
          {(after !== '' || data.has_more) && (
            <Pager cursor={cursor} lastId={data.data.at(-1)?.id} hasMore={data.has_more} onPage={setCursor} />
          )}
        </>
      )}
    </Show>
  );
}

/** A data limit typed in GB: a device's and a plan's. */
export function DataLimitField(props: { value: string; onValue: (value: string) => void; problem: Problem | null }) {
  return (
    <TextField
      label="Data limit (GB)"
      name="data_limit"
      problem={props.problem}
      inputMode="decimal"
      hint="Downloads and uploads together; empty: no limit."
      value={props.value}
      onValue={props.onValue}
    />
  );
}

/** A device's data limit (typed in GB) and expiry (in the browser's zone): the new device's and the limits' form. */
export function LimitFields(props: {
  form: { dataLimit: string; expires: string };
  set: (change: { dataLimit?: string; expires?: string }) => void;
  problem: Problem | null;
}) {
  const { form, set, problem } = props;
  return (
    <>
      <DataLimitField value={form.dataLimit} onValue={(dataLimit) => set({ dataLimit })} problem={problem} />
      <TextField
        label="Expires"
        name="expires_at"
        dateTime
        problem={problem}
        hint="Empty: never."
        value={form.expires}
        onValue={(expires) => set({ expires })}
      />
    </>
  );
}

/** Over which period the data limit counts, and the speed limit in Mbit/s: a device's and a plan's. */
export function PeriodSpeedFields(props: {
  form: { period: 'monthly' | 'total'; speed: string };
  set: (change: { period?: 'monthly' | 'total'; speed?: string }) => void;
  problem: Problem | null;
}) {
  const { form, set, problem } = props;
  return (
    <>
      <SelectField
        label="Limit period"
        name="limit_period"
        problem={problem}
        value={form.period}
        options={[
          { value: 'monthly', label: 'Each month' },
          { value: 'total', label: 'In total (until a reset)' },
        ]}
        onValue={(period) => set({ period: period === 'total' ? 'total' : 'monthly' })}
      />
      <TextField
        label="Speed limit (Mbit/s)"
        name="speed_limit"
        problem={problem}
        inputMode="decimal"
        hint="Each way; empty: no limit."
        value={form.speed}
        onValue={(speed) => set({ speed })}
      />
    </>
  );
}
