import { useState } from 'preact/hooks';
import { act, api, type PanelNode, type Problem, read, type Server } from '../api.ts';
import type { paths } from '../api-types.ts';
import { formatCount } from '../format.ts';
import { navigate } from '../router.ts';
import {
  Badge,
  CheckField,
  ConfirmButton,
  FormProblem,
  Link,
  Page,
  SelectField,
  Show,
  TextField,
  Time,
  useAction,
  useCanWrite,
  useLoad,
} from '../ui.tsx';
import { DeviceList } from '../devices.tsx';
import {
  EMPTY_OBFUSCATION,
  nodeCannotRun,
  ObfuscationSettings,
  obfuscationChange,
  obfuscationForm,
  obfuscationSummary,
  type Protocol,
  ProtocolChoice,
  protocolName,
} from '../protocols.tsx';
import { loadAllServers, ServersTable } from '../servers.tsx';

type NewServer = paths['/api/v1/servers']['post']['requestBody']['content']['application/json'];
type ServerChange = paths['/api/v1/servers/{id}']['patch']['requestBody']['content']['application/json'];

const POLL_MS = 15_000;

/** A list typed as "a, b, c"; empty gives none. */
function listOf(text: string): string[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

/** A whole number typed by a person; empty gives undefined (leave it out), anything else is sent as typed. */
function numberOf(text: string): number | undefined {
  return text.trim() === '' ? undefined : Number(text);
}

export function ServersPage() {
  const canWrite = useCanWrite();
  const [servers] = useLoad(loadAllServers, [], POLL_MS);
  return (
    <Page
      title="Servers"
      actions={
        canWrite && (
          <Link class="button primary" href="/servers/new">
            New server
          </Link>
        )
      }
    >
      <Show loaded={servers} what="servers">
        {(data) => <ServersTable servers={data.items} />}
      </Show>
    </Page>
  );
}

/** The settings a server is made with and changed by (both forms). */
interface ServerSettings {
  name: string;
  endpoint: string;
  port: string;
  dns: string;
  clientToClient: boolean;
}

const SETTINGS_FIELDS = ['name', 'endpoint', 'listen_port', 'dns'];

function SettingsFields(props: {
  form: ServerSettings;
  set: (change: Partial<ServerSettings>) => void;
  problem: Problem | null;
  creating: boolean;
}) {
  const { form, set, problem, creating } = props;
  return (
    <>
      <TextField
        label="Name"
        name="name"
        problem={problem}
        required
        value={form.name}
        onValue={(name) => set({ name })}
      />
      <TextField
        label="Endpoint"
        name="endpoint"
        problem={problem}
        hint={`Host name or address clients connect to${creating ? "; empty: the node's public host" : ''}.`}
        value={form.endpoint}
        onValue={(endpoint) => set({ endpoint })}
      />
      <TextField
        label="Listen port"
        name="listen_port"
        problem={problem}
        inputMode="numeric"
        hint={
          creating
            ? 'Empty: the next free port.'
            : 'A new port or MTU restarts the server: connections drop for a moment.'
        }
        value={form.port}
        onValue={(port) => set({ port })}
      />
      <TextField
        label="DNS servers"
        name="dns"
        problem={problem}
        hint={`Comma-separated addresses${creating ? '; empty: the default' : ''}.`}
        value={form.dns}
        onValue={(dns) => set({ dns })}
      />
      <CheckField
        label="Clients may reach each other"
        name="client_to_client"
        problem={problem}
        checked={form.clientToClient}
        onChecked={(clientToClient) => set({ clientToClient })}
      />
    </>
  );
}

const NEW_SERVER = {
  name: '',
  endpoint: '',
  port: '',
  dns: '',
  clientToClient: false,
  node: '',
  address: '',
  maxDevices: '',
  country: '',
  city: '',
  protocol: 'wireguard' as Protocol,
  obfuscation: EMPTY_OBFUSCATION,
};

/** What "New server" sends: the fields filled in, nothing for those left empty (the API's defaults). */
function newServerBody(form: typeof NEW_SERVER): NewServer {
  const body: NewServer = { name: form.name.trim() };
  const node = numberOf(form.node);
  if (node !== undefined) body.node_id = node;
  if (form.endpoint.trim() !== '') body.endpoint = form.endpoint.trim();
  const port = numberOf(form.port);
  if (port !== undefined) body.listen_port = port;
  if (form.address.trim() !== '') body.address = form.address.trim();
  const maxDevices = numberOf(form.maxDevices);
  if (maxDevices !== undefined) body.max_devices = maxDevices;
  if (form.country.trim() !== '') body.country = form.country.trim().toUpperCase();
  if (form.city.trim() !== '') body.city = form.city.trim();
  if (form.dns.trim() !== '') body.dns = listOf(form.dns);
  if (form.clientToClient) body.client_to_client = true;
  if (form.protocol === 'amneziawg') {
    body.protocol = form.protocol;
    const obfuscation = obfuscationChange(form.obfuscation, EMPTY_OBFUSCATION);
    if (obfuscation !== undefined) body.obfuscation = obfuscation;
  }
  return body;
}

/** The node choice; with AmneziaWG chosen, the nodes that cannot run it say so. */
function NodeField(props: {
  nodes: PanelNode[];
  protocol: Protocol;
  value: string;
  onValue: (node: string) => void;
  problem: Problem | null;
}) {
  const { nodes, protocol } = props;
  const label = (node: PanelNode) =>
    `${node.name} (${node.status})${nodeCannotRun(node, protocol) ? `: cannot run ${protocolName(protocol)}` : ''}`;
  return (
    <SelectField
      label="Node"
      name="node_id"
      problem={props.problem}
      value={props.value}
      onValue={props.onValue}
      options={[
        { value: '', label: 'The local node, or the only one' },
        ...nodes.map((node) => ({ value: String(node.id), label: label(node) })),
      ]}
    />
  );
}

export function NewServerPage() {
  const [nodes] = useLoad(() => read(api.GET('/api/v1/nodes')), []);
  const [form, setForm] = useState(NEW_SERVER);
  const set = (change: Partial<typeof form>) => setForm({ ...form, ...change });
  const action = useAction();
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const body = newServerBody(form);
    void action.run(
      () => read(api.POST('/api/v1/servers', { body })),
      (server) => navigate(`/servers/${server.id}`),
    );
  };
  const { problem } = action;
  return (
    <Page title="New server">
      <form onSubmit={submit} class="form">
        <FormProblem
          problem={problem}
          shown={[
            ...SETTINGS_FIELDS,
            'protocol',
            'obfuscation',
            'node_id',
            'address',
            'max_devices',
            'country',
            'city',
          ]}
        />
        <SettingsFields form={form} set={set} problem={problem} creating />
        <ProtocolChoice
          protocol={form.protocol}
          onProtocol={(protocol) => set({ protocol })}
          obfuscation={form.obfuscation}
          setObfuscation={(change) => set({ obfuscation: { ...form.obfuscation, ...change } })}
          problem={problem}
        />
        <Show loaded={nodes} what="nodes">
          {(data) => (
            <NodeField
              nodes={data.data}
              protocol={form.protocol}
              value={form.node}
              onValue={(node) => set({ node })}
              problem={problem}
            />
          )}
        </Show>
        <TextField
          label="Address"
          name="address"
          problem={problem}
          hint="The server's address and subnet, e.g. 10.200.0.1/20; empty: the next free /24."
          value={form.address}
          onValue={(address) => set({ address })}
        />
        <TextField
          label="Max devices"
          name="max_devices"
          problem={problem}
          inputMode="numeric"
          value={form.maxDevices}
          onValue={(maxDevices) => set({ maxDevices })}
        />
        <TextField
          label="Country"
          name="country"
          problem={problem}
          hint="ISO code such as DE; empty: guessed from the endpoint."
          value={form.country}
          onValue={(country) => set({ country })}
        />
        <TextField label="City" name="city" problem={problem} value={form.city} onValue={(city) => set({ city })} />
        <div class="actions">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? 'Deploying…' : 'Create server'}
          </button>
          <Link href="/servers">Cancel</Link>
        </div>
      </form>
    </Page>
  );
}

