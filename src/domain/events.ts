/** Event kinds of docs/decisions.md "Event kinds". */
export const EVENT_KINDS = [
  'device.created',
  'device.updated',
  'device.deleted',
  'device.enabled',
  'device.disabled',
  'device.moved',
  'device.usage_reset',
  'device.renewed',
  'device.topped_up',
  'device.limit_reached',
  'device.usage_threshold',
  'device.expired',
  'device.expiring',
  'device.share_created',
  'device.share_deleted',
  'server.created',
  'server.updated',
  'server.obfuscation_changed',
  'server.deleted',
  'node.online',
  'node.offline',
  'ping',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** A regular expression source matching exactly one of `kinds` (for the schemas that list them). */
export function oneOfKinds(kinds: readonly string[]): string {
  return `(?:${kinds.map((kind) => kind.replaceAll('.', '\\.')).join('|')})`;
}

export function isEventKind(value: string): value is EventKind {
  return (EVENT_KINDS as readonly string[]).includes(value);
}

/** An event as docs/api.md "Events" shows it; fields that do not apply are null. */
export interface PanelEvent {
  id: number;
  kind: EventKind;
  created_at: string;
  server_id: number | null;
  server_name: string | null;
  device_id: number | null;
  device_name: string | null;
  node_name: string | null;
  ip: string | null;
  country: string | null;
  detail: string;
  actor: string;
}

export type EventDraft = Omit<PanelEvent, 'id' | 'created_at'>;

/** The actor of changes the panel makes by itself (heartbeats, enforcement). */
export const SYSTEM_ACTOR = 'system';

/** docs/api.md "Events": events are kept 90 days. */
export const EVENT_RETENTION_MS = 90 * 24 * 60 * 60 * 1000;
