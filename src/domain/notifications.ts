import { ADMIN_ACTOR } from './activity.ts';
import { type EventKind, type PanelEvent, SYSTEM_ACTOR } from './events.ts';

/** Events that send a mail of their own (issue #7). */
export const MAILED_EVENT_KINDS: readonly EventKind[] = [
  'server.created',
  'server.deleted',
  'node.online',
  'node.offline',
];
/** Events summarised in a digest mail, at most one a minute: there may be thousands at once (a month's end). */
export const DIGEST_EVENT_KINDS: readonly EventKind[] = ['device.limit_reached', 'device.expired'];
export const DIGEST_INTERVAL_MS = 60_000;
/** A digest lists this many devices; the rest are counted. */
const DIGEST_MAX_LINES = 200;

/**
 * Waits before the 2nd, 3rd… attempt of a mail (about two days in all), then it is failed. An SMTP
 * server down for a while gets the mail once it is back; `MAIL_RETRY_SCHEDULE` shortens it for tests.
 */
export const MAIL_RETRY_SCHEDULE_MS: readonly number[] = [
  10_000,
  60_000,
  5 * 60_000,
  15 * 60_000,
  30 * 60_000,
  3_600_000,
  2 * 3_600_000,
  4 * 3_600_000,
  8 * 3_600_000,
  12 * 3_600_000,
  24 * 3_600_000,
];

export interface MailContent {
  subject: string;
  text: string;
  html: string;
}

/** One change a mail tells about. */
export interface ChangeNotice {
  /** e.g. `server fra-1 created`; the subject adds who made it. */
  headline: string;
  /** Further lines: the details. */
  details: readonly string[];
  actor: string;
  atIso: string;
  requestId: string | null;
}

/** A device line of a digest mail. */
export interface DigestLine {
  kind: string;
  line: string;
}

const SUBJECT_PREFIX = '[vpn-panel] ';

/**
 * Who made a change, as mails say it: `via API key <name>` (docs/decisions.md "Actors"), the CLI's admin, or the
 * panel itself.
 */
export function actorPhrase(actor: string): string {
  if (actor === ADMIN_ACTOR) return 'by admin (CLI)';
  if (actor === SYSTEM_ACTOR) return 'by the panel (system)';
  return actor.startsWith('via ') ? actor : `by ${actor}`;
}

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** Subject lines stay on one line whatever a name holds. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ');
}

function htmlPage(title: string, body: string): string {
  return (
    `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>` +
    `<body style="font-family:sans-serif">${body}</body></html>`
  );
}

export function renderChangeMail(notice: ChangeNotice): MailContent {
  const who = actorPhrase(notice.actor);
  const subject = oneLine(`${SUBJECT_PREFIX}${notice.headline} ${who}`);
  const facts: [string, string][] = [
    ['Who', who],
    ['When', notice.atIso],
    ...(notice.requestId === null ? [] : [['Request', notice.requestId] satisfies [string, string]]),
  ];
  const text = [
    `${notice.headline} ${who}.`,
    '',
    ...notice.details,
    ...(notice.details.length > 0 ? [''] : []),
    ...facts.map(([k, v]) => `${`${k}:`.padEnd(9)}${v}`),
    '',
  ].join('\n');
  const html = htmlPage(
    subject,
    `<p><strong>${escapeHtml(notice.headline)}</strong> ${escapeHtml(who)}.</p>` +
      notice.details.map((d) => `<p>${escapeHtml(d)}</p>`).join('') +
      '<table>' +
      facts.map(([k, v]) => `<tr><th align="left">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('') +
      '</table>',
  );
  return { subject, text, html };
}

/** The headline and details of an event that is mailed on its own. */
export function eventNotice(event: PanelEvent, requestId: string | null): ChangeNotice {
  const headlines: Partial<Record<EventKind, string>> = {
    'server.created': `server ${event.server_name ?? ''} created`,
    'server.deleted': `server ${event.server_name ?? ''} deleted`,
    'node.online': `node ${event.node_name ?? ''} is online`,
    'node.offline': `node ${event.node_name ?? ''} is offline`,
  };
  return {
    headline: headlines[event.kind] ?? event.detail,
    details: [event.detail],
    actor: event.actor,
    atIso: event.created_at,
    requestId,
  };
}

/** The digest line of a device event. */
export function digestLine(event: PanelEvent): string {
  const what = event.kind === 'device.expired' ? 'expired' : 'reached its data limit';
  const onServer = event.server_name === null ? '' : ` on server ${event.server_name}`;
  const device = `device ${event.device_name ?? String(event.device_id)}${onServer}`;
  return `${event.created_at}  ${device} ${what} ${actorPhrase(event.actor)}`;
}

function counted(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** One mail summarising every device that reached its limit or expired since the previous digest. */
export function renderDigestMail(lines: readonly DigestLine[]): MailContent {
  const limits = lines.filter((l) => l.kind === 'device.limit_reached').length;
  const expired = lines.length - limits;
  const parts = [
    ...(limits > 0
      ? [`${counted(limits, 'device', 'devices')} reached ${limits === 1 ? 'its' : 'their'} data limit`]
      : []),
    ...(expired > 0 ? [`${counted(expired, 'device', 'devices')} expired`] : []),
  ];
  const headline = parts.join(', ');
  const shown = lines.slice(0, DIGEST_MAX_LINES).map((l) => l.line);
  const rest = lines.length - shown.length;
  const more = rest > 0 ? [`… and ${counted(rest, 'more device', 'more devices')}.`] : [];
  const text = [`${headline}.`, '', ...shown, ...more, ''].join('\n');
  const html = htmlPage(
    headline,
    `<p><strong>${escapeHtml(headline)}.</strong></p>` +
      `<ul>${shown.map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul>` +
      more.map((m) => `<p>${escapeHtml(m)}</p>`).join(''),
  );
  return { subject: oneLine(`${SUBJECT_PREFIX}${headline}`), text, html };
}
