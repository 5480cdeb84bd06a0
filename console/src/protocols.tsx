/**
 * A server's protocol as the console shows and sends it: its name, the tag of an AmneziaWG server in lists,
 * the nodes that cannot run it, and AmneziaWG's obfuscation parameters as form fields (New server, settings).
 */
import { useState } from 'preact/hooks';
import type { PanelNode, Problem, Server } from './api.ts';
import { fieldProblem, SelectField, TextField } from './ui.tsx';

export type Protocol = Server['protocol'];
export type Obfuscation = NonNullable<Server['obfuscation']>;
type ObfuscationKey = keyof Obfuscation;
/** What a person typed in each obfuscation field, as typed. */
export type ObfuscationForm = Record<ObfuscationKey, string>;

const PROTOCOL_NAMES: Record<Protocol, string> = { wireguard: 'WireGuard', amneziawg: 'AmneziaWG' };

export function protocolName(protocol: Protocol): string {
  return PROTOCOL_NAMES[protocol];
}

/** A node says which protocols it can run; a server of another one cannot be placed on it. */
export function nodeCannotRun(node: PanelNode, protocol: Protocol): boolean {
  return !node.protocols.includes(protocol);
}

/** Beside an AmneziaWG server's name in lists; WireGuard, the default, has none. */
export function ProtocolTag({ protocol }: { protocol: Protocol }) {
  return protocol === 'amneziawg' ? <span class="tag">{protocolName(protocol)}</span> : null;
}

/** The whole numbers (counts and sizes in bytes), then the texts (headers: a number or a range "A-B"). */
const NUMBER_KEYS = ['jc', 'jmin', 'jmax', 's1', 's2', 's3', 's4'] as const;
const TEXT_KEYS = ['h1', 'h2', 'h3', 'h4', 'i1', 'i2', 'i3', 'i4', 'i5'] as const;
/** Every server has these; i1-i5 only when set. */
const OPTIONAL_KEYS: readonly ObfuscationKey[] = ['i1', 'i2', 'i3', 'i4', 'i5'];

const LABELS: Record<ObfuscationKey, string> = {
  jc: 'Jc: junk packets before a handshake',
  jmin: 'Jmin: smallest junk packet (bytes)',
  jmax: 'Jmax: largest junk packet (bytes, at most 1280)',
  s1: 'S1: padding of the handshake initiation (bytes)',
  s2: 'S2: padding of the handshake response (bytes)',
  s3: 'S3: padding of the cookie reply (bytes)',
  s4: 'S4: padding of transport packets (bytes)',
  h1: 'H1: initiation header',
  h2: 'H2: response header',
  h3: 'H3: cookie reply header',
  h4: 'H4: transport header',
  i1: 'I1: special junk packet',
  i2: 'I2: special junk packet',
  i3: 'I3: special junk packet',
  i4: 'I4: special junk packet',
  i5: 'I5: special junk packet',
};

/** `jc` → `Jc`, `s1` → `S1`: the key as awg-quick and the apps write it. */
function awgName(key: ObfuscationKey): string {
  return key.charAt(0).toUpperCase() + key.slice(1);
}

const HEADER_HINT = 'A number, or a range A-B; the four may not overlap.';

export const EMPTY_OBFUSCATION: ObfuscationForm = {
  jc: '',
  jmin: '',
  jmax: '',
  s1: '',
  s2: '',
  s3: '',
  s4: '',
  h1: '',
  h2: '',
  h3: '',
  h4: '',
  i1: '',
  i2: '',
  i3: '',
  i4: '',
  i5: '',
};

/** A server's parameters as form text; an i1-i5 it does not have is empty. */
export function obfuscationForm(obfuscation: Obfuscation): ObfuscationForm {
  const form = { ...EMPTY_OBFUSCATION };
  for (const key of [...NUMBER_KEYS, ...TEXT_KEYS]) form[key] = String(obfuscation[key] ?? '');
  return form;
}

/**
 * The fields whose text differs from `before` (for a new server, EMPTY_OBFUSCATION: the fields filled in),
 * or undefined when none does. Numbers are sent as typed, so the API names a wrong one.
 */
