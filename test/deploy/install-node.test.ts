/**
 * deploy/install-node.sh for real, as docs/operating.md "Installing a node on a VPS" has an operator run it:
 * on a fresh Debian 12 root (debian-root.ts), chrooted, in a mount namespace and a network namespace of its
 * own, whose only way out is a proxy to the package registries. systemd is not running there, so the
 * script starts the agent itself, with the unit's capability bounding set. The line it prints then
 * registers the node on a real panel (token on standard input), which deploys a WireGuard server on it.
 *
 *   root namespace: the test, its proxy and panel   NAME-h 10.31.X.(4K+1)/30
 *        │ veth
 *   namespace NAME: the chroot's agent on :7000     NAME-n 10.31.X.(4K+2)/30
 *
 * Root only; CI runs as root and this test fails there rather than skip.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/netns.ts';
import { callApi, type PanelProcess, ROOT, startPanel } from '../support/panel.ts';
import { cachedRoot, extractRoot, mountsUnder, removeRoot, rootEnv, run } from './debian-root.ts';
import { type RegistryProxy, startRegistryProxy } from './registry-proxy.ts';

const REGISTRIES = ['deb.debian.org:80', 'registry.npmjs.org:443'];
const TOOLS = ['debootstrap', 'systemd-analyze', 'unshare', 'nsenter', 'chroot', 'ip', 'tar'];
const CHECKOUT_IN_ROOT = '/root/vpn-panel';
const NODE_NAME = 'edge-1';
/** Bits of CAP_NET_BIND_SERVICE (10), CAP_NET_ADMIN (12), CAP_SYS_ADMIN (21): the unit's bounding set. */
const UNIT_CAPABILITIES = (1n << 10n) | (1n << 12n) | (1n << 21n);

function cannotRun(): string | false {
  if (process.getuid?.() !== 0) return 'needs root (debootstrap, chroot, network namespaces)';
  const path = (process.env.PATH ?? '').split(':');
  const missing = TOOLS.filter((tool) => !path.some((dir) => dir !== '' && existsSync(join(dir, tool))));
  return missing.length > 0 ? `needs ${missing.join(', ')} (bash scripts/install-packages.sh ci)` : false;
}
const reason = cannotRun();
const skip = reason !== false && process.env.CI === undefined ? reason : false;

interface Namespace {
  name: string;
  hostIp: string;
  nodeIp: string;
}

async function makeNamespace(): Promise<Namespace> {
  const name = `vd${Math.random().toString(36).slice(2, 8)}`;
  const block = `10.31.${Math.floor(Math.random() * 256)}`;
  const base = 4 * Math.floor(Math.random() * 64);
  const ns = { name, hostIp: `${block}.${base + 1}`, nodeIp: `${block}.${base + 2}` };
  await run('ip', ['netns', 'add', name]);
  await run('ip', ['link', 'add', `${name}-h`, 'type', 'veth', 'peer', 'name', `${name}-n`, 'netns', name]);
  await run('ip', ['addr', 'add', `${ns.hostIp}/30`, 'dev', `${name}-h`]);
  await run('ip', ['link', 'set', `${name}-h`, 'up']);
  await run('ip', ['-n', name, 'addr', 'add', `${ns.nodeIp}/30`, 'dev', `${name}-n`]);
  await run('ip', ['-n', name, 'link', 'set', `${name}-n`, 'up']);
  await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  return ns;
}

