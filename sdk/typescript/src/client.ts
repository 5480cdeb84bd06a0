import type { components, paths } from './schema.ts';
import { Transport, type TransportOptions } from './transport.ts';

type Schemas = components['schemas'];
export type Server = Schemas['Server'];
export type Node = Schemas['Node'];
export type Device = Schemas['Device'];
export type Group = Schemas['Group'];
export type Plan = Schemas['Plan'];
export type UsageReport = Schemas['UsageReport'];
export type FleetUsage = Schemas['FleetUsage'];
export type Webhook = Schemas['Webhook'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type Event = Schemas['Event'];
export type ActivityEntry = Schemas['ActivityEntry'];

/** The document's operations below /api/v1, by their path there (`/devices/{id}`) and method. */
type V1 = { [K in keyof paths as K extends `/api/v1${infer Rest}` ? Rest : never]: paths[K] };
type Method = 'get' | 'post' | 'patch' | 'delete';
type Operation<P extends keyof V1, M extends Method> = NonNullable<V1[P][M]>;
/** The JSON body an operation takes. */
export type Body<P extends keyof V1, M extends Method> =
  Operation<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
/** The query parameters an operation takes, `after` left to the SDK's paging. */
export type Query<P extends keyof V1, M extends Method> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? Omit<NonNullable<Q>, 'after'> : never;
/** The JSON an operation answers with success. */
export type Answer<P extends keyof V1, M extends Method> =
  Operation<P, M> extends { responses: infer R }
    ? {
        [S in keyof R]: S extends 200 | 201
          ? R[S] extends { content: { 'application/json': infer B } }
            ? B
            : never
          : never;
      }[keyof R]
    : never;

const at = (id: number | string): string => encodeURIComponent(String(id));

/**
 * A client of one panel with one API key, one namespace per resource. Lists iterate every page:
 * `for await (const device of panel.devices.list()) …`. A refused request throws ApiError; 429 and 503 are retried
 * after `Retry-After`, and each POST that may be retried carries its own `Idempotency-Key`.
 */
export class VpnPanel {
  readonly #http: Transport;

  constructor(options: TransportOptions) {
    this.#http = new Transport(options);
  }

  readonly servers = {
    list: (query: Query<'/servers', 'get'> = {}) => this.#http.list<Server>('/servers', query),
    get: (id: number) => this.#get<'/servers/{id}'>(`/servers/${at(id)}`),
    create: (body: Body<'/servers', 'post'>) =>
      this.#http.request<Answer<'/servers', 'post'>>('POST', '/servers', { body, idempotent: true }),
    update: (id: number, body: Body<'/servers/{id}', 'patch'>) =>
      this.#http.request<Answer<'/servers/{id}', 'patch'>>('PATCH', `/servers/${at(id)}`, { body }),
    /** `force: true` deletes its devices with it. */
    delete: (id: number, query: Query<'/servers/{id}', 'delete'> = {}) =>
      this.#http.request<void>('DELETE', `/servers/${at(id)}`, { query }),
  };

  readonly nodes = {
    list: () => this.#http.list<Node>('/nodes'),
    get: (id: number) => this.#get<'/nodes/{id}'>(`/nodes/${at(id)}`),
  };

  readonly devices = {
    list: (query: Query<'/devices', 'get'> = {}) => this.#http.list<Device>('/devices', query),
    get: (id: number) => this.#get<'/devices/{id}'>(`/devices/${at(id)}`),
    create: (body: Body<'/devices', 'post'>) =>
      this.#http.request<Answer<'/devices', 'post'>>('POST', '/devices', { body, idempotent: true }),
    update: (id: number, body: Body<'/devices/{id}', 'patch'>) =>
      this.#http.request<Answer<'/devices/{id}', 'patch'>>('PATCH', `/devices/${at(id)}`, { body }),
    delete: (id: number) => this.#http.request<void>('DELETE', `/devices/${at(id)}`),
    usage: (id: number) => this.#get<'/devices/{id}/usage'>(`/devices/${at(id)}/usage`),
    /** The client config (wg-quick text). */
    config: (id: number, query: Query<'/devices/{id}/config', 'get'> = {}) =>
      this.#http.request<string>('GET', `/devices/${at(id)}/config`, { query, as: 'text' }),
    move: (id: number, body: Body<'/devices/{id}/move', 'post'>) => this.#post('/devices/{id}/move', id, body),
    resetUsage: (id: number) => this.#post('/devices/{id}/usage/reset', id, undefined),
    renew: (id: number, body: Body<'/devices/{id}/renew', 'post'>) => this.#post('/devices/{id}/renew', id, body),
    topUp: (id: number, body: Body<'/devices/{id}/top-up', 'post'>) => this.#post('/devices/{id}/top-up', id, body),
  };

  /** Groups are the devices of one `external_id` (a customer); `devices` iterates them. */
  readonly groups = {
    get: (externalId: string) => this.#get<'/groups/{external_id}'>(`/groups/${at(externalId)}`),
    devices: (externalId: string) => this.#http.list<Device>('/devices', { external_id: externalId }),
    update: (externalId: string, body: Body<'/groups/{external_id}', 'patch'>) =>
      this.#http.request<Answer<'/groups/{external_id}', 'patch'>>('PATCH', `/groups/${at(externalId)}`, { body }),
    delete: (externalId: string) => this.#http.request<void>('DELETE', `/groups/${at(externalId)}`),
    resetUsage: (externalId: string) => this.#post('/groups/{external_id}/usage/reset', externalId, undefined),
    renew: (externalId: string, body: Body<'/groups/{external_id}/renew', 'post'>) =>
      this.#post('/groups/{external_id}/renew', externalId, body),
  };

  readonly plans = {
    list: (query: Query<'/plans', 'get'> = {}) => this.#http.list<Plan>('/plans', query),
    get: (id: number) => this.#get<'/plans/{id}'>(`/plans/${at(id)}`),
    create: (body: Body<'/plans', 'post'>) => this.#http.request<Answer<'/plans', 'post'>>('POST', '/plans', { body }),
    update: (id: number, body: Body<'/plans/{id}', 'patch'>) =>
      this.#http.request<Answer<'/plans/{id}', 'patch'>>('PATCH', `/plans/${at(id)}`, { body }),
    delete: (id: number) => this.#http.request<void>('DELETE', `/plans/${at(id)}`),
  };

  /** A device's share link (one at a time): a page that shows its config to whoever has the link. */
  readonly shareLinks = {
    create: (deviceId: number, body: Body<'/devices/{id}/share', 'post'> = {}) =>
      this.#http.request<Answer<'/devices/{id}/share', 'post'>>('POST', `/devices/${at(deviceId)}/share`, { body }),
    get: (deviceId: number) => this.#get<'/devices/{id}/share'>(`/devices/${at(deviceId)}/share`),
    delete: (deviceId: number) => this.#http.request<void>('DELETE', `/devices/${at(deviceId)}/share`),
  };

  readonly webhooks = {
    list: (query: Query<'/webhooks', 'get'> = {}) => this.#http.list<Webhook>('/webhooks', query),
    get: (id: number) => this.#get<'/webhooks/{id}'>(`/webhooks/${at(id)}`),
    /** The answer holds the signing secret, shown only here: keep it for verifyWebhook. */
    create: (body: Body<'/webhooks', 'post'>) =>
      this.#http.request<Answer<'/webhooks', 'post'>>('POST', '/webhooks', { body }),
    update: (id: number, body: Body<'/webhooks/{id}', 'patch'>) =>
      this.#http.request<Answer<'/webhooks/{id}', 'patch'>>('PATCH', `/webhooks/${at(id)}`, { body }),
    delete: (id: number) => this.#http.request<void>('DELETE', `/webhooks/${at(id)}`),
    deliveries: (id: number, query: Query<'/webhooks/{id}/deliveries', 'get'> = {}) =>
      this.#http.list<WebhookDelivery>(`/webhooks/${at(id)}/deliveries`, query),
    ping: (id: number) => this.#http.request<Answer<'/webhooks/{id}/ping', 'post'>>('POST', `/webhooks/${at(id)}/ping`),
  };

  readonly events = {
    list: (query: Query<'/events', 'get'> = {}) => this.#http.list<Event>('/events', query),
  };

  readonly activity = {
    list: (query: Query<'/activity', 'get'> = {}) => this.#http.list<ActivityEntry>('/activity', query),
  };

  readonly usage = {
    /** The whole fleet's usage by day. */
    get: (query: Query<'/usage', 'get'> = {}) =>
      this.#http.request<Answer<'/usage', 'get'>>('GET', '/usage', { query }),
  };

  #get<P extends keyof V1>(path: string): Promise<Answer<P, 'get'>> {
    return this.#http.request<Answer<P, 'get'>>('GET', path);
  }

  /** An action (`POST /devices/{id}/renew`, …): they all honour `Idempotency-Key`. */
  #post<P extends keyof V1>(template: P, id: number | string, body: unknown): Promise<Answer<P, 'post'>> {
    const path = template.replace(/\{[^}]+\}/, at(id));
    return this.#http.request<Answer<P, 'post'>>('POST', path, { body, idempotent: true });
  }
}
