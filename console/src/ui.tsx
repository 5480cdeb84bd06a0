/** Pieces every page uses: loading, forms with the API's field errors, times, links, confirmations. */
import {
  type AnchorHTMLAttributes,
  cloneElement,
  isValidElement,
  toChildArray,
  type ComponentChildren,
  createContext,
  type PartialInputHTMLAttributes,
} from 'preact';
import { type Inputs, useContext, useEffect, useId, useRef, useState } from 'preact/hooks';
import type { Problem, Result } from './api.ts';
import { formatRelative, formatTime, formatTimeIn } from './format.ts';
import { followLink } from './router.ts';
import type { Session } from './session.ts';

export const SessionContext = createContext<Session>({ user: { name: '', role: 'viewer' }, timeZone: 'UTC' });

/** Viewers see everything and change nothing: write controls are not drawn for them. */
export function useCanWrite(): boolean {
  return useContext(SessionContext).user.role === 'admin';
}

export function Link({ href, children, ...rest }: AnchorHTMLAttributes & { href: string }) {
  return (
    <a {...rest} href={href} onClick={followLink}>
      {children}
    </a>
  );
}

/** An instant in the browser's zone; the panel's zone on hover. */
export function Time({ iso, relative = false }: { iso: string | null; relative?: boolean }) {
  const { timeZone } = useContext(SessionContext);
  if (iso === null) return <span>never</span>;
  return (
    <time dateTime={iso} title={formatTimeIn(iso, timeZone)}>
      {relative ? formatRelative(iso) : formatTime(iso)}
    </time>
  );
}

