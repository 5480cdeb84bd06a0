/**
 * What each kind of change the panel makes records, named by its intent (as headscale's `change` package
 * does): the events, activity rows and change mails of one change, for `ChangePublisher.commit` to record
 * in the change's transaction and publish after it. The device and server paths (device-changes.ts,
 * devices.ts, servers.ts) build theirs beside their services.
 */
import { consoleUserActor } from '../domain/console-users.ts';
import { type EventKind, SYSTEM_ACTOR } from '../domain/events.ts';
import { webhookName } from '../domain/webhooks.ts';
import type { ApiKeyRow } from '../store/api-keys.ts';
import type { ConsoleUserRow } from '../store/console-users.ts';
import type { DeviceRow } from '../store/devices.ts';
import type { NodeRow } from '../store/nodes.ts';
import type { PlanRow } from '../store/plans.ts';
import type { ServerRow } from '../store/servers.ts';
import type { ShareLinkRow } from '../store/share-links.ts';
import type { WebhookRow } from '../store/webhooks.ts';
import type { ActivityDraft } from './activity.ts';
import { type Change, change } from './changes.ts';
import { deviceEventDraft, eventDraft } from './events.ts';
import type { ConsoleUserPrincipal } from './principals.ts';

/** A device with the server and node it is on: what its events name. */
interface DevicePlace {
  row: DeviceRow;
  server: Pick<ServerRow, 'id' | 'name' | 'country'>;
  node: Pick<NodeRow, 'name'>;
}

/** An API key's change: one activity row and a change mail, both headed `API key NAME <verb>`. */
function apiKeyChange(
  key: ApiKeyRow,
  verb: 'created' | 'revoked',
  entry: Pick<ActivityDraft, 'actor' | 'before' | 'after'>,
  details: string[],
): Change {
  const summary = `API key ${key.name} ${verb}`;
  return change({
    activity: [{ resource: 'api_key', resourceId: key.id, verb, summary, ...entry }],
    mail: [{ headline: summary, details, actor: entry.actor }],
  });
}

export function apiKeyCreated(key: ApiKeyRow, actor: string): Change {
  const limit = key.rate_limit_exempt === 1 ? 'no rate limit' : 'rate limited';
  const details = [`Scopes: ${key.scopes.split(',').join(', ')}; ${limit}.`];
  return apiKeyChange(key, 'created', { actor, before: null, after: key }, details);
}

export function apiKeyRevoked(key: ApiKeyRow, actor: string): Change {
  const entry = { actor, before: { ...key, revoked_at: null }, after: key };
  return apiKeyChange(key, 'revoked', entry, ['Requests with it are refused from now on.']);
}

/** A console user's change: one activity row and, unless `mail` is undefined, a change mail. */
function consoleUserChange(
  user: Pick<ConsoleUserRow, 'id'>,
  entry: { verb: string; summary: string; actor: string; before: ConsoleUserRow | null; after: ConsoleUserRow | null },
  mail?: { headline: string; details: string[] },
): Change {
  const { verb, summary, actor, before, after } = entry;
  return change({
    activity: [{ resource: 'console_user', resourceId: user.id, verb, summary, actor, before, after }],
    mail: mail === undefined ? [] : [{ ...mail, actor }],
  });
}

export function consoleUserAdded(user: ConsoleUserRow, actor: string): Change {
  const summary = `console user ${user.name} (${user.role}) created`;
  return consoleUserChange(
    user,
    { verb: 'created', summary, actor, before: null, after: user },
    { headline: `Console user ${user.name} created`, details: [`Role: ${user.role}.`] },
  );
}

/** A new password; `sessionsEnded` of the user's sessions ended with it. */
export function consoleUserPasswordChanged(
  before: ConsoleUserRow,
  after: ConsoleUserRow,
  sessionsEnded: number,
  actor: string,
): Change {
  const summary = `console user ${before.name}: password changed, ${sessionsEnded} session(s) ended`;
  return consoleUserChange(
    before,
    { verb: 'password_changed', summary, actor, before, after },
    { headline: `Password of console user ${before.name} changed`, details: [`Sessions ended: ${sessionsEnded}.`] },
  );
}

export function consoleUserRoleChanged(before: ConsoleUserRow, after: ConsoleUserRow, actor: string): Change {
  const roles = `${before.role} -> ${after.role}`;
  return consoleUserChange(
    before,
    { verb: 'role_changed', summary: `console user ${before.name}: role ${roles}`, actor, before, after },
    { headline: `Role of console user ${before.name} changed`, details: [`Role: ${roles}.`] },
  );
}

