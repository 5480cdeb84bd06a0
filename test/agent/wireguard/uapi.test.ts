import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';
import { type ChildHandle, ExecRunner } from '../../../src/agent/commands.ts';
import { type Dump, parseDump } from '../../../src/agent/wireguard/host-readers.ts';
import { UapiConfig, WgTool } from '../../../src/agent/wireguard/interface-config.ts';
import { applyPeers } from '../../../src/agent/wireguard/peers.ts';
import { parseGet, UapiClient, UapiError } from '../../../src/agent/wireguard/uapi.ts';
import { generateKeyPair } from '../../../src/domain/wireguard-keys.ts';
import { CHILD_LOG_DIR } from '../../support/netns.ts';

// ---------------------------------------------------------------------------------------------
// (a) Against a fake wireguard-go: a unix socket in a temporary directory that records each request
// and answers from a script (it records; it does not simulate a device).
// ---------------------------------------------------------------------------------------------

const hex = (base64: string): string => Buffer.from(base64, 'base64').toString('hex');
const [A, B] = [generateKeyPair(), generateKeyPair()];
const SERVER = generateKeyPair();

/** What wireguard-go 0.0.20220316 answers to `get=1` for a device with peers A (two addresses, traffic) and B. */
const GET_ANSWER =
  `private_key=${hex(SERVER.privateKey)}\nlisten_port=51820\n` +
  `public_key=${hex(A.publicKey)}\npreshared_key=${'0'.repeat(64)}\nprotocol_version=1\n` +
  'endpoint=192.0.2.2:40000\nlast_handshake_time_sec=1700000000\nlast_handshake_time_nsec=5\n' +
  'tx_bytes=5678\nrx_bytes=1234\npersistent_keepalive_interval=0\n' +
  'allowed_ip=10.128.0.2/32\nallowed_ip=fd00::2/128\n' +
  `public_key=${hex(B.publicKey)}\npreshared_key=${'0'.repeat(64)}\nprotocol_version=1\n` +
  'last_handshake_time_sec=0\nlast_handshake_time_nsec=0\ntx_bytes=0\nrx_bytes=0\n' +
  'persistent_keepalive_interval=0\nerrno=0\n\n';

const EXPECTED_DUMP = {
  privateKey: SERVER.privateKey,
  listenPort: 51820,
  peers: [
    {
      publicKey: A.publicKey,
      allowedIps: '10.128.0.2/32,fd00::2/128',
      lastHandshakeS: 1700000000,
      rxBytes: 1234,
      txBytes: 5678,
    },
    { publicKey: B.publicKey, allowedIps: '', lastHandshakeS: 0, rxBytes: 0, txBytes: 0 },
  ],
};

type Reply = (request: string, socket: Socket) => void;

class FakeWireGuardGo {
  readonly requests: string[] = [];
  reply: Reply = (_request, socket) => socket.end('errno=0\n\n');
  readonly #server: Server;

  constructor(dir: string, iface: string) {
    this.#server = createServer((socket) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
        // A request ends with a blank line.
        if (text.endsWith('\n\n')) {
          this.requests.push(text);
          this.reply(text, socket);
        }
      });
      socket.on('error', () => {});
    });
    this.#server.listen(join(dir, `${iface}.sock`));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

