/**
 * The live panel the SDKs' tests (test/sdk) run against: started as the README starts it (dry-run node), with
 * webhooks allowed to this host's receivers, and two keys of every scope: one exempt from the rate limit (for
 * setting up) and one under it (10 a second, bursts of 60) for the retries.
 */
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { type PanelProcess, startPanel } from './panel.ts';

export interface SdkPanel {
  readonly panel: PanelProcess;
  /** The API's base URL, `http://127.0.0.1:PORT/api/v1`, as an SDK takes it. */
  readonly baseUrl: string;
  /** Every scope, exempt from the rate limit. */
  readonly key: string;
  /** Every scope, under the rate limit. */
  readonly limitedKey: string;
  /** The environment an SDK's test process is given: VPN_PANEL_URL, VPN_PANEL_KEY, VPN_PANEL_LIMITED_KEY. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startSdkPanel(): Promise<SdkPanel> {
  const database: TestDatabase = await createTestDatabase('sqlite');
  const panel = await startPanel({ database, env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
  const key = await panel.createKey('sdk-setup', 'all', ['--no-rate-limit']);
  const limitedKey = await panel.createKey('sdk-limited', 'all');
  const baseUrl = `${panel.url}/api/v1`;
  return {
    panel,
    baseUrl,
    key,
    limitedKey,
    env: { VPN_PANEL_URL: baseUrl, VPN_PANEL_KEY: key, VPN_PANEL_LIMITED_KEY: limitedKey },
    async stop() {
      await panel.stop();
      await database.drop();
    },
  };
}
