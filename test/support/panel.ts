import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import createClient from 'openapi-fetch';
import type { components, paths } from '../../console/src/api-types.ts';
import type { TestDatabase } from './databases.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../bin/vpn-panel.js', import.meta.url));

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `vpn-panel ARGS` as a user would, with the given environment and, when given, `input` on its stdin. */
export function runCli(
  args: readonly string[],
  env: Record<string, string | undefined>,
  input?: string,
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, ...env }, cwd: ROOT },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end(input);
  });
}

/**
 * Waits up to 5 s for a JSON log line of the panel (a process or `buildTestApp`'s) that `matches`;
 * fails naming what it printed.
 */
export async function logged(
  panel: { output(): string },
  matches: (line: Record<string, unknown>) => boolean,
): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const lines = panel
      .output()
      .split('\n')
      .flatMap((line): Record<string, unknown>[] => {
        try {
          return [JSON.parse(line)];
        } catch {
          return []; // not JSON, or the last line not printed whole yet
        }
      });
    if (lines.some(matches)) return;
    if (Date.now() > deadline) throw new Error(`no such log line; the panel printed:\n${panel.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export type ApiClient = ReturnType<typeof createClient<paths>>;

export type ApiMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
/** The OpenAPI document's paths below /api/v1, by their template (`/devices/{id}`). */
type V1Paths = { [K in keyof paths as K extends `/api/v1${infer Rest}` ? Rest : never]: paths[K] };
type V1Operation<T extends keyof V1Paths, M extends ApiMethod> = V1Paths[T][Lowercase<M>];
/** A template as sent: each `{parameter}` any text, and any query string after it. */
type Filled<T extends string> = T extends `${infer Head}{${string}}${infer Tail}`
  ? `${Head}${string}${Filled<Tail>}`
  : T;
type TemplatesOf<M extends ApiMethod> = {
  [T in keyof V1Paths]: V1Operation<T, M> extends { responses: object } ? T : never;
}[keyof V1Paths];
/** A path the document has an operation of method M for, e.g. `/devices/7` for PATCH. */
export type ApiPath<M extends ApiMethod> = Filled<TemplatesOf<M>> | `${Filled<TemplatesOf<M>>}?${string}`;

type Segments<S extends string> = S extends `${infer Head}/${infer Rest}` ? [Head, ...Segments<Rest>] : [S];
/** Whether the segments of a path as sent fill a template's: a `{parameter}` takes any one, the rest are equal. */
type Fills<Sent extends string[], Template extends string[]> = Sent extends [
  infer S,
  ...infer SentRest extends string[],
]
  ? Template extends [infer T, ...infer TemplateRest extends string[]]
    ? (T extends `{${string}}` ? true : S extends T ? true : false) extends true
      ? Fills<SentRest, TemplateRest>
      : false
    : false
  : Template extends []
    ? true
    : false;
type WithoutQuery<P extends string> = P extends `${infer Path}?${string}` ? Path : P;
/** The operation of the document that `METHOD path` (as sent, `/devices/7?x=1`) calls; of unions, each one's. */
export type ApiOperation<M extends ApiMethod, P extends string> = M extends ApiMethod
  ? P extends string
    ? {
        [T in TemplatesOf<M>]: Fills<Segments<WithoutQuery<P>>, Segments<T>> extends true ? V1Operation<T, M> : never;
      }[TemplatesOf<M>]
    : never
  : never;

type JsonBodyOf<O> = O extends { requestBody?: { content: { 'application/json': infer Body } } } ? Body : never;
/** The JSON body the operation of method M on path P takes. */
export type ApiBody<M extends ApiMethod, P extends string> = JsonBodyOf<ApiOperation<M, P>>;

type ResponsesOf<O> = O extends { responses: infer R } ? R : never;
/** The JSON body of one documented response; undefined for one without (204, a config as text). */
type ResponseJson<R> = R extends { content: { 'application/json': infer Body } } ? Body : undefined;
/** The statuses the document lists for an operation's success (`4XX`, `5XX` are its error bodies). */
export type SuccessStatus<O> = Extract<keyof ResponsesOf<O>, number>;
/** The error of docs/api.md "Errors": `{ error: { code, message, fields } }` holds it. */
export type ApiError = components['schemas']['Error']['error'];

/** An answer of the API as black-box tests read it, typed by the document's operation O. */
export interface ApiAnswer<O> {
  readonly status: number;
  readonly headers: Headers;
  /** The JSON body: one of those the document gives O (success or error); undefined when it sent none. */
  readonly json: { [S in keyof ResponsesOf<O>]: ResponseJson<ResponsesOf<O>[S]> }[keyof ResponsesOf<O>];
  /** The error of a refused request (a 4xx or 5xx with the error body); else undefined. */
  readonly error: ApiError | undefined;
  /** Asserts the status (a failure shows the body) and returns the body the document gives it. */
  expect<S extends SuccessStatus<O>>(status: S): ResponseJson<ResponsesOf<O>[S]>;
}

/** An answer to a request the document's types do not describe (`callApiUnchecked`). */
export interface UncheckedAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly json: unknown;
  /** As `ApiAnswer.error`. */
  readonly error: ApiError | undefined;
}

/**
 * `METHOD /api/v1<path>` with the key (if any) and an optional JSON body, as any client would send it.
 * Method, path, body and the answer are typed by the OpenAPI document (console/src/api-types.ts).
 */
export async function callApi<M extends ApiMethod, P extends ApiPath<M>>(
  baseUrl: string,
  key: string | undefined,
  method: M,
  path: P,
  body?: ApiBody<M, P>,
): Promise<ApiAnswer<ApiOperation<M, P>>> {
  const { status, headers, json, error } = await send(baseUrl, key, method, path, body);
  return {
    status,
    headers,
    json: documented(json),
    error,
    expect(expected) {
      assert.equal(status, expected, `${method} ${path}: ${JSON.stringify(json)}`);
      return documented(json);
    },
  };
}

/**
 * The one narrowing of an answer: its body is taken to be what the document says the operation
 * answers (for `expect`, with that status). test/http/openapi.test.ts holds the document to the
 * routes' schemas, which are what Fastify serializes each answer by.
 */
function documented<Body>(json: unknown): Body {
  return json as Body;
}

async function send(
  baseUrl: string,
  key: string | undefined,
  method: ApiMethod,
  path: string,
  body: unknown,
): Promise<UncheckedAnswer> {
  const headers: Record<string, string> = {};
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const isJson = (response.headers.get('content-type') ?? '').startsWith('application/json');
  const json: unknown = isJson && text !== '' ? JSON.parse(text) : undefined;
  const error = response.status >= 400 ? errorOf(json) : undefined;
  return { status: response.status, headers: response.headers, json, error };
}

/** The error of a body that is the API's error body, checked field by field; else undefined. */
function errorOf(body: unknown): ApiError | undefined {
  if (typeof body !== 'object' || body === null || !('error' in body)) return undefined;
  const { error } = body;
  if (typeof error !== 'object' || error === null || !('code' in error) || !('message' in error)) return undefined;
  if (!('fields' in error)) return undefined;
  const { code, message, fields } = error;
  if (typeof code !== 'string' || typeof message !== 'string') return undefined;
  if (typeof fields !== 'object' || fields === null) return undefined;
  const problems: Record<string, string> = {};
  for (const [field, problem] of Object.entries(fields)) {
    if (typeof problem !== 'string') return undefined;
    problems[field] = problem;
  }
  return { code, message, fields: problems };
}

/**
 * `callApi` without the document's types, for a request the API must refuse (a body of the wrong
 * shape on purpose) and for tables that mix operations (the auth matrix).
 */
export function callApiUnchecked(
  baseUrl: string,
  key: string | undefined,
  method: ApiMethod,
  path: string,
  body?: unknown,
): Promise<UncheckedAnswer> {
  return send(baseUrl, key, method, path, body);
}

/** `callApi` with the panel and the key bound, as a test's `call`. */
export type ApiCall = <M extends ApiMethod, P extends ApiPath<M>>(
  method: M,
  path: P,
  body?: ApiBody<M, P>,
) => Promise<ApiAnswer<ApiOperation<M, P>>>;

export interface PanelProcess {
  readonly url: string;
  readonly port: number;
  readonly env: Record<string, string | undefined>;
  readonly process: ChildProcess;
  /** Everything the panel printed. */
  output(): string;
  /** `vpn-panel ARGS` with the panel's environment; `input` on its stdin. */
  cli(args: readonly string[], input?: string): Promise<CliResult>;
  /** `vpn-panel keys create`; returns the key, the last line of its output. */
  createKey(name: string, scopes: string, extra?: readonly string[]): Promise<string>;
  client(key?: string): ApiClient;
  /** Sends the signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartOptions {
  database: TestDatabase;
  env?: Record<string, string | undefined>;
  /** The port to listen on (a restart keeps its URL); a free one when not given. */
  port?: number;
}

/**
 * Starts `vpn-panel serve` the way the README does, on a free port, and waits for /healthz.
 * Tests run as one process each, so a panel that a test forgets is still ended by `stop()` in `after`.
 * Its metrics listener is off unless the test sets METRICS_PORT, so panels of parallel tests never share one.
 */
export async function startPanel(options: StartOptions): Promise<PanelProcess> {
  const port = options.port ?? (await freePort());
  const env: Record<string, string | undefined> = {
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    METRICS_PORT: '0',
    NODE_DRIVER: 'dry-run',
    PUBLIC_HOST: '192.0.2.1',
    ...options.database.env,
    ...options.env,
  };
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...process.env, ...env },
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  let stopping = false;
  // A panel that dies under a test explains itself in the test's output.
  child.once('exit', (code, signal) => {
    if (!stopping && signal !== 'SIGKILL')
      process.stderr.write(`panel on port ${port} exited unasked (${code ?? signal}):\n${output}\n`);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`panel exited with ${child.exitCode}:\n${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`panel did not answer /healthz within 30 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const panel: PanelProcess = {
    url,
    port,
    env,
    process: child,
    output: () => output,
    cli: (args, input) => runCli(args, env, input),
    async createKey(name, scopes, extra = []) {
      const result = await runCli(['keys', 'create', '--name', name, '--scopes', scopes, ...extra], env);
      if (result.code !== 0) throw new Error(`keys create failed: ${result.stderr}`);
      const key = result.stdout.trim().split('\n').at(-1);
      if (key === undefined) throw new Error('keys create printed nothing');
      return key;
    },
    client: (key) =>
      createClient<paths>({ baseUrl: url, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } }),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = once(child, 'exit');
      stopping = true;
      child.kill(signal);
      const [code] = await exited;
      return typeof code === 'number' ? code : null;
    },
  };
  return panel;
}