describe('UAPI client (fake wireguard-go)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'uapi-test-'));
  const fake = new FakeWireGuardGo(dir, 'vp1');
  const client = new UapiClient({ socketDir: dir, timeoutMs: 300 });
  after(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a peer change is one set request: hex keys, removals and replaced allowed ips, in order', async () => {
    fake.requests.length = 0;
    await client.setPeers('vp1', [
      { publicKey: A.publicKey, remove: true },
      { publicKey: B.publicKey, allowedIps: '10.128.0.3/32,fd00::3/128' },
      { publicKey: A.publicKey, allowedIps: '' },
    ]);
    assert.deepEqual(fake.requests, [
      `set=1\npublic_key=${hex(A.publicKey)}\nremove=true\n` +
        `public_key=${hex(B.publicKey)}\nreplace_allowed_ips=true\nallowed_ip=10.128.0.3/32\nallowed_ip=fd00::3/128\n` +
        `public_key=${hex(A.publicKey)}\nreplace_allowed_ips=true\n\n`,
    ]);
  });

  test('the private key and port go in one set request, never as a process argument', async () => {
    fake.requests.length = 0;
    await client.setDevice('vp1', SERVER.privateKey, 51821);
    await client.setDevice('vp1', SERVER.privateKey);
    assert.deepEqual(fake.requests, [
      `set=1\nprivate_key=${hex(SERVER.privateKey)}\nlisten_port=51821\n\n`,
      `set=1\nprivate_key=${hex(SERVER.privateKey)}\n\n`,
    ]);
  });

  test('a refused change is a UapiError naming the errno', async () => {
    fake.reply = (_request, socket) => socket.end('errno=-22\n\n');
    const error = await client.setPeers('vp1', [{ publicKey: A.publicKey, remove: true }]).catch((e: unknown) => e);
    fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    assert.ok(error instanceof UapiError);
    assert.equal(error.errno, 22);
    assert.equal(error.message, 'wireguard-go vp1 refused the change: EINVAL (invalid argument)');
  });

  test('get parses the device as `wg show dump` would print it, whatever the chunks it arrives in', async () => {
    fake.reply = (_request, socket) => {
      // One byte a write: the blank line that ends the answer is split across chunks.
      const bytes = Buffer.from(GET_ANSWER, 'latin1');
      for (let i = 0; i < bytes.length; i++) socket.write(bytes.subarray(i, i + 1));
    };
    try {
      assert.deepEqual(await client.get('vp1'), EXPECTED_DUMP);
      const counters = await client.getCounters('vp1');
      assert.deepEqual(
        counters.peers,
        EXPECTED_DUMP.peers.map((p) => ({ ...p, allowedIps: '' })),
        'counter reads leave allowed ips out',
      );
    } finally {
      fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    }
    assert.equal(fake.requests.at(-1), 'get=1\n\n');
  });

  test('parseGet refuses a malformed or failed answer instead of returning a partial device', () => {
    assert.throws(() => parseGet(Buffer.from('private_key=zz\nerrno=0\n\n'), true), /malformed UAPI answer/);
    const notHex = `public_key=${'0'.repeat(63)}G\nerrno=0\n\n`;
    assert.throws(() => parseGet(Buffer.from(notHex), true), /malformed UAPI answer/);
    assert.throws(() => parseGet(Buffer.from('listen_port=51820\n'), true), /malformed UAPI answer/);
    assert.throws(
      () => parseGet(Buffer.from(`public_key=${hex(A.publicKey)}\ntx_bytes=12a\nerrno=0\n\n`), true),
      /malformed UAPI answer/,
    );
    assert.throws(() => parseGet(Buffer.from('errno=-5\n\n'), true), /could not read its device: EIO/);
  });

  test('a device without peers: a line shorter than a longer key is not read past its end', () => {
    // `listen_port=51822\n` is followed by `errno=0`, whose `=` is where last_handshake_time_sec's would be.
    const answer = `private_key=${hex(SERVER.privateKey)}\nlisten_port=51822\nerrno=0\n\n`;
    assert.deepEqual(parseGet(Buffer.from(answer), true), {
      privateKey: SERVER.privateKey,
      listenPort: 51822,
      peers: [],
    });
  });

  test('a malformed line fails the request at once, not at the timeout', async () => {
    fake.reply = (_request, socket) => socket.write('listen_port=51820\nnonsense\n');
    try {
      await assert.rejects(client.get('vp1'), /malformed UAPI answer: "nonsense"/);
    } finally {
      fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    }
  });

  test('a wireguard-go that never answers fails the request after the timeout; the agent does not hang', async () => {
    fake.reply = () => {};
    const startMs = performance.now();
    try {
      await assert.rejects(client.get('vp1'), /wireguard-go vp1 did not answer within 300 ms/);
    } finally {
      fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    }
    const tookMs = performance.now() - startMs;
    assert.ok(tookMs >= 290 && tookMs < 2000, `took ${tookMs} ms`);
  });

  test('a wireguard-go that closes the socket without answering (it exited) is a clear error', async () => {
    fake.reply = (_request, socket) => socket.destroy();
    try {
      await assert.rejects(client.get('vp1'), /wireguard-go vp1 closed .*vp1\.sock before it answered/);
    } finally {
      fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    }
  });

  test('no socket: the error says so, and answers() is false', async () => {
    await assert.rejects(client.get('vp9'), /cannot talk to wireguard-go vp9 at .*vp9\.sock: no such socket/);
    assert.equal(await client.answers('vp9'), false);
    assert.equal(await client.answers('vp1'), true);
  });

  test('a refused batch is retried peer by peer; only the refused peer is reported (shared with wg)', async () => {
    fake.requests.length = 0;
    // Refuses every request that names B.
    fake.reply = (request, socket) => socket.end(request.includes(hex(B.publicKey)) ? 'errno=-22\n\n' : 'errno=0\n\n');
    const failures: string[] = [];
    try {
      const config = new UapiConfig({ socketDir: dir, timeoutMs: 300 });
      const adds = [A, B].map((k, i) => ({ publicKey: k.publicKey, allowedIps: `10.128.0.${i + 2}/32` }));
      await applyPeers(config, { iface: 'vp1', netns: undefined }, { removes: [], adds }, failures);
    } finally {
      fake.reply = (_request, socket) => socket.end('errno=0\n\n');
    }
    assert.equal(fake.requests.length, 3, 'the batch, then each peer alone');
    assert.deepEqual(failures, [`peer ${B.publicKey}: wireguard-go vp1 refused the change: EINVAL (invalid argument)`]);
  });
});

