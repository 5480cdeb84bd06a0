import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { Agent } from '../agent/agent.ts';
import type { Driver } from '../agent/driver.ts';
import { DryRunDriver } from '../agent/dry-run-driver.ts';
import { JournalFile, UsageLedger } from '../agent/usage-ledger.ts';
import { preparePrivateDir } from '../platform/private-files.ts';
import type { NodeObserver } from '../agent/metrics.ts';
import { ConfigError, type NodeDriverConfig } from './config.ts';

/** What a node keeps on disk: its usage journal and its children's logs (`children/`), under DATA_DIR. */
type NodeFilesConfig = NodeDriverConfig & { dataDir: string };

/**
 * The driver a node runs: `wireguard` when asked or when `auto` finds the process may run it,
 * otherwise `dry-run` with one clear warning (the API works, no tunnel carries traffic).
 */
export async function makeDriver(config: NodeFilesConfig, log: FastifyBaseLogger): Promise<Driver> {
  if (config.nodeDriver === 'dry-run') return new DryRunDriver();
  // The WireGuard driver's modules are loaded only here: a dry-run node never runs them.
  const [{ ExecRunner }, { canRunWireGuard, describeDataplane }, { WireGuardDriver }] = await Promise.all([
    import('../agent/commands.ts'),
    import('../agent/wireguard/capabilities.ts'),
    import('../agent/wireguard/driver.ts'),
  ]);
  const runner = new ExecRunner(join(config.dataDir, 'children'));
  const check = await canRunWireGuard(runner);
  const wireguard = () =>
    new WireGuardDriver({
      runner,
      namePrefix: config.nodeNamePrefix,
      hostNetns: config.nodeNetns,
      implementation: check.ok ? check.implementation : undefined,
      amneziawg: check.ok && check.amneziawgGo !== null,
      allowCidrs: config.nodeAllowCidrs,
    });
  if (check.ok) {
    log.info(describeDataplane(check));
    return wireguard();
  }
  if (config.nodeDriver === 'wireguard')
    throw new ConfigError('NODE_DRIVER', `is wireguard, but this process cannot run WireGuard: ${check.reason}`);
  log.warn(
    `NODE_DRIVER=auto: WireGuard cannot run here (${check.reason}); ` +
      'using the dry-run driver: the API works but no tunnel carries traffic',
  );
  return new DryRunDriver();
}

/** A node's agent: its driver, its usage journal in `dataDir` so usage survives restarts, and its metrics if any. */
export async function makeAgent(
  config: NodeFilesConfig,
  log: FastifyBaseLogger,
  version: string,
  observer: NodeObserver | undefined,
): Promise<Agent> {
  preparePrivateDir(config.dataDir);
  const ledger = new UsageLedger(new JournalFile(join(config.dataDir, 'node-usage-journal.json')));
  return new Agent(await makeDriver(config, log), version, { ledger, observer });
}
