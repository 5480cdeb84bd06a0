import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { consoleFileNotFound } from '../../domain/error-cases.ts';
import type { Api } from '../api.ts';

/** Where `npm run build:console` writes the operator console (console/vite.config.ts). */
export const BUILT_CONSOLE = fileURLToPath(new URL('../../../dist/console/', import.meta.url));

/**
 * Only the console's own files may load: scripts and styles from this origin (no inline script or style),
 * images also as data: and blob: URLs (the device QR code is fetched and shown as a blob), API calls to this
 * origin, no framing, no <base>, forms only to this origin.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/**
 * The first path segments of the console's own pages (console/src/app.tsx): a reload or a link there gets
 * the app, which shows the page. Everything else outside the console (`/api`, `/console/session`, `/s/`,
 * `/healthz`) stays its own route's, and an unknown path stays a 404.
 */
export const CONSOLE_PAGES = [
  'sign-in',
  'servers',
  'devices',
  'groups',
  'plans',
  'webhooks',
  'api-keys',
  'activity',
  'users',
];

const NOT_BUILT =
  'The operator console is not built. Run `npm run build:console` (scripts/start does it), then reload.\n';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/** One built file with the compressed forms the build wrote beside it. */
interface ConsoleFile {
  type: string;
  etag: string;
  identity: Buffer;
  br: Buffer | undefined;
  gzip: Buffer | undefined;
}

interface BuiltConsole {
  /** The modification time of index.html when it was read: a newer build is read again. */
  builtAtMs: number;
  /** By path from the console's root: `index.html`, `assets/index-….js`. */
  files: Map<string, ConsoleFile>;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

async function readIfThere(path: string): Promise<Buffer | undefined> {
  return readFile(path).catch(() => undefined);
}

/** Every file of the build in memory (a few hundred kB); undefined when there is no build. */
async function readConsole(root: string): Promise<BuiltConsole | undefined> {
  const index = await stat(join(root, 'index.html')).catch(() => undefined);
  if (index === undefined) return undefined;
  const files = new Map<string, ConsoleFile>();
  for (const path of await filesUnder(root)) {
    const type = TYPES[extname(path)];
    if (type === undefined) continue;
    const identity = await readFile(path);
    files.set(relative(root, path).split(sep).join('/'), {
      type,
      etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
      identity,
      br: await readIfThere(`${path}.br`),
      gzip: await readIfThere(`${path}.gz`),
    });
  }
  return { builtAtMs: index.mtimeMs, files };
}

/** The codings a client accepts (`Accept-Encoding`), without those it refuses with `q=0`. */
function acceptedCodings(header: string | undefined): Set<string> {
  const accepted = new Set<string>();
  for (const part of (header ?? '').split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (name !== '' && (q === undefined || Number(q.slice(2)) > 0)) accepted.add(name);
  }
  return accepted;
}

function send(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile): FastifyReply {
  reply.type(file.type).header('etag', file.etag).header('vary', 'accept-encoding');
  reply.header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer');
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  const accepted = acceptedCodings(request.headers['accept-encoding']);
  if (file.br !== undefined && accepted.has('br')) return reply.header('content-encoding', 'br').send(file.br);
  if (file.gzip !== undefined && (accepted.has('gzip') || accepted.has('*')))
    return reply.header('content-encoding', 'gzip').send(file.gzip);
  return reply.send(file.identity);
}

/**
 * The operator console: `GET /` and the console's pages answer its index.html (revalidated on every load,
 * under a strict CSP), `/assets/*` its hashed files (cached for a year). Served from memory, compressed as
 * the build wrote them. Read at the first request and again after a new build; without a build, 503.
 */
export function consoleRoutes(app: Api, root: string = BUILT_CONSOLE): void {
  let built: Promise<BuiltConsole | undefined> | undefined;

  /** The build in memory, read again when index.html changed (a new build) or when there was none. */
  const current = async (): Promise<BuiltConsole | undefined> => {
    const held = await built;
    const index = await stat(join(root, 'index.html')).catch(() => undefined);
    if (held !== undefined && index?.mtimeMs === held.builtAtMs) return held;
    if (index === undefined) return undefined;
    built = readConsole(root);
    return built;
  };

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const index = (await current())?.files.get('index.html');
    if (index === undefined)
      return reply.code(503).type('text/plain; charset=utf-8').header('cache-control', 'no-store').send(NOT_BUILT);
    reply.header('cache-control', 'no-cache').header('content-security-policy', CONSOLE_CSP);
    reply.header('x-frame-options', 'DENY');
    return send(request, reply, index);
  };

  const hidden = { schema: { hide: true } };
  app.get('/', hidden, page);
  for (const name of CONSOLE_PAGES) {
    app.get(`/${name}`, hidden, page);
    app.get(`/${name}/*`, hidden, page);
  }
  app.get<{ Params: { '*': string } }>('/assets/*', hidden, async (request, reply) => {
    const name = `assets/${request.params['*']}`;
    const file = (await current())?.files.get(name);
    if (file === undefined) throw consoleFileNotFound(name);
    reply.header('cache-control', 'public, max-age=31536000, immutable');
    return send(request, reply, file);
  });
}
