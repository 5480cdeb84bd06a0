import { useState } from 'preact/hooks';
import { act, api, read, type Schemas } from '../api.ts';
import {
  CheckField,
  CheckList,
  ConfirmButton,
  FormProblem,
  Page,
  Show,
  Table,
  TextField,
  Time,
  useAction,
  useCanWrite,
  useLoad,
  SubmitOrCancel,
} from '../ui.tsx';
import { ShownOnce } from '../copy.tsx';

type ApiKey = Schemas['ApiKey'];
type Scope = ApiKey['scopes'][number];

/** The scopes of docs/api.md "Keys and scopes", in its order; the generated types keep this list to the API's. */
const SCOPES: readonly Scope[] = [
  'devices:read',
  'devices:write',
  'servers:read',
  'servers:write',
  'events:read',
  'webhooks:write',
];

interface KeyForm {
  name: string;
  scopes: string[];
  noRateLimit: boolean;
}

const EMPTY: KeyForm = { name: '', scopes: [], noRateLimit: false };

function NewKey({ onMade, onDone }: { onMade: () => void; onDone: () => void }) {
  const [form, setForm] = useState<KeyForm>(EMPTY);
  const [key, setKey] = useState<string>();
  const action = useAction();
  if (key !== undefined)
    return (
      <ShownOnce
        title="Key made"
        explanation={
          'The key is shown only now: put it where the program that uses it reads it. ' +
          'The panel keeps only its hash.'
        }
        label="API key"
        value={key}
        onDone={onDone}
      />
    );
  return (
    <form
      class="form panel"
      aria-labelledby="new-key"
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(
          () =>
            read(
              api.POST('/api/v1/api-keys', {
                body: {
                  name: form.name.trim(),
                  scopes: SCOPES.filter((scope) => form.scopes.includes(scope)),
                  rate_limit_exempt: form.noRateLimit,
                },
              }),
            ),
          (made) => {
            setKey(made.key);
            setForm(EMPTY);
            onMade();
          },
        );
      }}
    >
      <h2 id="new-key">New key</h2>
      <FormProblem problem={action.problem} shown={['name', 'scopes', 'rate_limit_exempt']} />
      <TextField
        label="Name"
        name="name"
        problem={action.problem}
        required
        hint="Who uses it, e.g. shop or billing-bot: the activity log names changes made with it after it."
        value={form.name}
        onValue={(name) => setForm({ ...form, name })}
      />
      <CheckList
        legend="Scopes"
        name="scopes"
        options={SCOPES}
        chosen={form.scopes}
        onChosen={(scopes) => setForm({ ...form, scopes })}
        problem={action.problem}
      />
      <CheckField
        label="No rate limit (for a trusted program of your own)"
        name="rate_limit_exempt"
        problem={action.problem}
        checked={form.noRateLimit}
        onChecked={(noRateLimit) => setForm({ ...form, noRateLimit })}
      />
      <SubmitOrCancel label="Create key" busy={action.busy} onCancel={onDone} />
    </form>
  );
}

function KeyRow({ apiKey, onRevoked }: { apiKey: ApiKey; onRevoked: () => void }) {
  const action = useAction();
  return (
    <tr>
      <td>{apiKey.name}</td>
      <td class="wrap">{apiKey.scopes.join(', ')}</td>
      <td>
        <Time iso={apiKey.created_at} />
      </td>
      <td>
        <Time iso={apiKey.last_used_at} relative />
      </td>
      <td>
        {apiKey.revoked_at === null ? (
          apiKey.rate_limit_exempt ? (
            'Live, no rate limit'
          ) : (
            'Live'
          )
        ) : (
          <>
            Revoked <Time iso={apiKey.revoked_at} />
          </>
        )}
      </td>
      <td>
        {apiKey.revoked_at === null && (
          <ConfirmButton
            label="Revoke"
            question={`Revoke ${apiKey.name}? Programs using it are refused from their next request.`}
            confirm={`Revoke ${apiKey.name}`}
            busy={action.busy}
            onConfirm={() =>
              void action.run(
                () => act(api.DELETE('/api/v1/api-keys/{id}', { params: { path: { id: apiKey.id } } })),
                onRevoked,
              )
            }
          />
        )}
        {action.problem !== null && (
          <p role="alert" class="problem">
            {action.problem.message}
          </p>
        )}
      </td>
    </tr>
  );
}

/** The keys programs call the API with: made here (shown once), listed, revoked. Admins only. */
export function ApiKeysPage() {
  if (!useCanWrite())
    return (
      <Page title="API keys">
        <p>Only an admin manages API keys.</p>
      </Page>
    );
  return <ManagedKeys />;
}

function ManagedKeys() {
  const [creating, setCreating] = useState(false);
  const [keys, reload] = useLoad(() => read(api.GET('/api/v1/api-keys')), []);
  return (
    <Page
      title="API keys"
      actions={
        !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New key
          </button>
        )
      }
    >
      <p class="muted">
        API keys let programs (a shop, a bot, a script) call the panel's API with the scopes they were given. Only an
        admin signed in here manages them (or <code>vpn-panel keys</code> on the panel host).
      </p>
      {creating && <NewKey onMade={reload} onDone={() => setCreating(false)} />}
      <Show loaded={keys} what="API keys">
        {(data) =>
          data.data.length === 0 ? (
            <p>No API key yet.</p>
          ) : (
            <Table caption="API keys" head={['Name', 'Scopes', 'Created', 'Last used', 'State', 'Revoke']}>
              {data.data.map((apiKey) => (
                <KeyRow key={apiKey.id} apiKey={apiKey} onRevoked={reload} />
              ))}
            </Table>
          )
        }
      </Show>
    </Page>
  );
}
