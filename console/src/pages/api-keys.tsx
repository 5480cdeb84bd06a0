import { Page } from '../ui.tsx';

/** API keys are made, listed and revoked on the panel host; the console keeps no key. */
export function ApiKeysPage() {
  return (
    <Page title="API keys">
      <p>
        API keys let programs (a shop, a bot, a script) call the panel's API. Each key is shown once when it is made;
        the panel keeps only its hash. Manage them on the panel host:
      </p>
      <pre class="mono">
        {'vpn-panel keys create --name shop --scopes devices:read,devices:write\n'}
        {'vpn-panel keys list\n'}
        {'vpn-panel keys revoke shop'}
      </pre>
      <p class="muted">
        Scopes: devices:read, devices:write, servers:read, servers:write, events:read, webhooks:write, or all.
      </p>
    </Page>
  );
}
