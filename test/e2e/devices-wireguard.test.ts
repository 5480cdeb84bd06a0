/**
 * End to end, as root, on a real WireGuard data plane (wireguard-go): devices made through the API and
 * their configs, exactly as the API serves them, brought up with `wg-quick` in a client namespace.
 *
 *   client ns PREFIX-c (wg-quick PREFIX-qN, wireguard-go) ── veth ── host ns PREFIX-h (NODE_NETNS, PUBLIC_HOST 192.0.2.1)
 *                                                                    └─ servers PREFIX1, PREFIX2 (namespaces PREFIX-s1, PREFIX-s2)
 *
 * The checks: a device with panel-made keys and one with a client-made key pair both carry traffic;
 * `PATCH enabled:false` cuts the tunnel and `enabled:true` brings it back with no action on the client;
 * after `move` the old config carries nothing and the new one works. Times go to `t.diagnostic`.
 *
 * wg-quick's configs route 0.0.0.0/0 and ::/0 (the servers' default client_allowed_ips), so only one is
 * up at a time in the client namespace. `DNS =` lines need `resolvconf`: a no-op shim on PATH stands in
 * (openresolv would rewrite the machine's /etc/resolv.conf). Everything lives in namespaces this file
 * makes and is removed in `after()`, pass or fail: NetLab.cleanup() takes the wg-quick interfaces
 * down, ends every wireguard-go of the prefix by PID, deletes every namespace of the prefix and the
 * configs' temp directory. The prefix starts with `d`, a letter of this file's own.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import type { components } from '../support/api-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { hostOf, NetLab, requireRoot, run, sleep, unusedPrefix, waitFor, wgKeyPair } from '../support/netns.ts';
import { endLab, type LabPanel, need, startLabPanel } from '../support/lab-panel.ts';
import type { ApiClient } from '../support/panel.ts';

type Server = components['schemas']['Server'];
type Device = components['schemas']['Device'];

const skip = requireRoot();
/** The file takes ~28 s (up to ~40 s if the client is slow to re-handshake); a hang fails instead of blocking CI. */
const SUITE_TIMEOUT_MS = 120_000;
/** A removed-then-re-added peer: the client re-handshakes by itself 15 s after its first unanswered packet, retrying every 5 s. */
const RESUME_TIMEOUT_MS = 25_000;
/** How long a cut tunnel is watched to stay cut. */
const WATCH_CUT_MS = 2000;

/** The value of the first `Key = value` line of a wg-quick config. */
function confValue(text: string, key: string): string | undefined {
  return new RegExp(`^${key}\\s*=\\s*(.+)$`, 'm').exec(text)?.[1]?.trim();
}

/** A client-key device's config with the client's own `PrivateKey` line added under [Interface]. */
function withPrivateKey(text: string, privateKey: string): string {
  const added = text.replace(/^\[Interface\]\n/m, `[Interface]\nPrivateKey = ${privateKey}\n`);
  assert.notEqual(added, text, 'the config has an [Interface] section');
  return added;
}

/** `-12 ms` / `+3 ms`. */
function signedMs(deltaMs: number): string {
  const rounded = Math.round(deltaMs);
  return `${rounded > 0 ? '+' : ''}${rounded} ms`;
}

async function peersOf(iface: string): Promise<string[]> {
  return (await run('wg', ['show', iface, 'peers'])).split('\n').filter((l) => l !== '');
}

/** `wg show IF allowed-ips` as public key → allowed ips. */
async function allowedIpsOf(iface: string): Promise<Map<string, string>> {
  const out = await run('wg', ['show', iface, 'allowed-ips']);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => [l.split('\t')[0] ?? '', l.split('\t')[1] ?? '']),
  );
}

/**
 * A continuous `ping -D -O` from the client namespace (20 a second): the wall-clock time of every reply,
 * as Date.now() counts it. It keeps the client sending, as a user's traffic would.
 */
class Pinger {
  readonly replyTimesMs: number[] = [];
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;

