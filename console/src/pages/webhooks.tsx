import { useState } from 'preact/hooks';
import { act, api, type Delivery, EVENT_KINDS, type Problem, read, type Webhook } from '../api.ts';
import { navigate } from '../router.ts';
import {
  Badge,
  CheckField,
  CheckList,
  ConfirmButton,
  FormProblem,
  Link,
  Page,
  FIRST_PAGE,
  Pager,
  SelectField,
  Show,
  Table,
  TextField,
  Time,
  useAction,
  useCanWrite,
  useLoad,
} from '../ui.tsx';
import { ShownOnce } from '../copy.tsx';

const POLL_MS = 15_000;

interface WebhookForm {
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
}

function WebhookFields(props: {
  form: WebhookForm;
  set: (change: Partial<WebhookForm>) => void;
  problem: Problem | null;
}) {
  const { form, set, problem } = props;
  return (
    <>
      <FormProblem problem={problem} shown={['url', 'description', 'events', 'enabled']} />
      <TextField
        label="URL"
        name="url"
        inputMode="url"
        problem={problem}
        required
        value={form.url}
        onValue={(url) => set({ url })}
      />
      <TextField
        label="Description"
        name="description"
        problem={problem}
        value={form.description}
        onValue={(description) => set({ description })}
      />
      <CheckList
        legend="Events"
        name="events"
        options={EVENT_KINDS}
        chosen={form.events}
        onChosen={(events) => set({ events })}
        problem={problem}
      />
      <CheckField
        label="Enabled"
        name="enabled"
        problem={problem}
        checked={form.enabled}
        onChecked={(enabled) => set({ enabled })}
      />
    </>
  );
}

function NewWebhook({ onMade }: { onMade: () => void }) {
  const [form, setForm] = useState<WebhookForm>({ url: '', description: '', events: [], enabled: true });
  const [secret, setSecret] = useState<string>();
  const action = useAction();
  if (secret !== undefined)
    return (
      <ShownOnce
        title="Webhook made"
        explanation="The signing secret is shown only now: keep it with the receiver."
        label="Signing secret"
        value={secret}
        onDone={() => setSecret(undefined)}
      />
    );
  return (
    <form
      class="form panel"
      aria-labelledby="new-webhook"
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(
          () => read(api.POST('/api/v1/webhooks', { body: { ...form, url: form.url.trim() } })),
          (made) => {
            setSecret(made.secret);
            setForm({ url: '', description: '', events: [], enabled: true });
            onMade();
          },
        );
      }}
    >
      <h2 id="new-webhook">New webhook</h2>
      <WebhookFields form={form} set={(change) => setForm({ ...form, ...change })} problem={action.problem} />
      <button type="submit" class="primary" disabled={action.busy}>
        Create webhook
      </button>
    </form>
  );
}

export function WebhooksPage() {
  const canWrite = useCanWrite();
  const [creating, setCreating] = useState(false);
  const [webhooks, reload] = useLoad(
    () => read(api.GET('/api/v1/webhooks', { params: { query: { limit: 200 } } })),
    [],
    POLL_MS,
  );
  return (
    <Page
      title="Webhooks"
      actions={
        canWrite &&
        !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New webhook
          </button>
        )
      }
    >
      {creating && <NewWebhook onMade={reload} />}
      <Show loaded={webhooks} what="webhooks">
        {(data) =>
          data.data.length === 0 ? (
            <p>No webhook yet.</p>
          ) : (
            <Table caption="Webhooks" head={['URL', 'Events', 'State', 'Made by']}>
              {data.data.map((hook) => (
                <tr key={hook.id}>
                  <td class="wrap">
                    <Link href={`/webhooks/${hook.id}`}>{hook.url}</Link>
                    {hook.description !== '' && <div class="muted small">{hook.description}</div>}
                  </td>
                  <td class="wrap">{hook.events.join(', ')}</td>
                  <td>{hook.enabled ? 'Enabled' : 'Disabled'}</td>
                  <td>{hook.created_by}</td>
                </tr>
              ))}
            </Table>
          )
        }
      </Show>
    </Page>
  );
}

function EditWebhook({ hook, onSaved }: { hook: Webhook; onSaved: () => void }) {
  const [form, setForm] = useState<WebhookForm>({
    url: hook.url,
    description: hook.description,
    events: hook.events,
    enabled: hook.enabled,
  });
  const action = useAction();
  const [saved, setSaved] = useState('');
  return (
    <form
      class="form"
      aria-labelledby="edit-webhook"
      onSubmit={(event) => {
        event.preventDefault();
        setSaved('');
        void action.run(
          () => read(api.PATCH('/api/v1/webhooks/{id}', { params: { path: { id: hook.id } }, body: form })),
          () => {
            setSaved('Saved.');
            onSaved();
          },
        );
      }}
    >
      <h2 id="edit-webhook">Settings</h2>
      <WebhookFields form={form} set={(change) => setForm({ ...form, ...change })} problem={action.problem} />
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          Save
        </button>
        <span role="status">{saved}</span>
      </div>
    </form>
  );
}