export function obfuscationChange(form: ObfuscationForm, before: ObfuscationForm): Partial<Obfuscation> | undefined {
  const changed = (key: ObfuscationKey) => form[key].trim() !== before[key];
  const change: Partial<Obfuscation> = {};
  for (const key of NUMBER_KEYS) if (changed(key)) change[key] = Number(form[key]);
  for (const key of TEXT_KEYS) if (changed(key)) change[key] = form[key].trim();
  return Object.keys(change).length === 0 ? undefined : change;
}

/** The parameters in one line, as awg-quick names them: for the server's facts, which viewers see too. */
export function obfuscationSummary(obfuscation: Obfuscation): string {
  return [...NUMBER_KEYS, ...TEXT_KEYS]
    .filter((key) => obfuscation[key] !== undefined)
    .map((key) => `${awgName(key)} = ${obfuscation[key]}`)
    .join(', ');
}

/** The sixteen inputs, named `obfuscation.jc` and so on as the API names them in a 422. */
function ObfuscationInputs(props: {
  form: ObfuscationForm;
  set: (change: Partial<ObfuscationForm>) => void;
  problem: Problem | null;
  editing: boolean;
}) {
  const { form, set, problem, editing } = props;
  return (
    <>
      {[...NUMBER_KEYS, ...TEXT_KEYS].map((key) => (
        <TextField
          key={key}
          label={LABELS[key]}
          name={`obfuscation.${key}`}
          problem={problem}
          inputMode={NUMBER_KEYS.some((number) => number === key) ? 'numeric' : undefined}
          required={editing && !OPTIONAL_KEYS.includes(key)}
          hint={key.startsWith('h') ? HEADER_HINT : undefined}
          value={form[key]}
          onValue={(value) => set({ [key]: value })}
        />
      ))}
    </>
  );
}

/**
 * New server: the protocol, and for AmneziaWG its obfuscation parameters, closed until opened (or until the
 * API names one of them): left empty, they are generated for the server.
 */
export function ProtocolChoice(props: {
  protocol: Protocol;
  onProtocol: (protocol: Protocol) => void;
  obfuscation: ObfuscationForm;
  setObfuscation: (change: Partial<ObfuscationForm>) => void;
  problem: Problem | null;
}) {
  const { protocol, obfuscation, problem } = props;
  const [opened, setOpened] = useState(false);
  const filled = Object.values(obfuscation).filter((text) => text.trim() !== '').length;
  return (
    <>
      <SelectField
        label="Protocol"
        name="protocol"
        problem={problem}
        hint="AmneziaWG: WireGuard that deep packet inspection does not recognise; clients need an AmneziaWG app."
        value={protocol}
        onValue={(value) => props.onProtocol(value === 'amneziawg' ? 'amneziawg' : 'wireguard')}
        options={Object.entries(PROTOCOL_NAMES).map(([value, label]) => ({ value, label }))}
      />
      {protocol === 'amneziawg' && (
        <details
          class="obfuscation"
          open={opened || fieldProblem(problem, 'obfuscation') !== undefined}
          onToggle={(event) => setOpened(event.currentTarget.open)}
        >
          <summary>
            Obfuscation:{' '}
            {filled === 0 ? 'generated for this server' : `${filled} set here, the rest generated for this server`}
          </summary>
          <ObfuscationInputs form={obfuscation} set={props.setObfuscation} problem={problem} editing={false} />
        </details>
      )}
    </>
  );
}

/** A server's settings: its obfuscation parameters, and what changing them does to its devices. */
export function ObfuscationSettings(props: {
  form: ObfuscationForm;
  set: (change: Partial<ObfuscationForm>) => void;
  problem: Problem | null;
}) {
  return (
    <fieldset class="obfuscation">
      <legend>AmneziaWG obfuscation</legend>
      <p class="warning">Changing these changes every device's config: its clients must import it again.</p>
      <ObfuscationInputs {...props} editing />
    </fieldset>
  );
}