/** A page: its title (also the document's), an optional row of actions, and its content. */
export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${props.title} · vpn-panel`;
  }, [props.title]);
  // A new page takes the focus, so keyboard and screen reader users start at its title.
  useEffect(() => heading.current?.focus(), []);
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1} ref={heading}>
          {props.title}
        </h1>
        {props.actions !== undefined && props.actions !== false && <div class="actions">{props.actions}</div>}
      </div>
      {props.children}
    </>
  );
}

export type Loaded<T> =
  | { state: 'loading' }
  | { state: 'ready'; data: T; refreshFailed?: Problem }
  | { state: 'failed'; problem: Problem };

/**
 * Loads with `load` when `inputs` change, and again every `pollMs` while the page is visible; a failed
 * refresh keeps what was shown and says so. Returns the state and a function that loads again now.
 */
export function useLoad<T>(load: () => Promise<Result<T>>, inputs: Inputs, pollMs = 0): [Loaded<T>, () => void] {
  const [value, setValue] = useState<Loaded<T>>({ state: 'loading' });
  const again = useRef<() => void>(() => {});
  useEffect(() => {
    let live = true;
    setValue({ state: 'loading' });
    const run = async () => {
      const result = await load();
      if (!live) return;
      setValue((before) => {
        if (result.ok) return { state: 'ready', data: result.data };
        if (before.state === 'ready') return { ...before, refreshFailed: result.problem };
        return { state: 'failed', problem: result.problem };
      });
    };
    again.current = () => void run();
    void run();
    const timer =
      pollMs > 0 ? setInterval(() => document.visibilityState === 'visible' && void run(), pollMs) : undefined;
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, inputs);
  return [value, () => again.current()];
}

/** What was loaded, or a line saying it is loading or why it failed. */
export function Show<T>(props: { loaded: Loaded<T>; what: string; children: (data: T) => ComponentChildren }) {
  const { loaded } = props;
  if (loaded.state === 'loading') return <p role="status">Loading {props.what}…</p>;
  if (loaded.state === 'failed')
    return (
      <p role="alert" class="problem">
        Could not load {props.what}: {loaded.problem.message}
      </p>
    );
  return (
    <>
      {loaded.refreshFailed !== undefined && (
        <p role="alert" class="problem">
          Could not refresh {props.what}: {loaded.refreshFailed.message}
        </p>
      )}
      {props.children(loaded.data)}
    </>
  );
}

/**
 * A form's or a button's call to the API: busy while it runs, the problem it met. One call at a time: a second
 * submit before the page draws the disabled button (a quick double click) is dropped, so a renewal or a
 * top-up is not sent twice.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  const running = useRef(false);
  async function run<T>(call: () => Promise<Result<T>>, then: (data: T) => void = () => {}): Promise<boolean> {
    if (running.current) return false;
    running.current = true;
    setBusy(true);
    setProblem(null);
    const result = await call().finally(() => {
      running.current = false;
    });
    setBusy(false);
    if (!result.ok) {
      setProblem(result.problem);
      return false;
    }
    then(result.data);
    return true;
  }
  return { busy, problem, run, clear: () => setProblem(null) };
}

/**
 * The Idempotency-Key of a form that changes something once per submit (a renewal, a top-up): the same while the
 * form's values stay the same, so a resend after a lost answer (or a 409 while the first still runs) is answered
 * with the first one's reply instead of doing it again; a new one after a success (`done`) or a change of values.
 * Made with getRandomValues, which, unlike randomUUID, works on a panel served over plain http.
 */
export function useIdempotencyKey() {
  const current = useRef<{ values: string; key: string } | null>(null);
  function keyFor(values: unknown): string {
    const text = JSON.stringify(values);
    if (current.current?.values !== text) {
      const bytes = crypto.getRandomValues(new Uint8Array(16));
      current.current = { values: text, key: Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('') };
    }
    return current.current.key;
  }
  return { keyFor, done: () => (current.current = null) };
}

/** What the API said about one input (`fields.name`, or `fields['name.0']` for an item of a list). */
export function fieldProblem(problem: Problem | null, name: string): string | undefined {
  if (problem === null) return undefined;
  const entry = Object.entries(problem.fields).find(([key]) => key === name || key.startsWith(`${name}.`));
  return entry?.[1];
}

/** The message of a problem no input of the form shows (the form names its inputs in `shown`). */
export function FormProblem({ problem, shown = [] }: { problem: Problem | null; shown?: readonly string[] }) {
  if (problem === null) return null;
  if (shown.some((name) => fieldProblem(problem, name) !== undefined))
    return (
      <p role="alert" class="problem">
        Please correct the fields marked below.
      </p>
    );
  return (
    <p role="alert" class="problem">
      {problem.message}
    </p>
  );
}

interface FieldProps {
  label: string;
  name: string;
  problem: Problem | null;
  hint?: string;
}

function useFieldIds(props: FieldProps) {
  const id = useId();
  const error = fieldProblem(props.problem, props.name);
  const described = [props.hint === undefined ? '' : `${id}-hint`, error === undefined ? '' : `${id}-error`]
    .filter((part) => part !== '')
    .join(' ');
  const notes = (
    <>
      {props.hint !== undefined && (
        <p id={`${id}-hint`} class="hint">
          {props.hint}
        </p>
      )}
      {error !== undefined && (
        <p id={`${id}-error`} class="field-error">
          {error}
        </p>
      )}
    </>
  );
  const aria = { 'aria-invalid': error === undefined ? undefined : true, 'aria-describedby': described || undefined };
  return { id, aria, notes };
}

type InputAttributes = Pick<PartialInputHTMLAttributes<HTMLInputElement>, 'required' | 'inputMode'>;

/**
 * A one-line text input, or with `dateTime` a date and time in the browser's zone, or with `secret` a new
 * password (not shown, not offered from the browser's saved ones).
 */
export function TextField(
  props: FieldProps &
    InputAttributes & { value: string; onValue: (value: string) => void; dateTime?: boolean; secret?: boolean },
) {
  const { label, name, problem, hint, value, onValue, dateTime = false, secret = false, ...input } = props;
  const { id, aria, notes } = useFieldIds(props);
  const common = {
    ...input,
    ...aria,
    id,
    name,
    value,
    onInput: (event: { currentTarget: HTMLInputElement }) => onValue(event.currentTarget.value),
  };
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {dateTime && <input {...common} type="datetime-local" />}
      {secret && <input {...common} type="password" autoComplete="new-password" />}
      {!dateTime && !secret && <input {...common} type="text" />}
      {notes}
    </div>
  );
}

export function SelectField(
  props: FieldProps & {
    value: string;
    onValue: (value: string) => void;
    options: ReadonlyArray<{ value: string; label: string }>;
  },
) {
  const { id, aria, notes } = useFieldIds(props);
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select
        {...aria}
        id={id}
        name={props.name}
        value={props.value}
        onChange={(event) => props.onValue(event.currentTarget.value)}
      >
        {props.options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
      {notes}
    </div>
  );
}

export function CheckField(props: FieldProps & { checked: boolean; onChecked: (checked: boolean) => void }) {
  const { id, aria, notes } = useFieldIds(props);
  return (
    <div class="field check">
      <input
        {...aria}
        type="checkbox"
        id={id}
        name={props.name}
        checked={props.checked}
        onChange={(event) => props.onChecked(event.currentTarget.checked)}
      />
      <label for={id}>{props.label}</label>
      {notes}
    </div>
  );
}

/** A group of checkboxes, one for each of `options` (named by it), with the API's error about the group. */
export function CheckList(props: {
  legend: string;
  name: string;
  options: readonly string[];
  chosen: readonly string[];
  onChosen: (chosen: string[]) => void;
  problem: Problem | null;
}) {
  const error = fieldProblem(props.problem, props.name);
  return (
    <fieldset class={`field ${props.name}`}>
      <legend>{props.legend}</legend>
      {props.options.map((option) => (
        <label key={option} class="check">
          <input
            type="checkbox"
            name={props.name}
            value={option}
            checked={props.chosen.includes(option)}
            onChange={(event) =>
              props.onChosen(
                event.currentTarget.checked
                  ? [...props.chosen, option]
                  : props.chosen.filter((chosen) => chosen !== option),
              )
            }
          />
          {option}
        </label>
      ))}
      {error !== undefined && <p class="field-error">{error}</p>}
    </fieldset>
  );
}

/**
 * A button that asks once more in place before it acts (no browser dialog): `label`, then `confirm` with
 * the question beside it and a Cancel.
 */
export function ConfirmButton(props: {
  label: string;
  question: string;
  confirm: string;
  busy?: boolean;
  onConfirm: () => void;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button type="button" class="danger" onClick={() => setAsking(true)} disabled={props.busy}>
        {props.label}
      </button>
    );
  return (
    <fieldset class="confirm">
      <legend>{props.question}</legend>
      <button
        type="button"
        class="danger"
        disabled={props.busy}
        onClick={() => {
          setAsking(false);
          props.onConfirm();
        }}
      >
        {props.confirm}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </fieldset>
  );
}

/** A form's submit button and its Cancel. */
export function SubmitOrCancel(props: { label: string; busy: boolean; primary?: boolean; onCancel: () => void }) {
  return (
    <div class="actions">
      <button type="submit" class={props.primary === false ? undefined : 'primary'} disabled={props.busy}>
        {props.label}
      </button>
      <button type="button" onClick={props.onCancel}>
        Cancel
      </button>
    </div>
  );
}

const STATUS_LABELS: Record<string, string> = {
  active: 'Active',
  disabled: 'Disabled',
  expired: 'Expired',
  limit_reached: 'Limit reached',
  running: 'Running',
  deploying: 'Deploying',
  node_offline: 'Node offline',
  error: 'Error',
  online: 'Online',
  offline: 'Offline',
  pending: 'Pending',
  delivered: 'Delivered',
  failed: 'Failed',
};

export function statusLabel(status: string): string {
  return STATUS_LABELS[status] ?? status;
}

export function Badge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{statusLabel(status)}</span>;
}

export function Online({ online }: { online: boolean }) {
  return <span class={online ? 'dot dot-on' : 'dot'}>{online ? 'Online' : 'Offline'}</span>;
}

/** Each cell of each row with its column's name (`data-label`), which a narrow screen shows before the cell. */
function labelled(rows: ComponentChildren, head: readonly string[]): ComponentChildren {
  return toChildArray(rows).map((row) =>
    isValidElement(row)
      ? cloneElement(
          row,
          {},
          toChildArray(row.props.children).map((cell, column) =>
            isValidElement(cell) ? cloneElement(cell, { 'data-label': head[column] }) : cell,
          ),
        )
      : row,
  );
}

/** A table; on a narrow screen each row becomes a block of labelled lines, so the page never scrolls sideways. */
export function Table(props: { caption: string; head: readonly string[]; children: ComponentChildren }) {
  return (
    <div class="table">
      <table>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            {props.head.map((name) => (
              <th key={name} scope="col">
                {name}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{labelled(props.children, props.head)}</tbody>
      </table>
    </div>
  );
}

/**
 * Where a cursor-paged list is: `after`, the last id of the page before (empty: the first page), and the cursors
 * of the pages before it, for Previous. The page keeps it, not the Pager: a Pager drawn once its page has loaded
 * is made anew for every page and would forget them.
 */
export interface Cursor {
  after: string;
  trail: string[];
}

export const FIRST_PAGE: Cursor = { after: '', trail: [] };

export function Pager(props: {
  cursor: Cursor;
  lastId: number | undefined;
  hasMore: boolean;
  onPage: (cursor: Cursor) => void;
}) {
  const { after, trail } = props.cursor;
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        disabled={after === ''}
        onClick={() => props.onPage({ after: trail.at(-1) ?? '', trail: trail.slice(0, -1) })}
      >
        Previous page
      </button>
      <button
        type="button"
        disabled={!props.hasMore || props.lastId === undefined}
        onClick={() => props.onPage({ after: String(props.lastId), trail: [...trail, after] })}
      >
        Next page
      </button>
    </nav>
  );
}
