import { Page } from '../ui.tsx';

/** Console users are added, changed and removed on the panel host; passwords are read from standard input. */
export function UsersPage() {
  return (
    <Page title="Users">
      <p>
        Console users sign in here. An admin changes things; a viewer sees everything and changes nothing. Manage them
        on the panel host (the password is read from standard input, at least 12 characters):
      </p>
      <pre class="mono">
        {'vpn-panel users add --name anna --role viewer\n'}
        {'vpn-panel users list\n'}
        {'vpn-panel users passwd anna\n'}
        {'vpn-panel users remove anna'}
      </pre>
    </Page>
  );
}
