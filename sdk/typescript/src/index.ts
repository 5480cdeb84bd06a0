export type {
  ActivityEntry,
  Answer,
  Body,
  Device,
  Event,
  FleetUsage,
  Group,
  Node,
  Plan,
  Query,
  Server,
  UsageReport,
  Webhook,
  WebhookDelivery,
} from './client.ts';
export { VpnPanel } from './client.ts';
export type { components, paths } from './schema.ts';
export { ApiError, type TransportOptions as VpnPanelOptions } from './transport.ts';
export { verifyWebhook, WebhookVerificationError } from './webhooks.ts';