// ---------------------------------------------------------------------------------------------
// (b) As root, a real wireguard-go: what UAPI reads equals what `wg show dump` prints, at 2,000 peers
// with both address families; a wireguard-go that is gone fails fast.
// ---------------------------------------------------------------------------------------------

const tools = ['wg', 'wireguard-go'].every((tool) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});
const skipReal =
  process.getuid?.() !== 0 ? 'needs root (a namespace, wireguard-go)' : !tools ? 'needs wg and wireguard-go' : false;

describe('UAPI against a real wireguard-go', { skip: skipReal }, () => {
  const name = `u${randomInt(36 ** 3)
    .toString(36)
    .padStart(3, '0')}x`;
  const netns = `${name}-n`;
  const iface = `${name}0`;
  const runner = new ExecRunner(CHILD_LOG_DIR);
  const uapi = new UapiConfig();
  const at = { iface, netns: undefined };
  let child: ChildHandle | undefined;

  before(async () => {
    execFileSync('ip', ['netns', 'add', netns]);
    child = runner.start('wireguard-go', ['-f', iface], {
      netns,
      env: { LOG_LEVEL: 'error', WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1' },
    });
    for (let i = 0; i < 250 && !(await uapi.answers(iface)); i++) await new Promise((r) => setTimeout(r, 20));
  });

  after(async () => {
    await child?.stop();
    execFileSync('ip', ['netns', 'del', netns]);
  });

  test('UAPI and `wg show dump` agree on key, port, peers, allowed ips and counters', async () => {
    await uapi.setDevice(at, SERVER.privateKey, 40000 + randomInt(20000));
    const adds = Array.from({ length: 2000 }, (_, i) => ({
      publicKey: generateKeyPair().publicKey,
      allowedIps: i % 3 === 0 ? '' : `10.90.${i >> 8}.${i & 255}/32,fd00:90::${i.toString(16)}/128`,
    }));
    const failures: string[] = [];
    await applyPeers(uapi, at, { removes: [], adds }, failures);
    await applyPeers(uapi, at, { removes: [adds[5]?.publicKey ?? ''], adds: [] }, failures);
    assert.deepEqual(failures, []);
    // `wg` sorts peers by last handshake; wireguard-go lists them in map order: the driver keys them by public key.
    const byKey = (dump: Dump): Dump => ({
      ...dump,
      peers: [...dump.peers].sort((x, y) => (x.publicKey < y.publicKey ? -1 : 1)),
    });
    const viaWg = byKey(parseDump(execFileSync('wg', ['show', iface, 'dump'], { encoding: 'utf8' })));
    assert.equal(viaWg.peers.length, 1999);
    assert.equal(viaWg.privateKey, SERVER.privateKey);
    assert.deepEqual(byKey(await uapi.read(at)), viaWg);
    assert.deepEqual(byKey(await new WgTool(runner).read(at)), viaWg);
    assert.deepEqual(
      byKey(await uapi.readCounters(at)).peers,
      viaWg.peers.map((p) => ({ ...p, allowedIps: '' })),
    );
  });

  test('once its wireguard-go has exited, a request fails at once with a clear error', async () => {
    await child?.stop();
    const startMs = performance.now();
    await assert.rejects(uapi.read(at), new RegExp(`cannot talk to wireguard-go ${iface}`));
    assert.ok(performance.now() - startMs < 1000);
    assert.equal(await uapi.answers(iface), false);
  });
});
