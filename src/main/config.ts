import { readlinkSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { resolve } from 'node:path';
import { type Cidr, parseAllowCidrs } from '../agent/isolation.ts';
import { isHost, isHostName, unbracketed } from '../domain/addresses.ts';
import { parseSecret } from '../domain/panel-secret.ts';
import { isUtc } from '../domain/usage.ts';

/** What `serve` and `node` alike set for their own process. */
interface ProcessConfig {
  logLevel: LogLevel;
  /**
   * `HEAP_GROWING_PERCENT`: how far V8 lets the heap grow past what the last full collection kept, before the next;
   * 0 = V8's own rule (docs/operating.md "Memory").
   */
  heapGrowingPercent: number;
}

/**
 * The environment contract of docs/decisions.md "CLI and environment contract"; docs/configuration.md
 * documents each variable.
 */
export interface PanelConfig extends ProcessConfig {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** `PANEL_SECRET`: the 32-byte key private keys are encrypted with; unset = `DATA_DIR/panel.secret`. */
  panelSecret: Buffer | undefined;
  panelUrl: string;
  /** `PANEL_URL`'s origin when it was set: console changes must come from it; unset, the request's own counts. */
  panelOrigin: string | undefined;
  /**
   * The host names (not addresses: any of those is taken) the console answers at: `localhost`, and `PANEL_URL`'s,
   * `PUBLIC_HOST`'s and `HOST`'s when they are names; lowercase.
   */
  consoleHostNames: string[];
  publicHost: string;
  timezone: string;
  nodeDriver: 'auto' | 'wireguard' | 'dry-run';
  /** The namespace a node treats as its host (uplink) namespace; unset = the root namespace. */
  nodeNetns: string | undefined;
  /** Prefix of the interface and namespace names a node makes, unique per node on one host. */
  nodeNamePrefix: string;
  /** `NODE_ALLOW_CIDRS`: destinations a node opens to clients although they are blocked by default. */
  nodeAllowCidrs: Cidr[];
  localNode: boolean;
  redisUrl: string | undefined;
  smtpUrl: string | undefined;
  notifyEmail: string | undefined;
  webhookAllowPrivate: boolean;
  /**
   * Delays before each retry of a webhook delivery; unset = the production schedule
   * (docs/decisions.md "Webhooks: delivery, signing and retries").
   */
  webhookRetryScheduleMs: number[] | undefined;
  /** Delays before each retry of a notification mail; unset = MAIL_RETRY_SCHEDULE_MS. */
  mailRetryScheduleMs: number[] | undefined;
  /** `DRIFT_CHECK_INTERVAL`: how often nodes are compared with the database; null = never (tests that plant peers). */
  driftCheckIntervalMs: number | null;
  /** EXPIRY_REMINDERS: how long before expires_at each device.expiring is posted, longest first. */
  expiryRemindersMs: number[];
  /** `TRUST_PROXY`: the peers whose X-Forwarded-For names the client (Fastify's trustProxy); false = none. */
  trustProxy: TrustProxy;
  /** `HTTP_MAX_CONNECTIONS`: connections the API holds at once; more are closed as they arrive. */
  maxConnections: number;
  metrics: MetricsListenerConfig | undefined;
  /** `METRICS_REFRESH_INTERVAL`: how often the metrics recount devices, servers, nodes and outboxes in the database. */
  metricsRefreshMs: number;
}

/** `METRICS_HOST`:`METRICS_PORT`, where GET /metrics answers; undefined with `METRICS_PORT=0` (no listener). */
export interface MetricsListenerConfig {
  host: string;
  port: number;
}

/** The addresses and CIDRs of the proxies in front of the panel (and proxy-addr's named ranges). */
export type TrustProxy = false | string[];

export type StoreConfig = Pick<PanelConfig, 'dataDir' | 'databaseUrl' | 'panelSecret'>;
export type NodeDriverConfig = Pick<PanelConfig, 'nodeDriver' | 'nodeNetns' | 'nodeNamePrefix' | 'nodeAllowCidrs'>;

/** `vpn-panel node`: the agent alone on a VPN host. */
export interface AgentConfig extends NodeDriverConfig, ProcessConfig {
  /** Holds the node's usage journal. */
  dataDir: string;
  port: number;
  host: string;
  token: string;
  publicHost: string;
  /** `files`: AGENT_TLS_CERT/KEY; `self-signed`: made in DATA_DIR at first start; `off`: plain HTTP (AGENT_TLS=off). */
  tls: { kind: 'files'; certFile: string; keyFile: string } | { kind: 'self-signed' } | { kind: 'off' };
  metrics: MetricsListenerConfig | undefined;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
type LogLevel = (typeof LOG_LEVELS)[number];

/** Bad configuration: the message is the one line printed before the process exits. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function value(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === '' ? undefined : v;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = value(env, name) ?? fallback;
  const found = allowed.find((a) => a === v);
  if (found === undefined) throw new ConfigError(name, `must be one of ${allowed.join(', ')} (got '${v}')`);
  return found;
}

function url(env: Env, name: string, protocols: readonly string[]): string | undefined {
  const v = value(env, name);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(name, `is not a URL (got '${v}')`);
  }
  if (!protocols.includes(parsed.protocol))
    throw new ConfigError(name, `must be a ${protocols.join(' or ')} URL (got '${parsed.protocol}')`);
  return v;
}

function port(env: Env, name: string, fallback: number): number {
  const v = value(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^[0-9]+$/.test(v) || n < 1 || n > 65535)
    throw new ConfigError(name, `must be a port number 1-65535 (got '${v}')`);
  return n;
}

/** Less than V8's own rule (up to 4x on a large machine) keeps the resident heap near what is live. */
const HEAP_GROWING_PERCENT = 20;

function processConfig(env: Env): ProcessConfig {
  return { logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'), heapGrowingPercent: heapGrowingPercent(env) };
}

function heapGrowingPercent(env: Env): number {
  const v = value(env, 'HEAP_GROWING_PERCENT');
  if (v === undefined) return HEAP_GROWING_PERCENT;
  if (!/^[0-9]+$/.test(v) || Number(v) > 300) {
    throw new ConfigError('HEAP_GROWING_PERCENT', `must be a whole number 0-300, 0 for V8's own rule (got '${v}')`);
  }
  return Number(v);
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const v = value(env, name)?.toLowerCase();
  if (v === undefined) return fallback;
  if (['1', 'on', 'true', 'yes'].includes(v)) return true;
  if (['0', 'off', 'false', 'no'].includes(v)) return false;
  throw new ConfigError(name, `must be on or off (got '${v}')`);
}

function count(env: Env, name: string, fallback: number, max: number): number {
  const v = value(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^[0-9]+$/.test(v) || n < 1 || n > max) {
    throw new ConfigError(name, `must be a whole number 1-${max} (got '${v}')`);
  }
  return n;
}

const NAMED_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

/** An address, or an address with a prefix length that fits its family. */
function isAddressOrCidr(text: string): boolean {
  const [address = '', prefix, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/**
 * `TRUST_PROXY`: off, or the addresses of the proxies in front of the panel. Neither trusting every
 * hop (`on`) nor a hop count is accepted: a client that reaches the panel directly would then choose
 * its own address with X-Forwarded-For (Fastify treats a hop count as trusting nothing, for that reason).
 */
function trustProxy(env: Env): TrustProxy {
  const v = value(env, 'TRUST_PROXY');
  if (v === undefined || ['0', 'off', 'false', 'no'].includes(v.toLowerCase())) return false;
  const entries = v.split(',').map((e) => e.trim());
  const bad = entries.find((e) => !NAMED_RANGES.includes(e) && !isAddressOrCidr(e));
  if (bad !== undefined) {
    const allowed = `off or the proxies' addresses or CIDRs (or ${NAMED_RANGES.join(', ')}), comma-separated`;
    throw new ConfigError('TRUST_PROXY', `must be ${allowed} (got '${bad}')`);
  }
  return entries;
}

const REMINDER_UNITS_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `EXPIRY_REMINDERS`: durations before a device's expiry (`72h`, `30m`, `7d`), comma-separated, default `72h,24h`;
 * `off` or empty for none. Longest first, without repeats.
 */
function expiryReminders(env: Env): number[] {
  const v = value(env, 'EXPIRY_REMINDERS') ?? '72h,24h';
  if (v === '' || v.toLowerCase() === 'off') return [];
  const ms = v.split(',').map((part) => {
    const match = /^(\d{1,4})([mhd])$/.exec(part.trim());
    return match ? Number(match[1]) * (REMINDER_UNITS_MS[match[2] ?? ''] ?? 0) : 0;
  });
  if (ms.some((n) => n <= 0 || n > 365 * 86_400_000)) {
    throw new ConfigError('EXPIRY_REMINDERS', `must be durations such as 72h,24h or 7d,30m (got '${v}')`);
  }
  return [...new Set(ms)].sort((a, b) => b - a);
}

/**
 * `WEBHOOK_RETRY_SCHEDULE`, `MAIL_RETRY_SCHEDULE`: seconds before each retry, comma-separated (tests shorten them
 * this way).
 */
function retrySchedule(env: Env, name: string): number[] | undefined {
  const v = value(env, name);
  if (v === undefined) return undefined;
  const seconds = v.split(',').map((part) => Number(part.trim()));
  if (seconds.length === 0 || seconds.some((n) => !Number.isFinite(n) || n < 0 || n > 7 * 24 * 3600)) {
    throw new ConfigError(name, `must be comma-separated seconds such as 5,300,1800 (got '${v}')`);
  }
  return seconds.map((n) => Math.round(n * 1000));
}

/**
 * Every node is compared this often unless DRIFT_CHECK_INTERVAL says otherwise. Drift of the host alone is
 * repaired at the next round (within one interval and the round's time); drift of what the agent was told
 * waits for a second round (see compareServer in workers/drift-repair.ts), so both are repaired well within 60 s.
 */
const DRIFT_CHECK_INTERVAL_MS = 15_000;
/** Longest DRIFT_CHECK_INTERVAL: two rounds and a repair must fit in the 60 s within which drift is repaired. */
const MAX_DRIFT_CHECK_SECONDS = 20;

/** An interval in seconds (fractions allowed), 1 to `maxSeconds`, as milliseconds; unset = `fallbackMs`. */
function intervalMs(env: Env, name: string, fallbackMs: number, maxSeconds: number, orElse = ''): number {
  const v = value(env, name);
  if (v === undefined) return fallbackMs;
  const seconds = Number(v);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(v) || seconds < 1 || seconds > maxSeconds) {
    throw new ConfigError(name, `must be 1-${maxSeconds} seconds${orElse} (got '${v}')`);
  }
  return Math.round(seconds * 1000);
}

/** `DRIFT_CHECK_INTERVAL`: seconds, or `off`; unset = the default. */
function driftCheckInterval(env: Env, fallbackMs: number): number | null {
  if (value(env, 'DRIFT_CHECK_INTERVAL')?.toLowerCase() === 'off') return null;
  return intervalMs(env, 'DRIFT_CHECK_INTERVAL', fallbackMs, MAX_DRIFT_CHECK_SECONDS, ' or off');
}

/**
 * `PANEL_TIMEZONE`, else the system's zone. UTC is told without Intl (see `Calendar`): a zone the Calendar would
 * not otherwise format with Intl is not checked with it either.
 */
function timezone(env: Env): string {
  const v = value(env, 'PANEL_TIMEZONE');
  if (v === undefined) return systemIsUtc(env) ? 'UTC' : Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (isUtc(v)) return v;
  try {
    new Intl.DateTimeFormat('en', { timeZone: v });
  } catch {
    throw new ConfigError('PANEL_TIMEZONE', `must be an IANA time zone such as Europe/Berlin (got '${v}')`);
  }
  return v;
}

/** The system's zone is UTC by `TZ` or, without it, by the zone `/etc/localtime` links to; else Intl tells. */
function systemIsUtc(env: Env): boolean {
  const tz = env.TZ;
  if (tz !== undefined && tz !== '') return isUtc(tz.replace(/^:/, ''));
  try {
    return isUtc(readlinkSync('/etc/localtime').replace(/^.*\/zoneinfo\//, ''));
  } catch {
    return false;
  }
}

function allowCidrs(env: Env): Cidr[] {
  const parsed = parseAllowCidrs(value(env, 'NODE_ALLOW_CIDRS') ?? '');
  if (typeof parsed === 'string') {
    throw new ConfigError('NODE_ALLOW_CIDRS', `must be comma-separated networks: ${parsed}`);
  }
  return parsed;
}

/** Each command's own default port, so a panel and a node on one host both start with their defaults. */
const DEFAULT_METRICS_PORT = { serve: 9464, node: 9465 } as const;

/**
 * The metrics listener of `serve` and `node` alike (docs/operating.md "Metrics"): loopback unless told, off
 * with port 0.
 */
function metricsListener(env: Env, defaultPort: number): MetricsListenerConfig | undefined {
  if (value(env, 'METRICS_PORT') === '0') return undefined;
  return { host: value(env, 'METRICS_HOST') ?? '127.0.0.1', port: port(env, 'METRICS_PORT', defaultPort) };
}

/** The database's counts in the metrics are this old at most (one pass over the devices each time). */
const METRICS_REFRESH_MS = 15_000;
/** Longest METRICS_REFRESH_INTERVAL: gauges older than a few minutes would mislead more than they save. */
const MAX_METRICS_REFRESH_SECONDS = 300;

/**
 * `PUBLIC_HOST`: a host name, an IPv4 or an IPv6 address (brackets allowed: `[2001:db8::1]`), which server
 * endpoints default to. Unset: the host's first IPv4 address that is not loopback, else its first global IPv6
 * one (an IPv6-only host), else 127.0.0.1.
 */
function publicHost(env: Env): string {
  const given = value(env, 'PUBLIC_HOST');
  if (given === undefined) return firstPublicAddress();
  const host = unbracketed(given);
  if (!isHost(host)) {
    throw new ConfigError(
      'PUBLIC_HOST',
      `must be a host name or an IPv4 or IPv6 address, without port (got '${given}')`,
    );
  }
  return host;
}

/** Where clients reach the local node by default: an IPv6-only host has no IPv4 address but loopback. */
function firstPublicAddress(): string {
  const addresses = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const ipv4 = addresses.find((a) => a.family === 'IPv4' && !a.internal);
  const ipv6 = addresses.find((a) => a.family === 'IPv6' && !a.internal && /^[23]/.test(a.address));
  return ipv4?.address ?? ipv6?.address ?? '127.0.0.1';
}

/** See PanelConfig `consoleHostNames`. */
function consoleHostNames(panelUrl: string | undefined, host: string, publicHost: string): string[] {
  const given = ['localhost', host, publicHost];
  if (panelUrl !== undefined) given.push(new URL(panelUrl).hostname);
  const names = given.map((name) => name.toLowerCase().replace(/\.$/, '')).filter((name) => isHostName(name));
  return [...new Set(names)];
}

/** `PANEL_SECRET`: 32 random bytes in base64, the same text as `DATA_DIR/panel.secret` holds. */
function panelSecret(env: Env): Buffer | undefined {
  const v = value(env, 'PANEL_SECRET');
  if (v === undefined) return undefined;
  const secret = parseSecret(v);
  if (secret === undefined)
    throw new ConfigError(
      'PANEL_SECRET',
      'must be 32 bytes in base64 (44 characters), e.g. from `openssl rand -base64 32`',
    );
  return secret;
}

export function storeConfig(env: Env): StoreConfig {
  return {
    dataDir: resolve(value(env, 'DATA_DIR') ?? './data'),
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    panelSecret: panelSecret(env),
  };
}

export function nodeDriverConfig(env: Env): NodeDriverConfig {
  const prefix = value(env, 'NODE_NAME_PREFIX') ?? 'vp';
  if (!/^[a-z](?:[a-z0-9]{0,2}[a-z])?$/.test(prefix))
    throw new ConfigError('NODE_NAME_PREFIX', `must be 1-4 of a-z and 0-9, a letter first and last (got '${prefix}')`);
  return {
    nodeDriver: oneOf(env, 'NODE_DRIVER', ['auto', 'wireguard', 'dry-run'], 'auto'),
    nodeNetns: value(env, 'NODE_NETNS'),
    nodeNamePrefix: prefix,
    nodeAllowCidrs: allowCidrs(env),
  };
}

export function loadAgentConfig(env: Env): AgentConfig {
  const token = value(env, 'AGENT_TOKEN');
  if (token === undefined || token.length < 16)
    throw new ConfigError('AGENT_TOKEN', 'must be set to a secret of at least 16 characters');
  const certFile = value(env, 'AGENT_TLS_CERT');
  const keyFile = value(env, 'AGENT_TLS_KEY');
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new ConfigError('AGENT_TLS_CERT', 'and AGENT_TLS_KEY must be set together');
  const tlsOn = flag(env, 'AGENT_TLS', true);
  if (!tlsOn && certFile !== undefined) throw new ConfigError('AGENT_TLS', 'is off, but AGENT_TLS_CERT is set');
  return {
    ...nodeDriverConfig(env),
    dataDir: storeConfig(env).dataDir,
    port: port(env, 'AGENT_PORT', 7000),
    host: value(env, 'AGENT_HOST') ?? '0.0.0.0',
    token,
    publicHost: publicHost(env),
    ...processConfig(env),
    tls: !tlsOn
      ? { kind: 'off' }
      : certFile !== undefined && keyFile !== undefined
        ? { kind: 'files', certFile, keyFile }
        : { kind: 'self-signed' },
    metrics: metricsListener(env, DEFAULT_METRICS_PORT.node),
  };
}

export function loadPanelConfig(env: Env): PanelConfig {
  const listenPort = port(env, 'PORT', 8080);
  const email = value(env, 'NOTIFY_EMAIL');
  if (email !== undefined && !/^[^@\s]+@[^@\s]+$/.test(email))
    throw new ConfigError('NOTIFY_EMAIL', `is not an email address (got '${email}')`);
  const panelUrl = url(env, 'PANEL_URL', ['http:', 'https:']);
  const host = value(env, 'HOST') ?? '0.0.0.0';
  const endpointHost = publicHost(env);
  return {
    ...storeConfig(env),
    port: listenPort,
    host,
    panelUrl: (panelUrl ?? `http://localhost:${listenPort}`).replace(/\/+$/, ''),
    panelOrigin: panelUrl === undefined ? undefined : new URL(panelUrl).origin,
    consoleHostNames: consoleHostNames(panelUrl, host, endpointHost),
    publicHost: endpointHost,
    timezone: timezone(env),
    ...nodeDriverConfig(env),
    localNode: flag(env, 'LOCAL_NODE', true),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    smtpUrl: url(env, 'SMTP_URL', ['smtp:', 'smtps:']),
    notifyEmail: email,
    webhookAllowPrivate: flag(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookRetryScheduleMs: retrySchedule(env, 'WEBHOOK_RETRY_SCHEDULE'),
    mailRetryScheduleMs: retrySchedule(env, 'MAIL_RETRY_SCHEDULE'),
    driftCheckIntervalMs: driftCheckInterval(env, DRIFT_CHECK_INTERVAL_MS),
    expiryRemindersMs: expiryReminders(env),
    ...processConfig(env),
    trustProxy: trustProxy(env),
    maxConnections: count(env, 'HTTP_MAX_CONNECTIONS', 1024, 1_000_000),
    metrics: metricsListener(env, DEFAULT_METRICS_PORT.serve),
    metricsRefreshMs: intervalMs(env, 'METRICS_REFRESH_INTERVAL', METRICS_REFRESH_MS, MAX_METRICS_REFRESH_SECONDS),
  };
}