/** A user removed; `sessionsEnded` of their sessions ended with it. */
export function consoleUserRemoved(user: ConsoleUserRow, sessionsEnded: number, actor: string): Change {
  const summary = `console user ${user.name} removed, ${sessionsEnded} session(s) ended`;
  return consoleUserChange(
    user,
    { verb: 'deleted', summary, actor, before: user, after: null },
    { headline: `Console user ${user.name} removed`, details: [`Sessions ended: ${sessionsEnded}.`] },
  );
}

/** A session made for the user (`after`: the row with its new last sign-in); no mail. */
export function consoleUserSignedIn(before: ConsoleUserRow, after: ConsoleUserRow): Change {
  const actor = consoleUserActor(before.name);
  const summary = `console user ${before.name} signed in`;
  return consoleUserChange(before, { verb: 'signed_in', summary, actor, before, after });
}

/** The principal's session ended by its user; no mail. */
export function consoleUserSignedOut(principal: Pick<ConsoleUserPrincipal, 'userId' | 'name' | 'actor'>): Change {
  const summary = `console user ${principal.name} signed out`;
  const entry = { verb: 'signed_out', summary, actor: principal.actor, before: null, after: null };
  return consoleUserChange({ id: principal.userId }, entry);
}

/** A webhook's change: one activity row (webhooks are not mailed). */
function webhookChange(
  webhook: Pick<WebhookRow, 'id' | 'url'>,
  verb: string,
  summary: string,
  entry: { actor: string; before: WebhookRow | null; after: WebhookRow | null },
): Change {
  const name = webhookName(webhook.id, webhook.url);
  return change({
    activity: [{ resource: 'webhook', resourceId: webhook.id, verb, summary: `${name} ${summary}`, ...entry }],
  });
}

export function webhookCreated(webhook: WebhookRow, actor: string): Change {
  return webhookChange(webhook, 'created', 'created', { actor, before: null, after: webhook });
}

export function webhookUpdated(before: WebhookRow, after: WebhookRow, actor: string): Change {
  return webhookChange(after, 'updated', 'updated', { actor, before, after });
}

export function webhookDeleted(webhook: WebhookRow, actor: string): Change {
  return webhookChange(webhook, 'deleted', 'deleted', { actor, before: webhook, after: null });
}

/** Turned off by the panel after its receiver answered 410 Gone. */
export function webhookDisabled(before: WebhookRow, after: WebhookRow | undefined): Change {
  const summary = 'turned off: its receiver answered 410 Gone';
  return webhookChange(before, 'disabled', summary, { actor: SYSTEM_ACTOR, before, after: after ?? null });
}

/** The `ping` event of POST /webhooks/{id}/ping; its one delivery, to that webhook alone, is its caller's. */
export function webhookPinged(webhookId: number, actor: string): Change {
  const ping = eventDraft({ kind: 'ping', detail: `ping to webhook ${webhookId}`, actor: actor || SYSTEM_ACTOR });
  return change({ events: [ping] });
}

/** A plan's change: one activity row (plans are not mailed: they change no device). */
function planChange(
  plan: PlanRow,
  verb: string,
  entry: { actor: string; before: PlanRow | null; after: PlanRow | null },
): Change {
  const summary = `plan ${plan.name} ${verb}`;
  return change({ activity: [{ resource: 'plan', resourceId: plan.id, verb, summary, ...entry }] });
}

export function planCreated(plan: PlanRow, actor: string): Change {
  return planChange(plan, 'created', { actor, before: null, after: plan });
}

export function planUpdated(before: PlanRow, after: PlanRow, actor: string): Change {
  return planChange(after, 'updated', { actor, before, after });
}

export function planDeleted(plan: PlanRow, actor: string): Change {
  return planChange(plan, 'deleted', { actor, before: plan, after: null });
}

/** A node's change: one activity row (its events, if any, given apart). */
function nodeChange(
  node: Pick<NodeRow, 'id'>,
  verb: string,
  summary: string,
  entry: Pick<ActivityDraft, 'actor' | 'before' | 'after'>,
  events: Change['events'] = [],
): Change {
  return change({ events, activity: [{ resource: 'node', resourceId: node.id, verb, summary, ...entry }] });
}

export function nodeAdded(node: NodeRow, actor: string): Change {
  const summary = `node ${node.name} added${node.url === null ? ' (the local node)' : ''}`;
  return nodeChange(node, 'added', summary, { actor, before: null, after: node });
}

export function nodeRemoved(node: NodeRow, actor: string): Change {
  return nodeChange(node, 'removed', `node ${node.name} removed`, { actor, before: node, after: null });
}

/** The local node's public host follows PUBLIC_HOST at start. */
export function localNodeHostChanged(before: NodeRow, after: NodeRow): Change {
  const summary = `local node now reached at ${after.public_host} (PUBLIC_HOST)`;
  return nodeChange(before, 'updated', summary, { actor: SYSTEM_ACTOR, before, after });
}

