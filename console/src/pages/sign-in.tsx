import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { signIn } from '../session.ts';

/** The sign-in form. A wrong name or password gets one message that does not say which was wrong. */
export function SignInPage(props: { onSignedIn: () => void }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState('');
  const heading = useRef<HTMLHeadingElement>(null);
  const id = useId();
  useEffect(() => {
    document.title = 'Sign in · vpn-panel';
    heading.current?.focus();
  }, []);

  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    setBusy(true);
    setMessage('');
    const result = await signIn(user, password);
    setBusy(false);
    if (result.ok) props.onSignedIn();
    else setMessage(result.message);
  };

  return (
    <main id="content" class="sign-in">
      <h1 tabIndex={-1} ref={heading}>
        vpn-panel
      </h1>
      <form onSubmit={submit} aria-describedby={message === '' ? undefined : `${id}-problem`}>
        <div class="field">
          <label for={`${id}-user`}>User</label>
          <input
            id={`${id}-user`}
            name="user"
            autoComplete="username"
            autoCapitalize="none"
            spellcheck={false}
            required
            value={user}
            onInput={(event) => setUser(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for={`${id}-password`}>Password</label>
          <input
            id={`${id}-password`}
            name="password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onInput={(event) => setPassword(event.currentTarget.value)}
          />
        </div>
        <p id={`${id}-problem`} role="alert" class={message === '' ? 'problem empty' : 'problem'}>
          {message}
        </p>
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
