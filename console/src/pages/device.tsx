import { useEffect, useState } from 'preact/hooks';
import { act, api, type Device, type Result, read, type Server } from '../api.ts';
import type { paths } from '../api-types.ts';
import { UsageChart } from '../chart.tsx';
import {
  bytesToGigabytes,
  formatBytes,
  formatSpeed,
  fromLocalInput,
  gigabytesToBytes,
  kbitsToMegabits,
  megabitsToKbits,
  toLocalInput,
} from '../format.ts';
import { navigate } from '../router.ts';
import {
  Badge,
  ConfirmButton,
  FormProblem,
  Link,
  Online,
  Page,
  SelectField,
  Show,
  Time,
  useAction,
  useCanWrite,
  useLoad,
} from '../ui.tsx';
import { CopyText } from '../copy.tsx';
import { DataLimit, DEVICE_POLL_MS, LimitFields, PeriodSpeedFields } from '../devices.tsx';
import { loadAllPlans, type Plan, QuotaFields } from '../plans.tsx';
import { Renew, TopUp } from '../renew.tsx';
import { loadAllServers } from '../servers.tsx';

type DeviceChange = paths['/api/v1/devices/{id}']['patch']['requestBody']['content']['application/json'];
type Share = paths['/api/v1/devices/{id}/share']['get']['responses'][200]['content']['application/json'];

function Facts({ device, server, plan }: { device: Device; server: Server | undefined; plan: Plan | undefined }) {
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <Badge status={device.status} />
      </dd>
      <dt>Connection</dt>
      <dd>
        <Online online={device.online} />
      </dd>
      <dt>Last handshake</dt>
      <dd>
        <Time iso={device.last_handshake} relative />
      </dd>
      <dt>Server</dt>
      <dd>
        <Link href={`/servers/${device.server_id}`}>{server?.name ?? `#${device.server_id}`}</Link>
      </dd>
      <dt>Address</dt>
      <dd>{device.address}</dd>
      <dt>External ID</dt>
      <dd>
        {device.external_id === null ? (
          '—'
        ) : (
          <Link href={`/groups/${encodeURIComponent(device.external_id)}`}>{device.external_id}</Link>
        )}
      </dd>
      <dt>Data used</dt>
      <dd>
        <DataLimit device={device} />
      </dd>
      <dt>This month</dt>
      <dd>
        {formatBytes(device.month_usage.rx_bytes)} down, {formatBytes(device.month_usage.tx_bytes)} up
      </dd>
      <dt>Counting since</dt>
      <dd>
        <Time iso={device.usage_reset_at} />
      </dd>
      <dt>Expires</dt>
      <dd>
        <Time iso={device.expires_at} />
      </dd>
      <dt>Top-up this period</dt>
      <dd>{formatBytes(device.top_up_bytes)}</dd>
      <dt>Speed limit</dt>
      <dd>{formatSpeed(device.speed_limit)}</dd>
      <dt>At the data limit</dt>
      <dd>
        {device.quota_action === 'throttle' && device.throttle_speed !== null
          ? `Throttled to ${formatSpeed(device.throttle_speed)}`
          : 'Cut off'}
      </dd>
      <dt>Plan</dt>
      <dd>{device.plan_id === null ? '—' : (plan?.name ?? `#${device.plan_id}`)}</dd>
      <dt>Public key</dt>
      <dd class="mono">{device.public_key}</dd>
      <dt>Created</dt>
      <dd>
        <Time iso={device.created_at} />
      </dd>
    </dl>
  );
}

function Limits({ device, onSaved }: { device: Device; onSaved: (device: Device) => void }) {
  const initial = {
    dataLimit: bytesToGigabytes(device.data_limit),
    period: device.limit_period,
    expires: toLocalInput(device.expires_at),
    speed: kbitsToMegabits(device.speed_limit),
    action: device.quota_action,
    throttle: kbitsToMegabits(device.throttle_speed),
  };
  const [form, setForm] = useState(initial);
  const set = (change: Partial<typeof form>) => setForm({ ...form, ...change });
  const action = useAction();
  const [saved, setSaved] = useState('');
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const body: DeviceChange = {};
    if (form.dataLimit !== initial.dataLimit) body.data_limit = gigabytesToBytes(form.dataLimit);
    if (form.period !== initial.period) body.limit_period = form.period;
    if (form.expires !== initial.expires) body.expires_at = fromLocalInput(form.expires);
    if (form.speed !== initial.speed) body.speed_limit = megabitsToKbits(form.speed);
    // The API takes the action and its speed as a pair.
    if (form.action !== initial.action || form.throttle !== initial.throttle) {
      body.quota_action = form.action;
      body.throttle_speed = form.action === 'throttle' ? megabitsToKbits(form.throttle) : null;
    }
    setSaved('');
    void action.run(
      () => read(api.PATCH('/api/v1/devices/{id}', { params: { path: { id: device.id } }, body })),
      (changed) => {
        setSaved('Saved.');
        onSaved(changed);
      },
    );
  };
  const { problem } = action;
  return (
    <form onSubmit={submit} class="form" aria-labelledby="limits">
      <h2 id="limits">Limits</h2>
      <FormProblem
        problem={problem}
        shown={['data_limit', 'limit_period', 'expires_at', 'speed_limit', 'quota_action', 'throttle_speed']}
      />
      <LimitFields form={form} set={set} problem={problem} />
      <PeriodSpeedFields form={form} set={set} problem={problem} />
      <QuotaFields form={form} set={set} problem={problem} />
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          Save limits
        </button>
        <span role="status">{saved}</span>
      </div>
    </form>
  );
}

