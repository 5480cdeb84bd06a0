/**
 * Builds the operator console (console/src, Preact) into dist/console: index.html and hashed files under
 * assets/, each text file also written brotli- and gzip-compressed so the panel serves them as they are
 * (src/http/routes/console.ts). `npm run build:console`; `npm run dev:console` serves it with hot reload
 * and sends API calls to a panel on 127.0.0.1:8080.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

const COMPRESSIBLE = /\.(?:html|js|css|svg|json)$/;
const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/** Writes `name.br` and `name.gz` beside every text file of the bundle, at the strongest settings (done once). */
function precompress(): Plugin {
  return {
    name: 'vpn-panel-precompress',
    apply: 'build',
    async writeBundle(options, bundle) {
      const dir = options.dir ?? '';
      const files = Object.keys(bundle).filter((name) => COMPRESSIBLE.test(name));
      await Promise.all(
        files.map(async (name) => {
          const body = await readFile(join(dir, name));
          const params = { [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY };
          await writeFile(join(dir, `${name}.br`), await brotli(body, { params }));
          await writeFile(join(dir, `${name}.gz`), await gzipped(body, { level: 9 }));
        }),
      );
    },
  };
}

const PANEL = 'http://127.0.0.1:8080';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  publicDir: false,
  cacheDir: fileURLToPath(new URL('../dist/vite-cache', import.meta.url)),
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [precompress()],
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // Every asset a file of its own: nothing inlined as a data: URL the CSP would have to allow.
    assetsInlineLimit: 0,
    // Chromium, Firefox and Safari all preload modules; the polyfill would be dead weight.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  server: { proxy: { '/api': PANEL, '/console/session': PANEL } },
});
