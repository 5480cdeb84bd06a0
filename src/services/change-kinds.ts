/**
 * What each kind of change the panel makes records, named by its intent (as headscale's `change` package
 * does): the events, activity rows and change mails of one change, for `ChangePublisher.commit` to record
 * in the change's transaction and publish after it. The device and server paths build theirs beside their
 * services (src/services/device-changes.ts, devices.ts, servers.ts, usage.ts's limit marks use these).
 */
import { consoleUserActor } from '../domain/console-users.ts';
import { SYSTEM_ACTOR } from '../domain/events.ts';
import { webhookName } from '../domain/webhooks.ts';
import type { ApiKeyRow } from '../store/api-keys.ts';
import type { ConsoleUserRow } from '../store/console-users.ts';
import type { DeviceRow } from '../store/devices.ts';
import type { NodeRow } from '../store/nodes.ts';
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

export function apiKeyCreated(key: ApiKeyRow, actor: string): Change {
  const limit = key.rate_limit_exempt === 1 ? 'no rate limit' : 'rate limited';
  return change({
    activity: [
      {
        resource: 'api_key',
        resourceId: key.id,
        verb: 'created',
        summary: `API key ${key.name} created`,
        actor,
        before: null,
        after: key,
      },
    ],
    mail: [
      {
        headline: `API key ${key.name} created`,
        details: [`Scopes: ${key.scopes.split(',').join(', ')}; ${limit}.`],
        actor,
      },
    ],
  });
}

export function apiKeyRevoked(key: ApiKeyRow, actor: string): Change {
  return change({
    activity: [
      {
        resource: 'api_key',
        resourceId: key.id,
        verb: 'revoked',
        summary: `API key ${key.name} revoked`,
        actor,
        before: { ...key, revoked_at: null },
        after: key,
      },
    ],
    mail: [{ headline: `API key ${key.name} revoked`, details: ['Requests with it are refused from now on.'], actor }],
  });
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

/** A device's expiry (`dueAt`) passed: posted once per expiry by the expiry watch. */
export function deviceExpired({ row, server, node }: DevicePlace, dueAt: string): Change {
  const detail = `device ${row.name} expired at ${dueAt}`;
  return change({
    events: [deviceEventDraft('device.expired', row, server, node, SYSTEM_ACTOR, detail)],
    activity: [
      {
        resource: 'device',
        resourceId: row.id,
        verb: 'expired',
        summary: detail,
        actor: SYSTEM_ACTOR,
        before: { status: 'active' },
        after: { status: 'expired' },
      },
    ],
  });
}

/** A device marked over its data limit (`row` as marked), having used `usedBytes` this period. */
export function deviceLimitReached({ row, server, node }: DevicePlace, usedBytes: number, actor: string): Change {
  const detail = `device ${row.name} used ${usedBytes} of its ${row.data_limit} bytes`;
  return change({
    events: [deviceEventDraft('device.limit_reached', row, server, node, actor, detail)],
    activity: [
      {
        resource: 'device',
        resourceId: row.id,
        verb: 'limit_reached',
        summary: detail,
        actor,
        before: { limit_reached_at: null },
        after: { limit_reached_at: row.limit_reached_at },
      },
    ],
  });
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
  const { row, server, node } = device;
  const detail = `share link for device ${row.name} created`;
  return change({
    events: [deviceEventDraft('device.share_created', row, server, node, actor, detail)],
    activity: [
      {
        resource: 'device',
        resourceId: row.id,
        verb: 'share_created',
        summary: `share link for device ${row.name} ${replaced ? 'replaced' : 'created'}`,
        actor,
        before: shareFields(replaced),
        after: shareFields(link),
      },
    ],
  });
}

export function shareLinkDeleted(device: DevicePlace, link: ShareLinkRow, actor: string): Change {
  const { row, server, node } = device;
  const detail = `share link for device ${row.name} deleted`;
  return change({
    events: [deviceEventDraft('device.share_deleted', row, server, node, actor, detail)],
    activity: [
      {
        resource: 'device',
        resourceId: row.id,
        verb: 'share_deleted',
        summary: detail,
        actor,
        before: shareFields(link),
        after: null,
      },
    ],
  });
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
