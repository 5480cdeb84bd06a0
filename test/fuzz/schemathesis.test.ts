/**
 * A fuzzer nobody here wrote: schemathesis (PyPI, pinned in scripts/python-tools.sh) reads the OpenAPI document
 * the panel serves and sends every operation generated requests, valid and invalid, in its examples, coverage,
 * fuzzing and stateful (link-following) phases, with an API key of every scope, then checks each answer against
 * the document: no server error, the status codes, bodies, content types and headers it lists, invalid input
 * refused, authentication enforced, 405 for a method the document does not list, deleted resources gone. A
 * fixed seed and a bounded number of examples per operation make a run repeatable and keep it within about
 * three minutes on two busy cores. The panel runs as the README starts it, on SQLite, with a dry-run node: the
 * fuzzer is about the HTTP contract, not the data plane. A failing run prints schemathesis' report: each
 * failure with the curl line that reproduces it.
 *
 * What the fuzzer cannot know from the document, and how the run supplies it:
 * - The key is exempt from the per-key rate limit (`--no-rate-limit`), or the fuzzer would get mostly 429s.
 * - The limit on requests without a valid credential is per client address (30, then one a second), and
 *   schemathesis checks each operation's authentication with such requests: from one address they soon get
 *   the documented 429 instead of the 401 it expects. So the panel runs behind a reverse proxy (TRUST_PROXY),
 *   this file's, which names each request's client by a new address in X-Forwarded-For (198.18.0.0/15, the
 *   benchmarking range; no traffic goes there). test/http/rate-limit.test.ts tests the limits themselves.
 * - An Idempotency-Key must be new for each request: test/fuzz/schemathesis_hooks.py makes each valid one new.
 *
 * One run makes every check; its JSON report is judged twice. Every check but `positive_data_acceptance` ("valid
 * data is accepted") must find nothing. That one is a todo: the panel refuses valid-looking input for reasons of
 * state and of rules across fields that a schema cannot say (a plan id that names no plan, an expiry in the
 * past, `throttle_speed` without `quota_action: throttle`, `resource_id` without `resource`), or that the
 * document does not say yet (the `host` and `network` formats, a webhook URL's scheme); the report
 * printed lists each.
 *
 * Outside CI a machine without the fuzzer skips the runs; in CI (`CI=true`) a missing fuzzer fails.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request as forward, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, type PanelProcess, startPanel } from '../support/panel.ts';

/** Where scripts/python-tools.sh installs it (a link to the pinned version's virtual environment). */
const SCHEMATHESIS = '/usr/local/lib/vpn-panel/schemathesis/bin/schemathesis';
const INSTALLED = existsSync(SCHEMATHESIS);
const IN_CI = process.env.CI === 'true';
const HOOKS_DIR = fileURLToPath(new URL('.', import.meta.url));
/** Fixed, so a failure reproduces with the same requests. */
const SEED = '20261128';
const EXAMPLES_PER_OPERATION = '30';
const RUN_TIMEOUT_MS = 360_000;
/** The failure type of positive_data_acceptance in schemathesis' JSON report (see above). */
const POSITIVE_DATA_REJECTED = 'RejectedPositiveData';

/** Why positive_data_acceptance fails today: each class of refusal, with an example in the run's report. */
const OPEN_FINDINGS =
  'positive_data_acceptance: rules across fields (throttle_speed and quota_action, days and until, ' +
  'resource_id and resource, kill_switch and format), the clock (an expiry in the past), state (a plan or ' +
  'server id that names none, a top-up of a device without a limit), and what the document does not say ' +
  'yet (the host and network formats, that a webhook URL is absolute http or https)';

interface Run {
  code: number | null;
  output: string;
}

/** The part of schemathesis' JSON report (`--report json`) this file reads. */
interface Report {
  failures: { type: string; code: string; title: string; count: number; operations: string[] }[];
  errors: unknown[];
}

