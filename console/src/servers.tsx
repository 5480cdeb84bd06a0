/** Server pieces more than one page uses: every server, read page by page, and the servers table. */
import { api, readPages, type Server } from './api.ts';
import { formatCount } from './format.ts';
import { ProtocolTag } from './protocols.tsx';
import { Badge, Link, Table } from './ui.tsx';

export function loadAllServers() {
  return readPages((after) => api.GET('/api/v1/servers', { params: { query: { after, limit: 200 } } }), 10);
}

export function ServersTable({ servers }: { servers: Server[] }) {
  if (servers.length === 0) return <p>No server yet.</p>;
  return (
    <Table caption="Servers" head={['Server', 'State', 'Devices', 'Location', 'Node']}>
      {servers.map((server) => (
        <tr key={server.id}>
          <td>
            <Link href={`/servers/${server.id}`}>{server.name}</Link> <ProtocolTag protocol={server.protocol} />
          </td>
          <td>
            <Badge status={server.status} />
          </td>
          <td>
            <meter
              min={0}
              max={server.capacity}
              value={server.device_count}
              aria-label={`${server.name}: ${server.device_count} of ${server.capacity} devices`}
            />{' '}
            {formatCount(server.device_count)} / {formatCount(server.capacity)}
          </td>
          <td>{[server.city, server.country].filter((part) => part !== '').join(', ') || '—'}</td>
          <td>{server.node.name}</td>
        </tr>
      ))}
    </Table>
  );
}