function Deliveries({ id, version }: { id: number; version: number }) {
  const [state, setState] = useState('');
  const [cursor, setCursor] = useState(FIRST_PAGE);
  const { after } = cursor;
  const [page] = useLoad(
    () =>
      read(
        api.GET('/api/v1/webhooks/{id}/deliveries', {
          params: {
            path: { id },
            query: {
              state: state === 'pending' || state === 'delivered' || state === 'failed' ? state : undefined,
              after: after === '' ? undefined : Number(after),
              limit: 50,
            },
          },
        }),
      ),
    [id, state, after, version],
    POLL_MS,
  );
  return (
    <section aria-labelledby="deliveries">
      <h2 id="deliveries">Deliveries</h2>
      <SelectField
        label="State"
        name="state"
        problem={null}
        value={state}
        onValue={(value) => {
          setState(value);
          setCursor(FIRST_PAGE);
        }}
        options={[
          { value: '', label: 'Any state' },
          { value: 'pending', label: 'Pending' },
          { value: 'delivered', label: 'Delivered' },
          { value: 'failed', label: 'Failed' },
        ]}
      />
      <Show loaded={page} what="deliveries">
        {(data) => (
          <>
            <DeliveryRows deliveries={data.data} />
            {(after !== '' || data.has_more) && (
              <Pager cursor={cursor} lastId={data.data.at(-1)?.id} hasMore={data.has_more} onPage={setCursor} />
            )}
          </>
        )}
      </Show>
    </section>
  );
}

function DeliveryRows({ deliveries }: { deliveries: Delivery[] }) {
  if (deliveries.length === 0) return <p>No deliveries.</p>;
  return (
    <Table caption="Deliveries" head={['Event', 'State', 'Attempts', 'Last attempt', 'Answer', 'Made']}>
      {deliveries.map((delivery) => (
        <tr key={delivery.id}>
          <td>{delivery.kind}</td>
          <td>
            <Badge status={delivery.state} />
          </td>
          <td>{delivery.attempts}</td>
          <td>
            <Time iso={delivery.last_attempt_at} relative />
          </td>
          <td class="wrap">
            {delivery.response_status ?? ''} {delivery.error ?? ''}
          </td>
          <td>
            <Time iso={delivery.created_at} />
          </td>
        </tr>
      ))}
    </Table>
  );
}

export function WebhookPage({ id }: { id: number }) {
  const canWrite = useCanWrite();
  const [hook, reload] = useLoad(() => read(api.GET('/api/v1/webhooks/{id}', { params: { path: { id } } })), [id]);
  const [pings, setPings] = useState(0);
  const action = useAction();
  const [pinged, setPinged] = useState('');
  return (
    <Page title="Webhook">
      <Show loaded={hook} what="the webhook">
        {(data) => (
          <>
            <dl class="facts">
              <dt>URL</dt>
              <dd class="wrap">{data.url}</dd>
              <dt>State</dt>
              <dd>{data.enabled ? 'Enabled' : 'Disabled'}</dd>
              <dt>Events</dt>
              <dd class="wrap">{data.events.join(', ')}</dd>
              <dt>Made by</dt>
              <dd>{data.created_by}</dd>
              <dt>Made</dt>
              <dd>
                <Time iso={data.created_at} />
              </dd>
            </dl>
            {canWrite && (
              <div class="actions">
                <button
                  type="button"
                  disabled={action.busy}
                  onClick={() =>
                    void action.run(
                      () => read(api.POST('/api/v1/webhooks/{id}/ping', { params: { path: { id } } })),
                      (delivery) => {
                        setPinged(`Ping queued (delivery ${delivery.id}).`);
                        setPings(pings + 1);
                      },
                    )
                  }
                >
                  Ping
                </button>
                <ConfirmButton
                  label="Delete webhook"
                  question="Delete this webhook and stop its deliveries?"
                  confirm="Delete"
                  busy={action.busy}
                  onConfirm={() =>
                    void action.run(
                      () => act(api.DELETE('/api/v1/webhooks/{id}', { params: { path: { id } } })),
                      () => navigate('/webhooks'),
                    )
                  }
                />
                <span role="status">{pinged}</span>
              </div>
            )}
            <FormProblem problem={action.problem} />
            <Deliveries id={id} version={pings} />
            {canWrite && <EditWebhook key={data.id} hook={data} onSaved={reload} />}
          </>
        )}
      </Show>
    </Page>
  );
}