function runSchemathesis(args: readonly string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(SCHEMATHESIS, args, {
      cwd,
      env: {
        ...process.env,
        NO_COLOR: '1',
        PYTHONIOENCODING: 'utf-8',
        PYTHONPATH: HOOKS_DIR,
        SCHEMATHESIS_HOOKS: 'schemathesis_hooks',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** A reverse proxy to the panel that names each request's client by a new address in X-Forwarded-For. */
async function startProxy(target: number): Promise<{ server: Server; url: string }> {
  let requests = 0;
  const server = createServer((incoming, answer) => {
    requests++;
    const client = `198.18.${Math.floor(requests / 256) % 256}.${requests % 256}`;
    const upstream = forward(
      {
        host: '127.0.0.1',
        port: target,
        method: incoming.method,
        path: incoming.url,
        headers: { ...incoming.headers, 'x-forwarded-for': client },
      },
      (response) => {
        answer.writeHead(response.statusCode ?? 502, response.rawHeaders);
        response.pipe(answer);
      },
    );
    upstream.once('error', () => answer.destroy());
    incoming.pipe(upstream);
  });
  const port = await freePort();
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${port}` };
}

test('the fuzzer is installed where CI runs (scripts/install-packages.sh ci)', { skip: !IN_CI && 'not in CI' }, () => {
  assert.ok(INSTALLED, `${SCHEMATHESIS} is missing: run bash scripts/install-packages.sh ci as root`);
});

describe('schemathesis against the served OpenAPI document', {
  skip: !INSTALLED && !IN_CI && `needs ${SCHEMATHESIS} (bash scripts/install-packages.sh ci)`,
}, () => {
  let database: TestDatabase;
  let panel: PanelProcess;
  let proxy: { server: Server; url: string };
  let workDir: string;
  let run: Run;
  let report: Report;

  before(
    async () => {
      database = await createTestDatabase('sqlite');
      panel = await startPanel({ database, env: { TRUST_PROXY: '127.0.0.1' } });
      proxy = await startProxy(panel.port);
      const key = await panel.createKey('fuzzer', 'all', ['--no-rate-limit']);
      // Its report stays out of the repository.
      workDir = mkdtempSync(join(tmpdir(), 'vpn-panel-fuzz-'));
      const reportPath = join(workDir, 'report.json');
      const started = Date.now();
      run = await runSchemathesis(
        [
          'run',
          `${proxy.url}/api/v1/openapi.json`,
          '--header',
          `Authorization: Bearer ${key}`,
          '--checks',
          'all',
          // Every check sees every example, also after another check failed on the operation.
          '--continue-on-failure',
          '--seed',
          SEED,
          '--max-examples',
          EXAMPLES_PER_OPERATION,
          '--workers',
          '1',
          '--generation-database',
          'none',
          '--no-color',
          '--report',
          'json',
          '--report-json-path',
          reportPath,
        ],
        workDir,
      );
      process.stdout.write(`# schemathesis ran ${Math.round((Date.now() - started) / 1000)} s\n`);
      assert.ok(existsSync(reportPath), `schemathesis wrote no report (exit ${run.code}):\n${run.output}`);
      report = JSON.parse(readFileSync(reportPath, 'utf8'));
    },
    { timeout: RUN_TIMEOUT_MS + 60_000 },
  );

  after(async () => {
    proxy?.server.closeAllConnections();
    proxy?.server.close();
    await panel?.stop();
    await database?.drop();
    if (workDir !== undefined) rmSync(workDir, { recursive: true, force: true });
  });

  const failures = (keep: (type: string) => boolean) =>
    report.failures.filter((f) => keep(f.type)).map((f) => `${f.code} ${f.title}: ${f.operations.join(', ')}`);

  test('every operation, every check but positive_data_acceptance: no failure, no error', () => {
    const found = failures((type) => type !== POSITIVE_DATA_REJECTED);
    const problems = [...found, ...report.errors.map((e) => JSON.stringify(e))];
    assert.deepEqual(problems, [], `schemathesis found problems (exit ${run.code}):\n${run.output}`);
  });

  test('every operation, positive_data_acceptance: valid input is taken', { todo: OPEN_FINDINGS }, () => {
    const found = failures((type) => type === POSITIVE_DATA_REJECTED);
    assert.deepEqual(found, [], `schemathesis' report:\n${run.output}`);
  });
});
