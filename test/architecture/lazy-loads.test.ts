/**
 * A panel's resident memory starts with the code it loads (issue 16 item 5, docs/benchmarks.md "Loading less"):
 * packages a panel may never use are loaded where they are first used, and the CLI's commands that only open the
 * store do not load the panel. Each case loads a module in its own process and lists what that loaded.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The files that importing `module` loads: ours relative to the checkout (`src/http/app.ts`), packages' from their
 * `node_modules/` on (node_modules may be a link to another checkout's).
 */
async function loadedBy(module: string): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'vpn-panel-lazy-'));
  try {
    const record = join(dir, 'loaded.txt');
    const hook = fileURLToPath(new URL('../support/record-loads.ts', import.meta.url));
    const code = `await import(${JSON.stringify(pathToFileURL(join(ROOT, module)).href)});`;
    await new Promise<void>((done, fail) => {
      const env = { ...process.env, RECORD_LOADS_FILE: record, METRICS_PORT: '0' };
      const args = ['--import', hook, '--input-type=module', '-e', code];
      execFile(process.execPath, args, { env, cwd: ROOT }, (error) => (error ? fail(error) : done()));
    });
    return readFileSync(record, 'utf8')
      .split('\n')
      .filter((url) => url.startsWith('file:'))
      .map((url) => {
        const path = fileURLToPath(url);
        const inPackage = path.lastIndexOf('/node_modules/');
        return inPackage === -1 ? relative(ROOT, path) : path.slice(inPackage + 1);
      });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const under = (files: string[], prefixes: readonly string[]) =>
  files.filter((file) => prefixes.some((prefix) => file.startsWith(prefix)));

describe('what loading a module loads', () => {
  it('src/main/panel.ts loads no Redis client, mail, HTTP client, QR code or WireGuard driver', async () => {
    const files = await loadedBy('src/main/panel.ts');
    assert.ok(files.includes('src/http/app.ts'), 'the panel and its HTTP server were loaded');
    const lazy = ['ioredis', 'nodemailer', 'undici', 'qrcode'].map((name) => `node_modules/${name}/`);
    const loaded = under(files, [...lazy, 'src/agent/wireguard/driver.ts']);
    assert.deepEqual(loaded, [], `loaded before their first use:\n  ${loaded.join('\n  ')}`);
  });

  it("src/main/store.ts (the CLI's store commands) loads neither the panel nor its HTTP server", async () => {
    const files = await loadedBy('src/main/store.ts');
    assert.ok(files.includes('src/store/open.ts'), 'the store was loaded');
    const loaded = under(files, ['src/main/panel.ts', 'src/http/', 'src/workers/', 'node_modules/fastify/']);
    assert.deepEqual(loaded, [], `the store loaded:\n  ${loaded.join('\n  ')}`);
  });
});
