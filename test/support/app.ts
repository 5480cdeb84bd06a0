import createClient from 'openapi-fetch';
import { ADMIN_ACTOR } from '../../src/domain/activity.ts';
import { type Clock, systemClock } from '../../src/domain/clock.ts';
import type { Api } from '../../src/http/api.ts';
import { loadPanelConfig } from '../../src/main/config.ts';
import { assemblePanel, type Panel } from '../../src/main/panel.ts';
import type { PanelMetrics } from '../../src/main/panel-metrics.ts';
import { ApiKeyService } from '../../src/services/api-keys.ts';
import { quietPublisher } from '../../src/services/changes.ts';
import { ConsoleUserService } from '../../src/services/console-users.ts';
import { PasswordHasher } from '../../src/services/passwords.ts';
import type { Store } from '../../src/store/open.ts';
import type { paths } from '../../console/src/api-types.ts';
import type { TestDatabase } from './databases.ts';
import type { ApiClient } from './panel.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * A panel wired as `vpn-panel serve` wires it (src/main/panel.ts: the real services on the test's
 * database, the embedded node on the dry-run driver), answering through `app.inject()`: nothing
 * listens and no worker runs, so a test of the HTTP conventions pays for no process or socket.
 */
export interface AppUnderTest {
  readonly app: Api;
  readonly store: Store;
  /** The panel's metrics as its listener would serve them (nothing listens here); undefined with METRICS_PORT=0. */
  readonly metrics: PanelMetrics | undefined;
  /** An API key made as `vpn-panel keys create` makes it; returns the key. */
  createKey(name: string, scopes: string, options?: { rateLimitExempt?: boolean }): Promise<string>;
  /** A console user made as `vpn-panel users add` makes it. */
  createUser(name: string, role: 'admin' | 'viewer', password: string): Promise<void>;
  /** The typed client of the OpenAPI document, its requests answered in process. */
  client(key?: string): ApiClient;
  /** Every log line the panel wrote (at the LOG_LEVEL of its env; `logged` reads them). */
  output(): string;
  close(): Promise<void>;
}

/**
 * Builds the panel's app on `database` with the env a test adds (the same defaults as `startPanel`), on
 * `clock` when given (the panel's and its rate limiters').
 */
export async function buildTestApp(
  database: TestDatabase,
  env: Record<string, string> = {},
  clock: Clock = systemClock,
): Promise<AppUnderTest> {
  const config = loadPanelConfig({
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    NODE_DRIVER: 'dry-run',
    PUBLIC_HOST: '192.0.2.1',
    ...database.env,
    ...env,
  });
  let output = '';
  const panel: Panel = await assemblePanel(config, { clock, logDestination: { write: (line) => (output += line) } });
  const { app, store, metrics } = panel;
  const fetchInProcess = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const body = request.body === null ? undefined : await request.text();
    const method = METHODS.find((m) => m === request.method);
    if (method === undefined) throw new Error(`no such method in the API: ${request.method}`);
    const answer = await app.inject({
      method,
      url: url.pathname + url.search,
      headers: Object.fromEntries(request.headers),
      payload: body,
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) headers.append(name, String(one));
    }
    const empty = answer.statusCode === 204 || answer.statusCode === 304 || request.method === 'HEAD';
    return new Response(empty ? null : new Uint8Array(answer.rawPayload), { status: answer.statusCode, headers });
  };
  return {
    app,
    store,
    metrics,
    async createKey(name, scopes, options = {}) {
      const keys = new ApiKeyService(store, systemClock, quietPublisher(store.db, systemClock));
      const input = { name, scopes, rateLimitExempt: options.rateLimitExempt ?? false };
      return (await keys.create(input, ADMIN_ACTOR)).key;
    },
    async createUser(name, role, password) {
      const users = new ConsoleUserService(store.db, clock, new PasswordHasher(), quietPublisher(store.db, clock));
      await users.add({ name, role, password }, ADMIN_ACTOR);
    },
    client: (key) =>
      createClient<paths>({
        baseUrl: 'http://panel.test',
        fetch: fetchInProcess,
        headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
      }),
    output: () => output,
    close: () => panel.stop(),
  };
}