export function nodeWentOnline(node: Pick<NodeRow, 'id' | 'name'>): Change {
  const detail = `node ${node.name} is online`;
  const online = eventDraft({ kind: 'node.online', node_name: node.name, detail, actor: SYSTEM_ACTOR });
  const entry = { actor: SYSTEM_ACTOR, before: { status: 'offline' }, after: { status: 'online' } };
  return nodeChange(node, 'online', detail, entry, [online]);
}

/** `reason` goes into the event only: it may name the pin, which `GET /nodes` hides (and so the activity log). */
export function nodeWentOffline(node: Pick<NodeRow, 'id' | 'name'>, reason: string): Change {
  const detail = `node ${node.name} is offline: ${reason}`;
  const offline = eventDraft({ kind: 'node.offline', node_name: node.name, detail, actor: SYSTEM_ACTOR });
  const entry = { actor: SYSTEM_ACTOR, before: { status: 'online' }, after: { status: 'offline' } };
  return nodeChange(node, 'offline', `node ${node.name} is offline`, entry, [offline]);
}

/** A change of one device: its event (worded `detail`) and its activity row, whose verb is the event's. */
function deviceChange(
  { row, server, node }: DevicePlace,
  kind: EventKind,
  detail: string,
  entry: Pick<ActivityDraft, 'summary' | 'actor' | 'before' | 'after'>,
): Change {
  return change({
    events: [deviceEventDraft(kind, row, server, node, entry.actor, detail)],
    activity: [{ resource: 'device', resourceId: row.id, verb: kind.slice('device.'.length), ...entry }],
  });
}

/** A device's expiry (`dueAt`) passed: posted once per expiry by the expiry watch. */
export function deviceExpired(device: DevicePlace, dueAt: string): Change {
  const detail = `device ${device.row.name} expired at ${dueAt}`;
  const entry = { summary: detail, actor: SYSTEM_ACTOR, before: { status: 'active' }, after: { status: 'expired' } };
  return deviceChange(device, 'device.expired', detail, entry);
}

/** A reminder `windowMs` before the device's expiry (docs/api.md "Reminders"); no activity row: nothing changed. */
export function deviceExpiring(device: DevicePlace, windowMs: number): Change {
  const hours = Math.round(windowMs / 3_600_000);
  const detail = `device ${device.row.name} expires at ${device.row.expires_at} (reminder ${hours} h before)`;
  return change({
    events: [deviceEventDraft('device.expiring', device.row, device.server, device.node, SYSTEM_ACTOR, detail)],
  });
}

/** A device marked over its data limit (`row` as marked), having used `usedBytes` this period. */
export function deviceLimitReached(device: DevicePlace, usedBytes: number, actor: string): Change {
  const { row } = device;
  const detail = `device ${row.name} used ${usedBytes} of its ${row.data_limit} bytes`;
  const after = { limit_reached_at: row.limit_reached_at };
  const entry = { summary: detail, actor, before: { limit_reached_at: null }, after };
  return deviceChange(device, 'device.limit_reached', detail, entry);
}

/** A device's share link as the activity log shows it: never the token, which is the whole secret. */
function shareFields(
  link: ShareLinkRow | undefined,
): { share_link: { created_at: string; expires_at: string | null } } | null {
  return link ? { share_link: { created_at: link.created_at, expires_at: link.expires_at } } : null;
}

/** A new share link for the device, `replaced` the one it had. */
export function shareLinkCreated(
  device: DevicePlace,
  link: ShareLinkRow,
  replaced: ShareLinkRow | undefined,
  actor: string,
): Change {
  const name = device.row.name;
  const summary = `share link for device ${name} ${replaced ? 'replaced' : 'created'}`;
  const entry = { summary, actor, before: shareFields(replaced), after: shareFields(link) };
  return deviceChange(device, 'device.share_created', `share link for device ${name} created`, entry);
}

export function shareLinkDeleted(device: DevicePlace, link: ShareLinkRow, actor: string): Change {
  const detail = `share link for device ${device.row.name} deleted`;
  const entry = { summary: detail, actor, before: shareFields(link), after: null };
  return deviceChange(device, 'device.share_deleted', detail, entry);
}

/** What the drift repair did to one server of a node: `server` names it, `done` says what was done. */
export interface DriftRepairDone {
  node: Pick<NodeRow, 'name'>;
  serverId: number;
  server: string;
  done: string;
  differences: readonly string[];
}

export function driftRepaired({ node, serverId, server, done, differences }: DriftRepairDone): Change {
  const why = differences.join('; ');
  return change({
    activity: [
      {
        resource: 'server',
        resourceId: serverId,
        verb: 'drift_repaired',
        summary: `${server} on node ${node.name} differed from the database and was ${done}: ${why}`,
        actor: SYSTEM_ACTOR,
        before: { drift: differences },
        after: { drift: [] },
      },
    ],
  });
}