/** Every process whose root directory is `root`: what the chroot started, agent and children. */
function processesIn(root: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/root`) === root;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

async function endProcessesIn(root: string): Promise<void> {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    for (const pid of processesIn(root)) process.kill(pid, signal);
    await waitFor(
      `the processes in ${root} to end`,
      async () => (processesIn(root).length === 0 ? true : undefined),
      10_000,
      100,
    ).catch(() => {});
  }
}

/**
 * The test host: the namespace, and a mount namespace of its own in which the root has /proc, /sys and
 * /dev, held by a process that sleeps (every later process joins both). Its mounts end with the last
 * process in it.
 */
async function holdRoot(root: string, ns: Namespace): Promise<ChildProcess> {
  const mount = [
    // A host's / is a mount point, which `ip netns exec` needs (it makes it a slave).
    'mount --bind "$1" "$1"',
    'mount -t proc proc "$1/proc"',
    'mount --rbind /sys "$1/sys"',
    'mount --rbind /dev "$1/dev"',
    'echo ready',
    'exec sleep infinity',
  ].join(' && ');
  const argv = [
    'netns',
    'exec',
    ns.name,
    'unshare',
    '--mount',
    '--propagation',
    'private',
    'bash',
    '-c',
    mount,
    'bash',
    root,
  ];
  const holder = spawn('ip', argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(holder.stdout, 'data');
  assert.equal(String(line).trim(), 'ready');
  return holder;
}

/** Runs install-node.sh in the held root as a user would (`bash deploy/install-node.sh`); registries via the proxy. */
function installNode(
  root: string,
  holder: ChildProcess,
  proxy: RegistryProxy,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = rootEnv({ http_proxy: proxy.url, https_proxy: proxy.url });
  const script = ['bash', `${CHECKOUT_IN_ROOT}/deploy/install-node.sh`, '--name', NODE_NAME];
  const argv = ['-t', String(holder.pid), '-m', '-n', '--', 'chroot', root, 'env', '-i', ...env, ...script];
  const child = spawn('nsenter', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return once(child, 'close').then(([code]) => ({ code: typeof code === 'number' ? code : null, stdout, stderr }));
}

/** `vpn-panel ARGS` against the panel's database, with `input` on standard input. */
async function cliWithInput(
  panel: PanelProcess,
  args: readonly string[],
  input: string,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'vpn-panel.js'), ...args], {
    env: { ...process.env, ...panel.env },
    cwd: ROOT,
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  child.stdin.end(input);
  const [code] = await once(child, 'close');
  return { code: typeof code === 'number' ? code : null, output };
}

function capabilities(pid: number): { effective: bigint; bounding: bigint; noNewPrivs: string | undefined } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)$`, 'm').exec(status)?.[1];
  return {
    effective: BigInt(`0x${field('CapEff')}`),
    bounding: BigInt(`0x${field('CapBnd')}`),
    noNewPrivs: field('NoNewPrivs'),
  };
}