function Usage({ device }: { device: Device }) {
  const [monthly, setMonthly] = useState(false);
  const [usage] = useLoad(
    () => read(api.GET('/api/v1/devices/{id}/usage', { params: { path: { id: device.id } } })),
    [device.id, device.month_usage.total_bytes],
  );
  return (
    <section aria-labelledby="usage">
      <h2 id="usage">Usage</h2>
      <fieldset class="toggle">
        <legend class="visually-hidden">Usage per</legend>
        <button type="button" aria-pressed={!monthly} onClick={() => setMonthly(false)}>
          Daily (90 days)
        </button>
        <button type="button" aria-pressed={monthly} onClick={() => setMonthly(true)}>
          Monthly
        </button>
      </fieldset>
      <Show loaded={usage} what="usage">
        {(report) => (
          <UsageChart
            rows={monthly ? report.monthly : report.daily}
            monthly={monthly}
            caption={monthly ? 'Usage per month' : 'Usage per day, last 90 days'}
          />
        )}
      </Show>
    </section>
  );
}

/** The device's QR code, fetched with the session and shown as a blob: URL (the CSP allows no other source). */
function useQrImage(device: Device): string | undefined {
  const [url, setUrl] = useState<string>();
  // The QR code changes exactly when the config does.
  useEffect(() => {
    let live = true;
    let made: string | undefined;
    void read(
      api.GET('/api/v1/devices/{id}/config', {
        params: { path: { id: device.id }, query: { format: 'qr' } },
        parseAs: 'blob',
      }),
    ).then((result) => {
      if (!live || !result.ok) return;
      made = URL.createObjectURL(result.data);
      setUrl(made);
    });
    return () => {
      live = false;
      if (made !== undefined) URL.revokeObjectURL(made);
    };
  }, [device.id, device.config]);
  return url;
}

function Config({ device }: { device: Device }) {
  const qr = useQrImage(device);
  const file = `/api/v1/devices/${device.id}/config`;
  return (
    <section aria-labelledby="config">
      <h2 id="config">Config</h2>
      <div class="config">
        {qr === undefined ? (
          <p role="status">Loading the QR code…</p>
        ) : (
          <img class="qr" src={qr} alt={`QR code of the WireGuard config of ${device.name}`} width={292} height={292} />
        )}
        <div>
          <p>Scan the code with the WireGuard app, or give the file to the device.</p>
          <p>
            <a class="button" href={file} download="">
              Download config
            </a>
          </p>
          <p>
            <a href={`${file}?kill_switch=true`} download="">
              Download with a kill switch (Linux)
            </a>
          </p>
          <details>
            <summary>Show the config text</summary>
            <pre class="mono">{device.config}</pre>
          </details>
        </div>
      </div>
    </section>
  );
}

function ShareLink({ device }: { device: Device }) {
  const canWrite = useCanWrite();
  const [link, reload] = useLoad(async (): Promise<Result<Share | null>> => {
    const result = await read(api.GET('/api/v1/devices/{id}/share', { params: { path: { id: device.id } } }));
    // No link is not a failure: 404 means none was made (or it was revoked).
    return result.ok || result.status !== 404 ? result : { ok: true, data: null };
  }, [device.id]);
  const action = useAction();
  return (
    <section aria-labelledby="share">
      <h2 id="share">Share link</h2>
      <p class="muted">A public page with the QR code and the file: anyone holding the link can use the config.</p>
      <Show loaded={link} what="the share link">
        {(data) => (
          <>
            {data === null ? (
              <p>No share link.</p>
            ) : (
              <>
                <CopyText label="Share link" value={data.url} />
                <p class="muted">
                  Expires: <Time iso={data.expires_at} />
                </p>
              </>
            )}
            {canWrite && (
              <div class="actions">
                <button
                  type="button"
                  disabled={action.busy}
                  onClick={() =>
                    void action.run(
                      () =>
                        read(api.POST('/api/v1/devices/{id}/share', { params: { path: { id: device.id } }, body: {} })),
                      reload,
                    )
                  }
                >
                  {data === null ? 'Make share link' : 'Replace share link'}
                </button>
                {data !== null && (
                  <ConfirmButton
                    label="Revoke share link"
                    question="The link stops working at once."
                    confirm="Revoke"
                    busy={action.busy}
                    onConfirm={() =>
                      void action.run(
                        () => act(api.DELETE('/api/v1/devices/{id}/share', { params: { path: { id: device.id } } })),
                        reload,
                      )
                    }
                  />
                )}
              </div>
            )}
            <FormProblem problem={action.problem} />
          </>
        )}
      </Show>
    </section>
  );
}