function ServerFacts({ server }: { server: Server }) {
  return (
    <dl class="facts">
      <dt>State</dt>
      <dd>
        <Badge status={server.status} />
      </dd>
      <dt>Devices</dt>
      <dd>
        {formatCount(server.device_count)} of {formatCount(server.capacity)}
      </dd>
      <dt>Protocol</dt>
      <dd>{protocolName(server.protocol)}</dd>
      {server.obfuscation !== null && (
        <>
          <dt>Obfuscation</dt>
          <dd class="mono">{obfuscationSummary(server.obfuscation)}</dd>
        </>
      )}
      <dt>Node</dt>
      <dd>{server.node.name}</dd>
      <dt>Endpoint</dt>
      <dd>
        {server.endpoint}:{server.listen_port}
      </dd>
      <dt>Subnet</dt>
      <dd>{server.subnet}</dd>
      <dt>Location</dt>
      <dd>{[server.city, server.country].filter((part) => part !== '').join(', ') || '—'}</dd>
      <dt>DNS</dt>
      <dd>{server.dns.join(', ') || '—'}</dd>
      <dt>MTU</dt>
      <dd>{server.mtu}</dd>
      <dt>Clients reach each other</dt>
      <dd>{server.client_to_client ? 'yes' : 'no'}</dd>
      <dt>Public key</dt>
      <dd class="mono">{server.public_key}</dd>
      <dt>Created</dt>
      <dd>
        <Time iso={server.created_at} />
      </dd>
    </dl>
  );
}