  constructor(lab: NetLab, ip: string) {
    this.#child = spawn('ip', ['netns', 'exec', lab.clientNs, 'ping', '-n', '-D', '-O', '-i', '0.05', ip], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    lab.track(this.#child);
    this.#exited = new Promise((resolve) => this.#child.once('exit', () => resolve()));
    let partial = '';
    this.#child.stdout?.setEncoding('utf8');
    this.#child.stdout?.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const at = /^\[(\d+\.\d+)\] \d+ bytes from /.exec(line)?.[1];
        if (at !== undefined) this.replyTimesMs.push(Number(at) * 1000);
      }
    });
  }

  /** Replies received after `sinceMs`. */
  repliesAfter(sinceMs: number): number[] {
    return this.replyTimesMs.filter((at) => at > sinceMs);
  }

  /** Resolves with the time of the first reply after `sinceMs`, or undefined after `timeoutMs`. */
  async firstReplyAfter(sinceMs: number, timeoutMs: number): Promise<number | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [first] = this.repliesAfter(sinceMs);
      if (first !== undefined) return first;
      if (Date.now() > deadline) return undefined;
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    this.#child.kill('SIGINT');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 2000);
    await this.#exited;
    clearTimeout(timer);
  }
}

describe('devices over a real WireGuard tunnel (wg-quick client, wireguard-go)', {
  skip,
  timeout: SUITE_TIMEOUT_MS,
}, () => {
  let lab: NetLab | undefined;
  let db: TestDatabase | undefined;
  let panel: LabPanel | undefined;
  let api: ApiClient;
  let serverA: Server | undefined;
  let serverB: Server | undefined;
  /** The panel-keys device of test 1 and its first config. */
  let panelKeyed: { device: Device; config: string; iface: string } | undefined;
  /** The client-key device of test 2 (its config is up after test 2). */
  let clientKeyed: { device: Device; iface: string } | undefined;

  const up = (iface: string, config: string): Promise<void> => need(lab, 'the lab').wgQuickUp(iface, config);
  const down = (iface: string): Promise<void> => need(lab, 'the lab').wgQuickDown(iface);

  async function fetchConfig(id: number): Promise<string> {
    const { url, key } = need(panel, 'the panel');
    const res = await fetch(`${url}/api/v1/devices/${id}/config`, { headers: { authorization: `Bearer ${key}` } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    return text;
  }

  async function getDevice(id: number): Promise<Device> {
    const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id } } });
    assert.equal(got.response.status, 200, JSON.stringify(got.error));
    return need(got.data, 'a device body');
  }

  /** The config points at this server: its key, endpoint and port. */
  function assertConfigFor(config: string, server: Server, device: Device): void {
    assert.equal(confValue(config, 'PublicKey'), server.public_key);
    assert.equal(confValue(config, 'Endpoint'), `${server.endpoint}:${server.listen_port}`);
    assert.equal(confValue(config, 'Address'), `${device.address}/32`);
  }

  before(async () => {
    const prefix = await unusedPrefix('d');
    lab = await NetLab.create(prefix);
    db = await createTestDatabase('sqlite');
    panel = await startLabPanel(lab, db, 'e2e-devices');
    api = panel.api;
    for (const name of ['dev-a', 'dev-b']) {
      const created = await api.POST('/api/v1/servers', { body: { name } });
      assert.equal(created.response.status, 201, JSON.stringify(created.error));
      assert.equal(created.data?.status, 'running');
      if (name === 'dev-a') serverA = created.data;
      else serverB = created.data;
    }
  });

  after(async () => {
    assert.deepEqual(await endLab({ panel, labs: [lab], database: db }), [], 'cleanup left nothing behind');
  });

  test('a device with panel-made keys: its config from GET /devices/{id}/config, up with wg-quick, pings the server', async (t) => {
    const l = need(lab, 'the lab');
    const server = need(serverA, 'server dev-a');
    const startMs = Date.now();
    const created = await api.POST('/api/v1/devices', { body: { server_id: server.id, name: 'panel-keys' } });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const device = need(created.data, 'a device body');
    const createdMs = Date.now();
    assert.equal(device.client_key, false);
    assert.equal(device.server_id, server.id);

    const config = await fetchConfig(device.id);
    assert.equal(config, device.config, 'GET /config serves what POST answered');
    const privateKey = confValue(config, 'PrivateKey');
    assert.ok(privateKey !== undefined, 'a panel-keys config carries the private key');
    assert.equal(
      (await run('wg', ['pubkey'], `${privateKey}\n`)).trim(),
      device.public_key,
      'the private key belongs to the device public key',
    );
    assertConfigFor(config, server, device);
    assert.ok(
      (await peersOf(l.serverNames(server.id).iface)).includes(device.public_key),
      'the peer is on the server before the answer',
    );

    const iface = `${l.prefix}-q1`;
    await up(iface, config);
    const upMs = Date.now();
    assert.ok(
      await l.waitForPing(hostOf(server.address), 6000),
      `the client pings ${hostOf(server.address)} through the tunnel`,
    );
    const pingMs = Date.now();
    t.diagnostic(
      `create → first ping: ${pingMs - startMs} ms (POST ${createdMs - startMs} ms, wg-quick up → reply ${pingMs - upMs} ms)`,
    );
    assert.equal(device.online, false, 'not online before any handshake');
    // The node monitor reads handshakes every 5 s: online and last_handshake follow within a round or two.
    const seen = await waitFor(
      'the device to show online',
      async () => {
        const got = await api.GET('/api/v1/devices/{id}', { params: { path: { id: device.id } } });
        return got.data?.online === true ? got.data : undefined;
      },
      12_000,
      250,
    );
    assert.ok(
      seen.last_handshake !== null && Math.abs(Date.parse(seen.last_handshake) - pingMs) < 10_000,
      `last_handshake ${seen.last_handshake} is the tunnel's`,
    );
    t.diagnostic(`first ping → API shows online: ${Date.now() - pingMs} ms`);
    panelKeyed = { device, config, iface };
    await down(iface);
  });

  test("a device made with the client's own public key: no PrivateKey in its config; with it added, it pings", async (t) => {
    const l = need(lab, 'the lab');
    const server = need(serverA, 'server dev-a');
    const keys = await wgKeyPair();
    const startMs = Date.now();
    const created = await api.POST('/api/v1/devices', {
      body: { server_id: server.id, name: 'client-keys', public_key: keys.publicKey },
    });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const device = need(created.data, 'a device body');
    assert.equal(device.client_key, true);
    assert.equal(device.public_key, keys.publicKey);
    const config = await fetchConfig(device.id);
    assert.equal(config, device.config);
    assert.doesNotMatch(config, /PrivateKey/, 'the panel has no private key to put in the config');
    assertConfigFor(config, server, device);

    const iface = `${l.prefix}-q2`;
    await up(iface, withPrivateKey(config, keys.privateKey));
    const upMs = Date.now();
    assert.ok(
      await l.waitForPing(hostOf(server.address), 6000),
      `the client pings ${hostOf(server.address)} through the tunnel`,
    );
    t.diagnostic(`create → first ping: ${Date.now() - startMs} ms (wg-quick up → reply ${Date.now() - upMs} ms)`);
    clientKeyed = { device, iface };
  });

  test('PATCH enabled:false cuts the tunnel at once; enabled:true brings it back with no action on the client', async (t) => {
    const l = need(lab, 'the lab');
    const server = need(serverA, 'server dev-a');
    const { device } = need(clientKeyed, 'the client-key device of the previous test, up');
    const serverIface = l.serverNames(server.id).iface;
    const pinger = new Pinger(l, hostOf(server.address));
    try {
      assert.ok((await pinger.firstReplyAfter(0, 5000)) !== undefined, 'traffic flows before the PATCH');

      const disableMs = Date.now();
      const disabled = await api.PATCH('/api/v1/devices/{id}', {
        params: { path: { id: device.id } },
        body: { enabled: false },
      });
      const disabledAnswerMs = Date.now();
      assert.equal(disabled.response.status, 200, JSON.stringify(disabled.error));
      assert.equal(disabled.data?.enabled, false);
      assert.equal(disabled.data?.status, 'disabled');
      assert.ok(
        !(await peersOf(serverIface)).includes(device.public_key),
        'the peer is off the server when PATCH answers',
      );
      await sleep(WATCH_CUT_MS);
      const lastReplyMs = Math.max(...pinger.replyTimesMs);
      const late = pinger.repliesAfter(disabledAnswerMs + 200);
      t.diagnostic(
        `disable → traffic stops: last reply ${signedMs(lastReplyMs - disableMs)} from sending PATCH, pings every 50 ms (PATCH answered in ${disabledAnswerMs - disableMs} ms)`,
      );
      assert.deepEqual(late, [], `no reply later than 200 ms after the PATCH answer (watched ${WATCH_CUT_MS} ms)`);
      assert.equal((await getDevice(device.id)).status, 'disabled');

      const enableMs = Date.now();
      const enabled = await api.PATCH('/api/v1/devices/{id}', {
        params: { path: { id: device.id } },
        body: { enabled: true },
      });
      const enabledAnswerMs = Date.now();
      assert.equal(enabled.response.status, 200, JSON.stringify(enabled.error));
      assert.equal(enabled.data?.enabled, true);
      assert.equal(enabled.data?.status, 'active');
      assert.equal(
        (await allowedIpsOf(serverIface)).get(device.public_key),
        `${device.address}/32`,
        'the peer is back on the server when PATCH answers',
      );
      const resumedMs = await pinger.firstReplyAfter(enableMs, RESUME_TIMEOUT_MS);
      t.diagnostic(
        resumedMs === undefined
          ? `enable → traffic resumes: not within ${RESUME_TIMEOUT_MS} ms`
          : `enable → traffic resumes: ${Math.round(resumedMs - enableMs)} ms (PATCH answered in ${enabledAnswerMs - enableMs} ms; ${Math.round(resumedMs - lastReplyMs)} ms after the last reply before the cut: the client re-handshakes 15 s after its first unanswered packet)`,
      );
      assert.ok(
        resumedMs !== undefined,
        `the client passes traffic again within ${RESUME_TIMEOUT_MS} ms of enabled:true, by itself`,
      );
    } finally {
      await pinger.stop();
    }
  });

  test('move: the old config stops passing traffic, the new config from the move answer pings the new server', async (t) => {
    const l = need(lab, 'the lab');
    const from = need(serverA, 'server dev-a');
    const to = need(serverB, 'server dev-b');
    const moving = need(panelKeyed, 'the panel-keys device of the first test');
    if (clientKeyed !== undefined) await down(clientKeyed.iface);

    // The old config, up and carrying traffic before the move.
    await up(moving.iface, moving.config);
    const pinger = new Pinger(l, hostOf(from.address));
    let moveMs: number;
    let moved: Device;
    try {
      assert.ok(
        (await pinger.firstReplyAfter(0, 6000)) !== undefined,
        'the old config carries traffic before the move',
      );
      moveMs = Date.now();
      const answer = await api.POST('/api/v1/devices/{id}/move', {
        params: { path: { id: moving.device.id } },
        body: { server_id: to.id },
      });
      const answerMs = Date.now();
      assert.equal(answer.response.status, 200, JSON.stringify(answer.error));
      moved = need(answer.data, 'a device body');
      assert.equal(moved.id, moving.device.id);
      assert.equal(moved.server_id, to.id);
      assert.equal(moved.public_key, moving.device.public_key, 'the device keeps its keys');
      assertConfigFor(moved.config, to, moved);
      assert.equal(confValue(moved.config, 'PrivateKey'), confValue(moving.config, 'PrivateKey'));
      assert.equal(await fetchConfig(moved.id), moved.config, 'GET /config serves the new config');
      assert.ok(
        !(await peersOf(l.serverNames(from.id).iface)).includes(moved.public_key),
        'the peer is off the old server when move answers',
      );
      assert.equal(
        (await allowedIpsOf(l.serverNames(to.id).iface)).get(moved.public_key),
        `${moved.address}/32`,
        'the peer is on the new server',
      );
      await sleep(WATCH_CUT_MS);
      const lastReplyMs = Math.max(...pinger.replyTimesMs);
      t.diagnostic(
        `move → old config stops: last reply ${signedMs(lastReplyMs - moveMs)} from sending the move, pings every 50 ms (move answered in ${answerMs - moveMs} ms)`,
      );
      assert.deepEqual(
        pinger.repliesAfter(answerMs + 200),
        [],
        `the old config gets no reply later than 200 ms after the move answer (watched ${WATCH_CUT_MS} ms)`,
      );
    } finally {
      await pinger.stop();
    }

    // The new config: wg-quick down the old one, up the new one.
    await down(moving.iface);
    const newIface = `${l.prefix}-q3`;
    const swapMs = Date.now();
    await up(newIface, moved.config);
    const upMs = Date.now();
    assert.ok(
      await l.waitForPing(hostOf(to.address), 6000),
      `the new config pings the new server ${hostOf(to.address)}`,
    );
    const pingMs = Date.now();
    t.diagnostic(
      `move → new config pings: ${pingMs - moveMs} ms, ${WATCH_CUT_MS} ms of watching the old config included (down old + up new ${upMs - swapMs} ms, up → reply ${pingMs - upMs} ms)`,
    );

    // The old config brought up afresh cannot even handshake.
    await down(newIface);
    await up(moving.iface, moving.config);
    assert.equal(await l.ping(hostOf(from.address), 5), false, 'the old config, up afresh, passes no traffic');
    const handshake = (await run('wg', ['show', moving.iface, 'latest-handshakes'])).trim().split('\t')[1];
    assert.equal(handshake, '0', 'the old config gets no handshake');
    await down(moving.iface);
  });
});