function Actions(props: { device: Device; servers: Server[]; onChanged: (device: Device) => void }) {
  const { device } = props;
  const action = useAction();
  const [target, setTarget] = useState('auto');
  const [done, setDone] = useState('');
  const then = (message: string) => (changed: Device) => {
    setDone(message);
    props.onChanged(changed);
  };
  const path = { params: { path: { id: device.id } } };
  return (
    <section aria-labelledby="device-actions">
      <h2 id="device-actions">Actions</h2>
      <div class="actions">
        <button
          type="button"
          disabled={action.busy}
          onClick={() =>
            void action.run(
              () => read(api.PATCH('/api/v1/devices/{id}', { ...path, body: { enabled: !device.enabled } })),
              then(device.enabled ? 'Disabled.' : 'Enabled.'),
            )
          }
        >
          {device.enabled ? 'Disable' : 'Enable'}
        </button>
        <ConfirmButton
          label="Reset usage"
          question="Start counting toward the limit again from now?"
          confirm="Reset"
          busy={action.busy}
          onConfirm={() =>
            void action.run(() => read(api.POST('/api/v1/devices/{id}/usage/reset', path)), then('Usage reset.'))
          }
        />
        <ConfirmButton
          label="Delete device"
          question={`Delete ${device.name}? Its config stops working.`}
          confirm="Delete"
          busy={action.busy}
          onConfirm={() =>
            void action.run(
              () => act(api.DELETE('/api/v1/devices/{id}', path)),
              () => navigate('/devices'),
            )
          }
        />
      </div>
      <form
        class="row move"
        onSubmit={(event) => {
          event.preventDefault();
          const server_id = target === 'auto' ? ('auto' as const) : Number(target);
          void action.run(
            () => read(api.POST('/api/v1/devices/{id}/move', { ...path, body: { server_id } })),
            then('Moved: the device needs its new config.'),
          );
        }}
      >
        <SelectField
          label="Move to server"
          name="server_id"
          problem={action.problem}
          value={target}
          onValue={setTarget}
          options={[
            { value: 'auto', label: 'Any other server with room' },
            ...props.servers
              .filter((server) => server.id !== device.server_id)
              .map((server) => ({ value: String(server.id), label: server.name })),
          ]}
        />
        <button type="submit" disabled={action.busy}>
          Move
        </button>
      </form>
      <p role="status">{done}</p>
      <FormProblem problem={action.problem} shown={['server_id']} />
    </section>
  );
}

export function DevicePage({ id }: { id: number }) {
  const canWrite = useCanWrite();
  const [device, reload] = useLoad(
    () => read(api.GET('/api/v1/devices/{id}', { params: { path: { id } } })),
    [id],
    DEVICE_POLL_MS,
  );
  const [servers] = useLoad(loadAllServers, []);
  const serverList = servers.state === 'ready' ? servers.data.items : [];
  const [plans] = useLoad(loadAllPlans, []);
  const planList = plans.state === 'ready' ? plans.data.items : [];
  return (
    <Page title={device.state === 'ready' ? device.data.name : 'Device'}>
      <Show loaded={device} what="the device">
        {(data) => (
          <div class="device">
            <Facts
              device={data}
              server={serverList.find((server) => server.id === data.server_id)}
              plan={planList.find((plan) => plan.id === data.plan_id)}
            />
            <Config device={data} />
            <Usage device={data} />
            {canWrite && <Limits key={`${data.id}-${data.updated_at}`} device={data} onSaved={reload} />}
            {canWrite && <Renew device={data} plans={planList} onRenewed={reload} />}
            {canWrite && <TopUp device={data} onToppedUp={reload} />}
            <ShareLink device={data} />
            {canWrite && <Actions device={data} servers={serverList} onChanged={reload} />}
          </div>
        )}
      </Show>
    </Page>
  );
}
