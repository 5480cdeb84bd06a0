import { useContext, useState } from 'preact/hooks';
import { act, api, read, type Schemas } from '../api.ts';
import {
  ConfirmButton,
  FormProblem,
  Page,
  SelectField,
  SessionContext,
  Show,
  Table,
  TextField,
  Time,
  useAction,
  useLoad,
  SubmitOrCancel,
} from '../ui.tsx';

type ConsoleUser = Schemas['ConsoleUser'];
type Role = ConsoleUser['role'];

const ROLES: ReadonlyArray<{ value: Role; label: string }> = [
  { value: 'admin', label: 'admin (changes everything)' },
  { value: 'viewer', label: 'viewer (sees, changes nothing)' },
];

function isRole(value: string): value is Role {
  return value === 'admin' || value === 'viewer';
}

interface UserForm {
  name: string;
  role: Role;
  password: string;
}

const EMPTY: UserForm = { name: '', role: 'viewer', password: '' };

function NewUser({ onMade, onDone }: { onMade: () => void; onDone: () => void }) {
  const [form, setForm] = useState<UserForm>(EMPTY);
  const action = useAction();
  return (
    <form
      class="form panel"
      aria-labelledby="new-user"
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(
          () => read(api.POST('/api/v1/console-users', { body: { ...form, name: form.name.trim() } })),
          () => {
            setForm(EMPTY);
            onMade();
            onDone();
          },
        );
      }}
    >
      <h2 id="new-user">New user</h2>
      <FormProblem problem={action.problem} shown={['name', 'role', 'password']} />
      <TextField
        label="Name"
        name="name"
        problem={action.problem}
        required
        value={form.name}
        onValue={(name) => setForm({ ...form, name })}
      />
      <SelectField
        label="Role"
        name="role"
        problem={action.problem}
        value={form.role}
        options={ROLES}
        onValue={(role) => isRole(role) && setForm({ ...form, role })}
      />
      <TextField
        label="Password"
        name="password"
        secret
        required
        hint="At least 12 characters. Tell it to the user another way than this page."
        problem={action.problem}
        value={form.password}
        onValue={(password) => setForm({ ...form, password })}
      />
      <SubmitOrCancel label="Create user" busy={action.busy} onCancel={onDone} />
    </form>
  );
}

/** A new password for the user; their sessions end at once (the panel says so in the activity log). */
function NewPassword({ user, onDone }: { user: ConsoleUser; onDone: () => void }) {
  const [password, setPassword] = useState('');
  const action = useAction();
  return (
    <form
      class="form"
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(
          () =>
            read(
              api.PUT('/api/v1/console-users/{id}/password', {
                params: { path: { id: user.id } },
                body: { password },
              }),
            ),
          onDone,
        );
      }}
    >
      <FormProblem problem={action.problem} shown={['password']} />
      <TextField
        label={`New password for ${user.name}`}
        name="password"
        secret
        required
        hint="At least 12 characters; the user's sessions end at once."
        problem={action.problem}
        value={password}
        onValue={setPassword}
      />
      <SubmitOrCancel label="Save password" busy={action.busy} primary={false} onCancel={onDone} />
    </form>
  );
}

function UserRow({ user, onChanged }: { user: ConsoleUser; onChanged: () => void }) {
  const me = useContext(SessionContext).user.name;
  const action = useAction();
  const [changingPassword, setChangingPassword] = useState(false);
  const other: Role = user.role === 'admin' ? 'viewer' : 'admin';
  const self = user.name === me ? ' (you)' : '';
  return (
    <tr>
      <td>
        {user.name}
        {self}
      </td>
      <td>{user.role}</td>
      <td>
        <Time iso={user.created_at} />
      </td>
      <td>
        <Time iso={user.last_sign_in_at} relative />
      </td>
      <td>
        <div class="row">
          <button
            type="button"
            disabled={action.busy}
            onClick={() =>
              void action.run(
                () =>
                  read(
                    api.PATCH('/api/v1/console-users/{id}', {
                      params: { path: { id: user.id } },
                      body: { role: other },
                    }),
                  ),
                onChanged,
              )
            }
          >
            Make {other}
            <span class="visually-hidden"> {user.name}</span>
          </button>
          {!changingPassword && (
            <button type="button" onClick={() => setChangingPassword(true)}>
              New password<span class="visually-hidden"> for {user.name}</span>
            </button>
          )}
          <ConfirmButton
            label={`Remove ${user.name}`}
            question={`Remove ${user.name}${self}? Their sessions end at once.`}
            confirm={`Yes, remove ${user.name}`}
            busy={action.busy}
            onConfirm={() =>
              void action.run(
                () => act(api.DELETE('/api/v1/console-users/{id}', { params: { path: { id: user.id } } })),
                onChanged,
              )
            }
          />
        </div>
        {changingPassword && <NewPassword user={user} onDone={() => setChangingPassword(false)} />}
        {action.problem !== null && (
          <p role="alert" class="problem">
            {action.problem.message}
          </p>
        )}
      </td>
    </tr>
  );
}

/** The people who sign in here (admins only): add one, change a role, remove one. */
export function UsersPage() {
  const [creating, setCreating] = useState(false);
  const [users, reload] = useLoad(() => read(api.GET('/api/v1/console-users')), []);
  return (
    <Page
      title="Users"
      actions={
        !creating && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New user
          </button>
        )
      }
    >
      <p class="muted">
        An admin changes things; a viewer sees everything but webhooks and changes nothing. A new password or a removal
        ends the user's sessions at once; the last admin stays an admin. On the panel host:{' '}
        <code>vpn-panel users add|list|passwd|role|remove</code>.
      </p>
      {creating && <NewUser onMade={reload} onDone={() => setCreating(false)} />}
      <Show loaded={users} what="users">
        {(data) => (
          <Table caption="Console users" head={['Name', 'Role', 'Created', 'Last sign-in', 'Change']}>
            {data.data.map((user) => (
              <UserRow key={user.id} user={user} onChanged={reload} />
            ))}
          </Table>
        )}
      </Show>
    </Page>
  );
}
