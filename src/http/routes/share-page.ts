import { createHash } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { type ConfigKind, configFileName, configKind } from '../../domain/client-config.ts';
import { AppError } from '../../domain/errors.ts';
import { addressBucket } from '../../domain/rate-limit.ts';
import type { PlacedDevice } from '../../services/device-views.ts';
import type { DeviceService } from '../../services/devices.ts';
import type { ShareLinkService } from '../../services/share-links.ts';
import type { Api } from '../api.ts';
import { toAppError } from '../errors.ts';
import { renderQrPng } from '../qr.ts';
import type { RateLimiter } from '../rate-limiter.ts';

const STYLE = [
  'body{font-family:system-ui,sans-serif;margin:0;padding:0 1rem;background:#f4f5f7;color:#1d2430}',
  'main{max-width:28rem;margin:2rem auto;padding:1.5rem;background:#fff;border-radius:12px;box-shadow:0 1px 4px #0002}',
  'h1{font-size:1.4rem;margin:0 0 1rem}dl{display:grid;grid-template-columns:auto 1fr;gap:.4rem 1rem}' +
    'dt{color:#5b6474}dd{margin:0;font-weight:600}',
  'img{display:block;width:292px;max-width:100%;margin:1rem auto;image-rendering:pixelated}',
  'a.button{display:block;text-align:center;padding:.8rem;border-radius:8px;background:#2457d6;color:#fff;' +
    'text-decoration:none;font-weight:600}',
  'p.hint{color:#5b6474;font-size:.9rem}',
].join('\n');

/**
 * Nothing but inline PNG images and this one stylesheet may load; no script at all, no framing,
 * no forms. The stylesheet is allowed by its hash, so it cannot be swapped.
 */
const CSP = [
  "default-src 'none'",
  'img-src data:',
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Bytes in decimal units, as VPN plans are sold (1 GB = 10^9 bytes). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(2)} ${units[unit]}`;
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('content-security-policy', CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY');
}

function page(title: string, body: string): string {
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width,initial-scale=1">' +
    '<meta name="robots" content="noindex,nofollow">' +
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body><main>${body}</main></body></html>`
  );
}

/** Which app opens the config: the WireGuard app cannot open an AmneziaWG one. */
function shareHint(kind: ConfigKind): string {
  return (
    `<p class="hint" id="app">Scan the code with ${escapeHtml(kind.apps)}, or import the file. ` +
    'Anyone holding this link can use this access: keep it private.</p>'
  );
}

const STATUS_LABELS: Record<PlacedDevice['device']['status'], string> = {
  active: 'Active',
  disabled: 'Turned off',
  expired: 'Expired',
  limit_reached: 'Data limit reached',
};

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** `5 January 2026 at 03:07`, as Intl's en-GB long date and short time in UTC, without loading ICU's data. */
function utcDate(iso: string): string {
  const d = new Date(iso);
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} at ${d.toISOString().slice(11, 16)}`;
}

function time(iso: string | null): string {
  return iso === null ? 'never' : `<time datetime="${escapeHtml(iso)}">${escapeHtml(utcDate(iso))} UTC</time>`;
}

async function sharePage(
  token: string,
  placed: PlacedDevice,
  config: string,
  linkExpiresAt: string | null,
): Promise<string> {
  const { device } = placed;
  const left = formatBytes(Math.max(0, device.data_limit - device.period_usage.total_bytes));
  const remaining =
    device.data_limit === 0
      ? 'unlimited'
      : `${left} of ${formatBytes(device.data_limit)} ${device.limit_period === 'monthly' ? 'this month' : 'in total'}`;
  const qr = (await renderQrPng(config)).toString('base64');
  const kind = configKind(placed.server.protocol);
  const fileName = configFileName(device.name);
  const facts =
    `<dl><dt>Protocol</dt><dd id="protocol">${kind.name}</dd>` +
    `<dt>Status</dt><dd id="status">${STATUS_LABELS[device.status]}</dd>` +
    `<dt>Data left</dt><dd id="remaining">${escapeHtml(remaining)}</dd>` +
    `<dt>Access expires</dt><dd id="expires">${time(device.expires_at)}</dd>` +
    `<dt>Link expires</dt><dd id="link-expires">${time(linkExpiresAt)}</dd></dl>`;
  const download =
    `<a class="button" id="download" href="/s/${token}/config" download="${escapeHtml(fileName)}">` +
    `Download ${escapeHtml(fileName)}</a>`;
  return page(
    `VPN access: ${device.name}`,
    `<h1>VPN access: ${escapeHtml(device.name)}</h1>
${facts}
<img id="qr" alt="QR code of the ${kind.name} configuration" src="data:image/png;base64,${qr}">
${download}
${shareHint(kind)}`,
  );
}

/**
 * The public share page `/s/{token}` and its config download: no account, no key. Rate-limited per
 * client address (behind a reverse proxy, the one its X-Forwarded-For names when `TRUST_PROXY` lists
 * it), so tokens cannot be guessed at speed (they carry 256 bits anyway).
 */
export function sharePageRoutes(
  app: Api,
  deps: { shareLinks: ShareLinkService; devices: DeviceService; rateLimiter: RateLimiter },
): void {
  const notFound = (reply: FastifyReply, error: unknown) => {
    const appError = toAppError(error);
    if (appError.code !== 'not_found' && appError.code !== 'rate_limited') throw error;
    if (appError.code === 'rate_limited') {
      reply.header('retry-after', String(appError.retryAfterSeconds ?? 1));
      return secure(reply)
        .code(429)
        .type('text/html; charset=utf-8')
        .send(
          page(
            'Too many requests',
            '<h1>Too many requests</h1><p class="hint">Please wait a moment, then reload this page.</p>',
          ),
        );
    }
    return secure(reply)
      .code(404)
      .type('text/html; charset=utf-8')
      .send(
        page(
          'Link not available',
          '<h1>This link is not available</h1>' +
            '<p class="hint">It does not exist, was replaced by a newer link, or has expired. Ask for a new one.</p>',
        ),
      );
  };
  const open = async (ip: string, token: string) => {
    const decision = await deps.rateLimiter.take(`share:${addressBucket(ip)}`);
    if (!decision.allowed)
      throw new AppError('rate_limited', 'too many requests; try again shortly', {}, decision.retryAfterSeconds);
    return deps.shareLinks.open(token);
  };

  app.get<{ Params: { token: string } }>('/s/:token', { schema: { hide: true } }, async (request, reply) => {
    try {
      const { placed, link } = await open(request.ip, request.params.token);
      const html = await sharePage(
        request.params.token,
        placed,
        deps.devices.configText(placed, false),
        link.expires_at,
      );
      return secure(reply).type('text/html; charset=utf-8').send(html);
    } catch (error) {
      return notFound(reply, error);
    }
  });

  app.get<{ Params: { token: string } }>('/s/:token/config', { schema: { hide: true } }, async (request, reply) => {
    try {
      const { placed } = await open(request.ip, request.params.token);
      return secure(reply)
        .type('text/plain; charset=utf-8')
        .header('content-disposition', `attachment; filename="${configFileName(placed.device.name)}"`)
        .send(deps.devices.configText(placed, false));
    } catch (error) {
      return notFound(reply, error);
    }
  });
}