function EditServer({ server, onSaved }: { server: Server; onSaved: () => void }) {
  const initial = {
    name: server.name,
    endpoint: server.endpoint,
    port: String(server.listen_port),
    dns: server.dns.join(', '),
    clientToClient: server.client_to_client,
    mtu: String(server.mtu),
    keepalive: String(server.persistent_keepalive),
  };
  const [form, setForm] = useState(initial);
  const set = (change: Partial<typeof form>) => setForm({ ...form, ...change });
  // A WireGuard server has no parameters: its form stays empty and unchanged, so nothing of it is sent.
  const obfuscationBefore = server.obfuscation === null ? EMPTY_OBFUSCATION : obfuscationForm(server.obfuscation);
  const [obfuscation, setObfuscation] = useState(obfuscationBefore);
  const action = useAction();
  const [saved, setSaved] = useState('');
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const body: ServerChange = {};
    if (form.name !== initial.name) body.name = form.name.trim();
    if (form.endpoint !== initial.endpoint) body.endpoint = form.endpoint.trim();
    if (form.port !== initial.port) body.listen_port = Number(form.port);
    if (form.mtu !== initial.mtu) body.mtu = Number(form.mtu);
    if (form.keepalive !== initial.keepalive) body.persistent_keepalive = Number(form.keepalive);
    if (form.dns !== initial.dns) body.dns = listOf(form.dns);
    if (form.clientToClient !== initial.clientToClient) body.client_to_client = form.clientToClient;
    const obfuscationChanged = obfuscationChange(obfuscation, obfuscationBefore);
    if (obfuscationChanged !== undefined) body.obfuscation = obfuscationChanged;
    setSaved('');
    void action.run(
      () => read(api.PATCH('/api/v1/servers/{id}', { params: { path: { id: server.id } }, body })),
      () => {
        setSaved('Saved.');
        onSaved();
      },
    );
  };
  const { problem } = action;
  return (
    <form onSubmit={submit} class="form" aria-labelledby="edit-server">
      <h2 id="edit-server">Settings</h2>
      <FormProblem problem={problem} shown={[...SETTINGS_FIELDS, 'mtu', 'persistent_keepalive', 'obfuscation']} />
      <SettingsFields form={form} set={set} problem={problem} creating={false} />
      <TextField
        label="MTU"
        name="mtu"
        problem={problem}
        inputMode="numeric"
        value={form.mtu}
        onValue={(mtu) => set({ mtu })}
      />
      <TextField
        label="Persistent keepalive (seconds)"
        name="persistent_keepalive"
        problem={problem}
        inputMode="numeric"
        value={form.keepalive}
        onValue={(keepalive) => set({ keepalive })}
      />
      {server.obfuscation !== null && (
        <ObfuscationSettings
          form={obfuscation}
          set={(change) => setObfuscation({ ...obfuscation, ...change })}
          problem={problem}
        />
      )}
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          Save
        </button>
        <span role="status">{saved}</span>
      </div>
    </form>
  );
}

/** Delete: the API refuses a server with devices unless asked with force, and then this asks the person. */
function DeleteServer({ server }: { server: Server }) {
  const action = useAction();
  const [needsForce, setNeedsForce] = useState(false);
  const remove = (force: boolean) =>
    action.run(
      () => act(api.DELETE('/api/v1/servers/{id}', { params: { path: { id: server.id }, query: { force } } })),
      () => navigate('/servers'),
    );
  return (
    <section aria-labelledby="delete-server" class="danger-zone">
      <h2 id="delete-server">Delete</h2>
      {!needsForce && (
        <ConfirmButton
          label="Delete server"
          question={`Delete ${server.name}?`}
          confirm="Delete"
          busy={action.busy}
          onConfirm={async () => {
            const done = await remove(false);
            if (!done) setNeedsForce(true);
          }}
        />
      )}
      {needsForce && action.problem?.code === 'server_has_devices' && (
        <>
          <p role="alert" class="problem">
            {action.problem.message}
          </p>
          <ConfirmButton
            label={`Delete server and its ${server.device_count} devices`}
            question={`Their configs stop working at once. Delete ${server.name} and every device on it?`}
            confirm="Delete everything"
            busy={action.busy}
            onConfirm={() => void remove(true)}
          />
        </>
      )}
      {action.problem !== null && action.problem.code !== 'server_has_devices' && (
        <FormProblem problem={action.problem} />
      )}
    </section>
  );
}

export function ServerPage({ id }: { id: number }) {
  const canWrite = useCanWrite();
  const [server, reload] = useLoad(
    () => read(api.GET('/api/v1/servers/{id}', { params: { path: { id } } })),
    [id],
    POLL_MS,
  );
  const title = server.state === 'ready' ? server.data.name : 'Server';
  return (
    <Page
      title={title}
      actions={
        canWrite && (
          <Link class="button primary" href={`/devices?new=1&server=${id}`}>
            New device
          </Link>
        )
      }
    >
      <Show loaded={server} what="the server">
        {(data) => (
          <>
            <ServerFacts server={data} />
            <section aria-labelledby="server-devices">
              <h2 id="server-devices">Devices</h2>
              <DeviceList filter={{ server_id: id }} />
            </section>
            {canWrite && <EditServer key={data.id} server={data} onSaved={reload} />}
            {canWrite && <DeleteServer server={data} />}
          </>
        )}
      </Show>
    </Page>
  );
}
