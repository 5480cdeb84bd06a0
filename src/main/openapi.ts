import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPanelConfig } from './config.ts';
import { assemblePanel } from './panel.ts';

/** The OpenAPI document of this code, from a panel wired on a throwaway database; nothing listens. */
export async function openApiDocument(): Promise<unknown> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vpn-panel-openapi-'));
  const panel = await assemblePanel(
    loadPanelConfig({ DATA_DIR: dataDir, NODE_DRIVER: 'dry-run', LOG_LEVEL: 'silent', PUBLIC_HOST: '192.0.2.1' }),
  );
  try {
    await panel.app.ready();
    return panel.app.swagger();
  } finally {
    await panel.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
