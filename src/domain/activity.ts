import { apiKeyActor } from './api-keys.ts';
import { CONSOLE_ADMIN, consoleUserActor, type Requirement } from './console-users.ts';
import { SYSTEM_ACTOR } from './events.ts';
import { webhookUrlShown } from './webhooks.ts';

/** What the activity log records changes to. Groups are not stored: a group change is recorded per device. */
export const ACTIVITY_RESOURCES = ['device', 'server', 'webhook', 'node', 'api_key', 'console_user', 'plan'] as const;
export type ActivityResource = (typeof ACTIVITY_RESOURCES)[number];

export function isActivityResource(value: string): value is ActivityResource {
  return (ACTIVITY_RESOURCES as readonly string[]).includes(value);
}

/**
 * What reading a resource's entries takes: what reading the resource itself takes (its routes), so the log
 * shows a caller nothing those routes hide. Webhooks take `webhooks:write` as their routes do (their URLs);
 * API keys and console users an admin's console session; plans `devices:read`, as their GET routes do.
 */
const READ_REQUIREMENT: Record<ActivityResource, Requirement> = {
  device: 'devices:read',
  server: 'servers:read',
  node: 'servers:read',
  webhook: 'webhooks:write',
  api_key: CONSOLE_ADMIN,
  console_user: CONSOLE_ADMIN,
  plan: 'devices:read',
};

/** What reading the entries about `resource` takes. */
export function readRequirement(resource: ActivityResource): Requirement {
  return READ_REQUIREMENT[resource];
}

/** The resources whose entries a caller who meets what `meets` says may read. */
export function readableResources(meets: (requirement: Requirement) => boolean): ActivityResource[] {
  return ACTIVITY_RESOURCES.filter((resource) => meets(READ_REQUIREMENT[resource]));
}

/** The actor of changes made with the CLI on the panel's machine (docs/decisions.md "Actors"). */
export const ADMIN_ACTOR = 'admin';

/** Field values as the log keeps them: JSON values. */
export type FieldValues = Record<string, unknown>;

/**
 * One change as the activity log shows it. `before`/`after` hold the fields that changed (all of them
 * on create and delete).
 */
export interface ActivityEntry {
  id: number;
  created_at: string;
  actor: string;
  /** The `X-Request-Id` of the API request that made the change; null for the CLI and the panel's own changes. */
  request_id: string | null;
  /** `<resource>.<verb>`, e.g. `device.updated`, `api_key.revoked`. */
  action: string;
  resource: ActivityResource;
  resource_id: string;
  summary: string;
  before: FieldValues | null;
  after: FieldValues | null;
}

/**
 * Never written to the log: keys and secrets (device and server private keys, webhook secrets, API
 * key hashes, node tokens, share link tokens, console password and session token hashes), and bookkeeping
 * the entry's own time already says.
 */
const LEFT_OUT = new Set([
  'private_key',
  'secret',
  'key_hash',
  'token',
  'password_hash',
  'token_hash',
  'created_at',
  'updated_at',
]);
/**
 * Never written for one kind of resource: what its routes hide from every reader of its entries (a node's
 * agent URL, certificate pin and last error, which name internal addresses; `GET /nodes` shows none).
 */
const LEFT_OUT_OF: Partial<Record<ActivityResource, ReadonlySet<string>>> = {
  node: new Set(['url', 'cert_sha256', 'last_error']),
};

function leftOut(resource: ActivityResource, field: string): boolean {
  return LEFT_OUT.has(field) || (LEFT_OUT_OF[resource]?.has(field) ?? false);
}

/** Stored as 0/1, shown as the API shows them. */
const BOOLEAN_FIELDS = new Set(['enabled', 'dns_on_server', 'client_to_client', 'rate_limit_exempt']);
/** Stored as JSON text (metadata, server lists, webhook subscriptions), shown as JSON. */
const JSON_FIELDS = new Set(['metadata', 'dns', 'client_allowed_ips', 'events']);

function shown(field: string, value: unknown): unknown {
  if (BOOLEAN_FIELDS.has(field) && (value === 0 || value === 1)) return value === 1;
  if (JSON_FIELDS.has(field) && typeof value === 'string') {
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
  return value;
}

/** A shown value as the log writes it: a webhook's URL cut to its origin (webhookUrlShown). */
function cut(resource: ActivityResource, field: string, value: unknown): unknown {
  return resource === 'webhook' && field === 'url' && typeof value === 'string' ? webhookUrlShown(value) : value;
}

function visible(resource: ActivityResource, fields: FieldValues): FieldValues {
  return Object.fromEntries(
    Object.entries(fields)
      .filter(([k, v]) => !leftOut(resource, k) && v !== undefined)
      .map(([k, v]) => [k, cut(resource, k, shown(k, v))]),
  );
}

/**
 * The fields a change of `resource` touched, without secrets: everything on create (`before` null) and
 * delete (`after` null), only the fields whose values differ on an update. A field written shortened (a
 * webhook's URL) is kept when its whole value changed, though both sides may then read the same.
 */
export function fieldChanges(
  resource: ActivityResource,
  before: FieldValues | null,
  after: FieldValues | null,
): { before: FieldValues | null; after: FieldValues | null } {
  if (before === null || after === null)
    return { before: before && visible(resource, before), after: after && visible(resource, after) };
  // A group change diffs thousands of whole rows: only fields whose stored values differ are shown and compared.
  const was: FieldValues = {};
  const now: FieldValues = {};
  const diff = (k: string) => {
    const a = before[k];
    const b = after[k];
    if (a === b || leftOut(resource, k)) return;
    const shownA = a === undefined ? null : shown(k, a);
    const shownB = b === undefined ? null : shown(k, b);
    if (shownA === shownB || JSON.stringify(shownA) === JSON.stringify(shownB)) return;
    was[k] = cut(resource, k, shownA);
    now[k] = cut(resource, k, shownB);
  };
  for (const k of Object.keys(before)) diff(k);
  for (const k of Object.keys(after)) if (!(k in before)) diff(k);
  return { before: was, after: now };
}

/**
 * Activity entries are kept this long, then pruned (docs/api.md "Activity log"): an audit trail outlives the
 * 90 days of events.
 */
export const ACTIVITY_RETENTION_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * `--actor` as a person types it: `admin`, `system`, `via API key NAME`, `via console user NAME`, or just
 * an API key's NAME.
 */
export function actorFilter(text: string): string {
  const actor = text.trim();
  if (actor === ADMIN_ACTOR || actor === SYSTEM_ACTOR) return actor;
  if (actor.startsWith(apiKeyActor('')) || actor.startsWith(consoleUserActor(''))) return actor;
  return apiKeyActor(actor);
}