describe('deploy/install-node.sh on a fresh Debian 12 root', { skip }, () => {
  let root: string | undefined;
  let ns: Namespace | undefined;
  let proxy: RegistryProxy | undefined;
  let holder: ChildProcess | undefined;
  let database: TestDatabase | undefined;
  let panel: PanelProcess | undefined;

  before(
    async () => {
      if (reason !== false) throw new Error(`${reason}; CI must run this test`);
      const cached = await cachedRoot();
      const started = Date.now();
      root = await extractRoot(cached.tarball);
      const exclude = ['./node_modules', './.git', './data', './test-output'].map((dir) => `--exclude=${dir}`);
      await run('bash', [
        '-c',
        `mkdir -p "$2$3" && tar -C "$1" ${exclude.join(' ')} -cf - . | tar -C "$2$3" -xf -`,
        'bash',
        ROOT,
        root,
        CHECKOUT_IN_ROOT,
      ]);
      ns = await makeNamespace();
      proxy = await startRegistryProxy(ns.hostIp, REGISTRIES);
      holder = await holdRoot(root, ns);
      const built = cached.builtInSeconds === null ? 'cached' : `built in ${cached.builtInSeconds} s`;
      process.stderr.write(
        `# Debian root ${built}, extracted and checkout copied in ${Math.round((Date.now() - started) / 1000)} s\n`,
      );
    },
    { timeout: 30 * 60_000 },
  );

  after(async () => {
    const problems: string[] = [];
    await panel?.stop();
    await database?.drop();
    if (root !== undefined) {
      await endProcessesIn(root);
      const left = processesIn(root);
      if (left.length > 0) problems.push(`processes left in the root: ${left.join(', ')}`);
    }
    if (holder !== undefined && holder.exitCode === null && holder.signalCode === null) {
      const ended = once(holder, 'exit');
      holder.kill('SIGKILL');
      await ended;
    }
    await proxy?.close();
    if (ns !== undefined) {
      await run('ip', ['netns', 'del', ns.name]).catch((error: unknown) => problems.push(String(error)));
      await run('ip', ['link', 'del', `${ns.name}-h`]).catch(() => {}); // gone with the namespace
    }
    if (root !== undefined) {
      if (mountsUnder(root).length > 0) problems.push(`still mounted: ${mountsUnder(root).join(', ')}`);
      else removeRoot(root);
    }
    assert.deepEqual(problems, []);
  });

  const installs =
    'installs the agent, which answers over TLS with the certificate and token it printed; ' +
    'the printed line adds it to a panel that deploys a WireGuard server on it';
  it(installs, {
    timeout: 10 * 60_000,
  }, async () => {
    assert.ok(root !== undefined && ns !== undefined && proxy !== undefined && holder !== undefined);
    const started = Date.now();
    const install = await installNode(root, holder, proxy);
    const seconds = Math.round((Date.now() - started) / 1000);
    process.stderr.write(`# install-node.sh took ${seconds} s\n`);
    assert.equal(install.code, 0, `install-node.sh failed:\n${install.stdout}\n${install.stderr}`);
    assert.deepEqual(proxy.refused, [], 'the install reached for something other than the package registries');
    // This root has no Go toolchain: the node is installed for WireGuard, and one line says what AmneziaWG needs.
    assert.match(
      `${install.stdout}\n${install.stderr}`,
      /^go-tools: no `go` command.*AmneziaWG servers need amneziawg-go/m,
    );

    const add = /^ {2}vpn-panel (nodes add --name \S+ --url (\S+) --cert-sha256 ([0-9A-F]{64}))$/m.exec(install.stdout);
    assert.ok(add, `no nodes add line in:\n${install.stdout}`);
    const [, addArgs = '', url, fingerprint] = add;
    assert.equal(url, `https://${ns.nodeIp}:7000`, 'the URL names the first global IPv4 and the default port');
    const token = /shown only now.*:\n\n {2}([0-9a-f]{64})$/m.exec(install.stdout)?.[1];
    assert.ok(token, `no token in:\n${install.stdout}`);
    assert.ok(!addArgs.includes(token), 'the token stays out of the nodes add command');

    // Kept root only, and the agent runs with the unit's capabilities and no new privileges.
    const envFile = join(root, 'etc', 'vpn-panel', 'node.env');
    assert.equal(statSync(envFile).mode & 0o777, 0o600);
    assert.match(readFileSync(envFile, 'utf8'), new RegExp(`^AGENT_TOKEN=${token}$`, 'm'));
    assert.equal(statSync(join(root, 'var', 'lib', 'vpn-panel-node')).mode & 0o777, 0o700);
    const pid = Number(readFileSync(join(root, 'run', 'vpn-panel-node.pid'), 'utf8'));
    assert.ok(processesIn(root).includes(pid), 'the pid file names the running agent');
    const caps = capabilities(pid);
    assert.equal(caps.bounding, UNIT_CAPABILITIES);
    assert.equal(caps.effective, UNIT_CAPABILITIES);
    assert.equal(caps.noNewPrivs, '1');

    // The printed line, run on a panel as docs/operating.md "Installing a node on a VPS" says, with the token on
    // standard input.
    database = await createTestDatabase('sqlite');
    panel = await startPanel({ database, env: { LOCAL_NODE: 'off' } });
    const key = await panel.createKey('deploy', 'all', ['--no-rate-limit']);
    const added = await cliWithInput(panel, addArgs.split(' '), `${token}\n`);
    assert.equal(added.code, 0, added.output);
    const node = await waitFor(
      'the installed node to be online',
      async () => {
        const nodes = (await callApi(panel?.url ?? '', key, 'GET', '/nodes')).expect(200);
        return nodes.data.find((n) => n.name === NODE_NAME && n.status === 'online');
      },
      20_000,
      250,
    );
    assert.equal(node.driver, 'wireguard');
    assert.deepEqual(node.protocols, ['wireguard'], 'no amneziawg-go, no AmneziaWG');
    const awg = await callApi(panel.url, key, 'POST', '/servers', {
      name: 'msk-1',
      node_id: node.id,
      protocol: 'amneziawg',
    });
    assert.equal(awg.status, 422, JSON.stringify(awg.json));
    assert.match(awg.error?.message ?? '', new RegExp(`${NODE_NAME}.*AmneziaWG`), 'the refusal names the node');
    assert.equal(node.public_host, ns.nodeIp);
    const server = (await callApi(panel.url, key, 'POST', '/servers', { name: 'fra-1', node_id: node.id })).expect(201);
    assert.equal(server.status, 'running');

    // Run again (an upgrade): the token and certificate stay, the agent answers again.
    const againStarted = Date.now();
    const again = await installNode(root, holder, proxy);
    process.stderr.write(`# install-node.sh again took ${Math.round((Date.now() - againStarted) / 1000)} s\n`);
    assert.equal(again.code, 0, `the second run failed:\n${again.stdout}\n${again.stderr}`);
    assert.match(again.stdout, /token is unchanged/);
    assert.ok(!again.stdout.includes(token), 'the token is shown only once');
    assert.ok(again.stdout.includes(`--cert-sha256 ${fingerprint}`));
    const newPid = Number(readFileSync(join(root, 'run', 'vpn-panel-node.pid'), 'utf8'));
    assert.notEqual(newPid, pid, 'the agent was restarted');
    assert.ok(!processesIn(root).includes(pid), 'the old agent is gone');
  });

  it('the units pass systemd-analyze verify against the installed root', { timeout: 60_000 }, async () => {
    assert.ok(root !== undefined);
    const units = ['vpn-panel-node.service', 'vpn-panel.service'];
    await run('bash', ['-c', 'cp "$1"/deploy/*.service "$2/etc/systemd/system/"', 'bash', ROOT, root]);
    const verify = spawn('systemd-analyze', ['verify', `--root=${root}`, ...units], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    verify.stdout.on('data', (d: Buffer) => (output += d.toString()));
    verify.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const [code] = await once(verify, 'close');
    assert.equal(code, 0, output);
    assert.equal(output, '', 'no warning either (an unknown or misspelt setting is only a warning)');
  });
});
