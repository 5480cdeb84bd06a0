import { existsSync } from 'node:fs';
import { loadPanelConfig, type PanelConfig } from '../main/config.ts';
import { limitHeapGrowth } from '../main/memory.ts';
import { assemblePanel, type Panel } from '../main/panel.ts';
import { findLocalNode } from '../store/nodes.ts';
import { parseCommandArgs } from './usage.ts';

/** Runs the panel until SIGTERM or SIGINT, then drains in-flight requests and closes the database. */
export async function serveCommand(args: string[]): Promise<number> {
  parseCommandArgs(args, {});
  const config = loadPanelConfig(process.env);
  limitHeapGrowth(config.heapGrowingPercent);
  const panel = await assemblePanel(config);
  await panel.start();
  await logStartUp(panel, config);
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      panel.app.log.info({ signal }, 'stopping: draining requests');
      panel.stop().then(
        () => resolve(0),
        (error: unknown) => {
          panel.app.log.error({ err: error }, 'stop failed');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}

/**
 * What an operator needs first: where the API listens, whether the local node runs real tunnels
 * (its driver as the first node check recorded it), and the command that makes an API key.
 */
async function logStartUp(panel: Panel, config: PanelConfig): Promise<void> {
  const listen = panel.app
    .addresses()
    .map((a) =>
      typeof a === 'string' ? a : `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`,
    )
    .join(', ');
  const driver = config.localNode
    ? ((await findLocalNode(panel.store.db))?.driver ?? 'unknown')
    : 'none (LOCAL_NODE=off)';
  panel.app.log.info(
    { listen, driver },
    `panel ready: listening on ${listen} (API under /api/v1), local node driver ${driver}`,
  );
  const command = `${keyStore(config)}${cliName()} keys create --name NAME --scopes all`;
  panel.app.log.info({ command }, `make an API key with: ${command}`);
}

/** From a checkout's root (the quick start) the CLI is scripts/vpn-panel, which brings Node 24. */
function cliName(): string {
  return existsSync('scripts/vpn-panel') ? 'scripts/vpn-panel' : 'vpn-panel';
}

/** The CLI must open the panel's store: its DATA_DIR when set, or its DATABASE_URL (a secret, so not shown). */
function keyStore(config: PanelConfig): string {
  if (config.databaseUrl !== undefined) return 'DATABASE_URL=… ';
  return process.env.DATA_DIR === undefined ? '' : `DATA_DIR=${config.dataDir} `;
}
