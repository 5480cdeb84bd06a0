import type { Generated } from 'kysely';
import type { ServerProtocol } from '../domain/protocols.ts';
import type { Ipv6Status } from '../domain/servers.ts';
import type { ExpiryStarts, QuotaAction } from '../domain/plans.ts';
import type { LimitPeriod } from '../domain/devices.ts';

/**
 * Table shapes as both databases hold them. Times are ISO-8601 UTC text (they sort as they compare),
 * booleans are integers 0/1, JSON is text: the same values on SQLite and PostgreSQL.
 */
export interface ApiKeyTable {
  id: Generated<number>;
  name: string;
  key_hash: string;
  /** Comma-separated scopes of docs/api.md "Keys and scopes". */
  scopes: string;
  /** 1 exempts the key from the request rate limit (benchmarks, trusted internal callers). */
  rate_limit_exempt: number;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** A key's owner is its API key or its console user: exactly one of the two is set (migration 030). */
export interface IdempotencyKeyTable {
  id: Generated<number>;
  api_key_id: number | null;
  console_user_id: number | null;
  idempotency_key: string;
  /** SHA-256 of method, route, path parameters and body: the same key with another request is refused. */
  fingerprint: string;
  state: 'running' | 'done';
  status_code: number | null;
  response_body: string | null;
  created_at: string;
}

export interface NodeTable {
  id: Generated<number>;
  name: string;
  /** The agent's base URL; null for the panel's embedded local node. */
  url: string | null;
  /** The agent's token; null for the local node. */
  token: string | null;
  /** The agent's certificate's SHA-256 (64 upper-case hex digits), trusted instead of a CA; null: not pinned. */
  cert_sha256: string | null;
  /** Host name or address clients use to reach the node's servers. */
  public_host: string;
  status: 'online' | 'offline';
  /** Why the last heartbeat failed, with the URL (for `nodes list`, never the API); null once it answers. */
  last_error: string | null;
  driver: string | null;
  /** JSON array of the protocols the node reported it runs (ServerProtocol); null until it reports: WireGuard only. */
  protocols: string | null;
  version: string | null;
  last_seen_at: string | null;
  created_at: string;
}

export interface ServerTable {
  id: Generated<number>;
  node_id: number;
  name: string;
  country: string;
  city: string;
  /** `deploying` between the row's insert and the node's answer; node_offline is derived, never stored. */
  status: 'deploying' | 'running' | 'error';
  endpoint: string;
  listen_port: number;
  private_key: string;
  public_key: string;
  /** The server's own address with the subnet's prefix, e.g. 10.128.0.1/24. */
  address: string;
  subnet: string;
  /**
   * The server's IPv6 address with its subnet6's prefix, e.g. fd3a:1b2c:4d5e:1::1/64 (RFC 5952 text); null: the
   * server has no IPv6 (only rows written without it, such as tests' fixtures: migration 017 gave every server one).
   */
  address6: string | null;
  subnet6: string | null;
  /** What the node reported it does with the server's IPv6 (ServerState.ipv6); `off` until it reports. */
  ipv6: Generated<Ipv6Status>;
  /** `wireguard` or `amneziawg` (ServerProtocol), fixed at creation; the column defaults to wireguard. */
  protocol: Generated<ServerProtocol>;
  /** JSON of the AmneziaWG parameters (Obfuscation); null for WireGuard. */
  obfuscation: string | null;
  /** JSON array of strings. */
  dns: string;
  dns_on_server: number;
  /** 1: clients of the server may reach each other; the column defaults to 0. */
  client_to_client: Generated<number>;
  mtu: number;
  persistent_keepalive: number;
  /** JSON array of strings. */
  client_allowed_ips: string;
  capacity: number;
  /** How many devices the server holds, kept by every insert, move and delete of a device (migration 018). */
  device_count: Generated<number>;
  created_at: string;
  updated_at: string;
}

export interface EventTable {
  id: Generated<number>;
  kind: string;
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

export interface DeviceTable {
  id: Generated<number>;
  server_id: number;
  name: string;
  external_id: string | null;
  /** JSON object text, exactly as given. */
  metadata: string | null;
  /** The device's IPv4 address on its server's subnet, without prefix. */
  address: string;
  /** The device's IPv6 address on its server's subnet6, without prefix (RFC 5952 text); null: its server has none. */
  address6: string | null;
  public_key: string;
  /** Null when the client made its own key pair. */
  private_key: string | null;
  enabled: number;
  data_limit: number;
  limit_period: 'monthly' | 'total';
  usage_reset_at: string;
  expires_at: string | null;
  speed_limit: number;
  last_handshake: string | null;
  created_at: string;
  updated_at: string;
  /** The plan the device was made from or last renewed with; null: none, or the plan was deleted. */
  plan_id: Generated<number | null>;
  quota_action: Generated<QuotaAction>;
  /** kbit/s each way at the data limit; set exactly when quota_action is `throttle`. */
  throttle_speed: Generated<number | null>;
  /** Days from the first handshake to expires_at, while the device waits for it (expiry_starts first_handshake). */
  handshake_expiry_days: Generated<number | null>;
  /** Bytes added to the allowance by top-ups in `top_up_month` (monthly) or since the last reset (total). */
  top_up_bytes: Generated<number>;
  /** `YYYY-MM` (panel time zone) of the last top-up; '' before any. */
  top_up_month: Generated<string>;
  /** The expires_at the last device.expiring was about, and its window (ms before it); null before any. */
  reminded_expiry: Generated<string | null>;
  reminded_window_ms: Generated<number | null>;
  /** The highest USAGE_THRESHOLDS percent posted in the period `threshold_period` (periodKey); 0 before any. */
  threshold_notified: Generated<number>;
  threshold_period: Generated<string>;
  month_rx: Generated<number>;
  month_tx: Generated<number>;
  period_rx: Generated<number>;
  period_tx: Generated<number>;
  /** `YYYY-MM` (panel time zone) the month and, for `monthly`, the period counts belong to; '' before any. */
  usage_month: Generated<string>;
  meter_journal: Generated<string>;
  meter: Generated<number>;
  /** `YYYY-MM-DD` (panel time zone) whose bytes day_rx/day_tx hold, '' before any; usage_daily has the days before. */
  usage_day: Generated<string>;
  day_rx: Generated<number>;
  day_tx: Generated<number>;
  /** A day the row's usage moved out of, on its way into usage_daily within one transaction: '' between them. */
  rolled_day: Generated<string>;
  rolled_rx: Generated<number>;
  rolled_tx: Generated<number>;
  limit_reached_at: string | null;
  expiry_due_at: string | null;
}

/** Usage of a device in one day (`start` YYYY-MM-DD) or month (`start` YYYY-MM-01) of the panel's time zone. */
export interface UsageBucketTable {
  device_id: number;
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

/** The whole fleet's bytes of one day or month (migration 019). */
export interface FleetUsageTable {
  start: string;
  rx_bytes: number;
  tx_bytes: number;
}

export interface UsageBatchTable {
  node_id: number;
  journal_id: string;
  seq: number;
  stored_at: string;
}

export interface ShareLinkTable {
  device_id: number;
  /** SHA-256 (hex) of the token: the public page finds its link by this alone. */
  token_hash: string;
  /**
   * The token (256 random bits, base64url, the whole secret of the public page), sealed with the
   * panel secret (ENCRYPTED_COLUMNS) only so `GET /devices/{id}/share` can show the link's URL again.
   */
  token: string;
  expires_at: string | null;
  created_at: string;
}

/** A plan (issue 26): the values a device made from it takes (docs/api.md "Plans"). */
export interface PlanTable {
  id: Generated<number>;
  name: string;
  data_limit: number;
  limit_period: LimitPeriod;
  speed_limit: number;
  /** Days a device's expiry lies after its start; null: devices from the plan never expire. */
  duration_days: number | null;
  /** Devices per external_id group; null: no cap. */
  max_devices: number | null;
  quota_action: QuotaAction;
  /** kbit/s each way at the data limit; set exactly when quota_action is `throttle`. */
  throttle_speed: number | null;
  expiry_starts: ExpiryStarts;
  created_at: string;
  updated_at: string;
}

export interface WebhookTable {
  id: Generated<number>;
  url: string;
  /** JSON array of event kinds. */
  events: string;
  description: string;
  enabled: number;
  /** `whsec_` + base64 key, as the Standard Webhooks libraries take it. */
  secret: string;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface WebhookDeliveryTable {
  id: Generated<number>;
  webhook_id: number;
  event_id: number;
  kind: string;
  /** The device the event is about (null: about none): a webhook gets a device's deliveries in event order. */
  device_id: number | null;
  /** The event (docs/api.md "Events") as JSON: the request body of every attempt. */
  payload: string;
  /** `webhook-id` header: the same on every attempt, so receivers de-duplicate on it. */
  message_id: string;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  response_status: number | null;
  error: string | null;
  duration_ms: number | null;
  /** A sender holds the delivery until then; another sender (or after a crash) takes it after. */
  locked_until: string | null;
  created_at: string;
}

export interface ActivityTable {
  id: Generated<number>;
  created_at: string;
  actor: string;
  request_id: string | null;
  action: string;
  resource: string;
  /** Text, as ids of every resource fit in it. */
  resource_id: string;
  summary: string;
  /** JSON object of the fields before the change (null on create), secrets left out. */
  before: string | null;
  /** JSON object of the fields after the change (null on delete), secrets left out. */
  after: string | null;
}

export type MailState = 'pending' | 'sent' | 'failed';

export interface MailOutboxTable {
  id: Generated<number>;
  /** `change` for one change, `device_digest` for a summary of devices at their limit or expired. */
  topic: 'change' | 'device_digest';
  subject: string;
  text_body: string;
  html_body: string;
  state: MailState;
  attempts: number;
  next_attempt_at: string | null;
  /** A sender holds the mail until then; another sender (or after a crash) takes it after. */
  locked_until: string | null;
  last_error: string | null;
  created_at: string;
  sent_at: string | null;
}

export interface MailNoticeTable {
  id: Generated<number>;
  kind: string;
  /** One line of the digest mail, naming the device and who or what made the change. */
  line: string;
  created_at: string;
}

export interface MailDigestTable {
  id: number;
  last_made_at: string | null;
}

export interface PanelSettingTable {
  key: string;
  value: string;
}

/** A duty one panel runs at a time (src/store/leases.ts): its holder until `expires_at`, on the database's clock. */
export interface DutyLeaseTable {
  name: string;
  /** `host/pid/random` of the panel process that holds it. */
  holder: string;
  expires_at: string;
}

/** A person who signs in to the console (`vpn-panel users add`). */
export interface ConsoleUserTable {
  id: Generated<number>;
  /** Unique whatever its case (index on lower(name)); shown as given. */
  name: string;
  role: 'admin' | 'viewer';
  /** `scrypt$N=…,r=…,p=…$<salt>$<key>` (src/domain/passwords.ts): the parameters travel with the hash. */
  password_hash: string;
  created_at: string;
  updated_at: string;
  last_sign_in_at: string | null;
}

/** A signed-in console session; every panel sharing the database honours it. */
export interface ConsoleSessionTable {
  id: Generated<number>;
  user_id: number;
  /** SHA-256 (hex) of the cookie's token: the token itself is never stored. */
  token_hash: string;
  created_at: string;
  /** Written at most once a minute (SESSION_TOUCH_INTERVAL_MS); the idle timeout counts from it. */
  last_used_at: string;
  /** The end of the session's absolute lifetime, idle or not. */
  expires_at: string;
}

export interface Database {
  api_keys: ApiKeyTable;
  idempotency_keys: IdempotencyKeyTable;
  nodes: NodeTable;
  servers: ServerTable;
  events: EventTable;
  devices: DeviceTable;
  share_links: ShareLinkTable;
  webhooks: WebhookTable;
  plans: PlanTable;
  webhook_deliveries: WebhookDeliveryTable;
  usage_daily: UsageBucketTable;
  usage_fleet_daily: FleetUsageTable;
  usage_fleet_monthly: FleetUsageTable;
  usage_batches: UsageBatchTable;
  activity: ActivityTable;
  mail_outbox: MailOutboxTable;
  mail_notices: MailNoticeTable;
  mail_digest: MailDigestTable;
  panel_settings: PanelSettingTable;
  duty_leases: DutyLeaseTable;
  console_users: ConsoleUserTable;
  console_sessions: ConsoleSessionTable;
}
