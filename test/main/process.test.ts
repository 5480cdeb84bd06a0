import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { freePort, type PanelProcess, runCli, startPanel } from '../support/panel.ts';

describe('start-up configuration', () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase('sqlite');
  });
  after(async () => {
    await db.drop();
  });

  const BAD: [string, Record<string, string>, RegExp][] = [
    ['a port that is not a number', { PORT: 'eighty' }, /PORT must be a port number/],
    ['a port out of range', { PORT: '70000' }, /PORT must be a port number/],
    [
      'a database URL of another kind',
      { DATABASE_URL: 'mysql://localhost/x' },
      /DATABASE_URL must be a postgres: or postgresql: URL/,
    ],
    [
      'a time zone that does not exist',
      { PANEL_TIMEZONE: 'Mars/Olympus_Mons' },
      /PANEL_TIMEZONE must be an IANA time zone/,
    ],
    ['an unknown node driver', { NODE_DRIVER: 'fast' }, /NODE_DRIVER must be one of auto, wireguard, dry-run/],
    ['a local node flag that is not on or off', { LOCAL_NODE: 'maybe' }, /LOCAL_NODE must be on or off/],
    ['a panel URL that is not a URL', { PANEL_URL: 'panel.example' }, /PANEL_URL is not a URL/],
    [
      'a panel secret that is not 32 bytes in base64',
      { PANEL_SECRET: 'c2hvcnQ=' },
      /PANEL_SECRET must be 32 bytes in base64/,
    ],
    ['trusting every proxy', { TRUST_PROXY: 'on' }, /TRUST_PROXY must be off or the proxies' addresses or CIDRs/],
    ['a proxy hop count', { TRUST_PROXY: '1' }, /TRUST_PROXY must be off or the proxies' addresses/],
    ['a proxy CIDR with a prefix too long', { TRUST_PROXY: '10.0.0.0/33' }, /TRUST_PROXY .*got '10\.0\.0\.0\/33'/],
    ['a connection cap of zero', { HTTP_MAX_CONNECTIONS: '0' }, /HTTP_MAX_CONNECTIONS must be a whole number/],
    ['a heap growth that is not a number', { HEAP_GROWING_PERCENT: '20%' }, /HEAP_GROWING_PERCENT must be a whole/],
    [
      'a PostgreSQL that does not answer',
      { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' },
      /ECONNREFUSED|connect/,
    ],
  ];
  for (const [name, env, message] of BAD) {
    it(`fails with one clear line for ${name}`, async () => {
      const result = await runCli(['serve'], {
        ...db.env,
        NODE_DRIVER: 'dry-run',
        PORT: String(await freePort()),
        ...env,
      });
      assert.equal(result.code, 1);
      const lines = result.stderr.trim().split('\n');
      assert.equal(lines.length, 1, result.stderr);
      assert.match(lines[0] ?? '', /^vpn-panel: /);
      assert.match(lines[0] ?? '', message);
    });
  }
});

describe('a running panel', () => {
  let db: TestDatabase;
  let agent: FakeAgent;
  let panel: PanelProcess;
  before(async () => {
    db = await createTestDatabase('sqlite');
    agent = new FakeAgent();
    await agent.start();
    panel = await startPanel({ database: db, env: { LOCAL_NODE: 'off' } });
    assert.equal(
      (await panel.cli(['nodes', 'add', '--name', 'fake', '--url', agent.url, '--token', agent.token])).code,
      0,
    );
  });
  after(async () => {
    await panel.stop('SIGKILL');
    await agent.stop();
    await db.drop();
  });

  it('answers /healthz without a key', async () => {
    const response = await fetch(`${panel.url}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: 'ok', version: '0.1.0' });
  });

  it('finishes the requests in flight on SIGTERM, then exits 0', async () => {
    const key = await panel.createKey('drain', 'servers:write');
    let release = () => {};
    agent.hold = new Promise((resolve) => (release = resolve));
    const inFlight = fetch(`${panel.url}/api/v1/servers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"name":"in-flight"}',
    });
    await new Promise((r) => setTimeout(r, 300));
    const exit = panel.stop('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    release();
    const response = await inFlight;
    assert.equal(response.status, 201);
    assert.equal((await response.json()).name, 'in-flight');
    assert.equal(await exit, 0);
    await assert.rejects(fetch(`${panel.url}/healthz`), 'no longer listening');
  });
});
