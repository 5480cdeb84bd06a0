/** Values to copy: a link or a secret, and a secret the panel shows only once. */
import { useId, useRef, useState } from 'preact/hooks';

/** A value to copy (a link, a secret), readable and selectable, with a Copy button. */
export function CopyText({ label, value }: { label: string; value: string }) {
  const id = useId();
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('Copied.');
    } catch {
      // No clipboard outside a secure context (plain http on an address): the text is selected instead.
      field.current?.select();
      setCopied('Selected: press Ctrl+C (⌘C) to copy.');
    }
  };
  return (
    <div class="field copy">
      <label for={id}>{label}</label>
      <div class="row">
        <input id={id} ref={field} readOnly value={value} onFocus={(event) => event.currentTarget.select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status" class="hint">
        {copied}
      </p>
    </div>
  );
}

/** A secret the panel shows only once (a new API key, a webhook's signing secret), to copy, then Done. */
export function ShownOnce(props: {
  title: string;
  explanation: string;
  label: string;
  value: string;
  onDone: () => void;
}) {
  const id = useId();
  return (
    <section class="panel" aria-labelledby={id}>
      <h2 id={id}>{props.title}</h2>
      <p>{props.explanation}</p>
      <CopyText label={props.label} value={props.value} />
      <button type="button" onClick={props.onDone}>
        Done
      </button>
    </section>
  );
}
