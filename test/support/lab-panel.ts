import type { TestDatabase } from './databases.ts';
import { type NetLab, sleep } from './netns.ts';
import { type ApiClient, type PanelProcess, startPanel } from './panel.ts';

/** The panel's env that makes its embedded node drive real WireGuard in the lab's host namespace. */
export function labNodeEnv(lab: NetLab): Record<string, string> {
  return { NODE_DRIVER: 'wireguard', NODE_NETNS: lab.hostNs, NODE_NAME_PREFIX: lab.prefix, PUBLIC_HOST: lab.hostIp };
}

export interface LabPanel {
  panel: PanelProcess;
  /** An API key with every scope and no rate limit. */
  key: string;
  api: ApiClient;
}

/** `vpn-panel serve` on `database` with its embedded node in the lab (`env` added), and a key for the test. */
export async function startLabPanel(
  lab: NetLab,
  database: TestDatabase,
  keyName: string,
  env: Record<string, string> = {},
): Promise<LabPanel> {
  const panel = await startPanel({ database, env: { ...labNodeEnv(lab), ...env } });
  const key = await panel.createKey(keyName, 'all', ['--no-rate-limit']);
  return { panel, key, api: panel.client(key) };
}

/**
 * The end of an e2e suite, pass or fail: stops the panel (SIGKILL if SIGTERM has not ended it within
 * 5 s), removes the lab and drops the database. Returns what went wrong or was left behind.
 */
export async function endLab(parts: { panel?: PanelProcess; lab?: NetLab; database?: TestDatabase }): Promise<string[]> {
  const problems: string[] = [];
  if (parts.panel !== undefined) {
    const panel = parts.panel;
    const exited = await Promise.race([panel.stop('SIGTERM').then(() => true), sleep(5000).then(() => false)]);
    if (!exited) {
      await panel.stop('SIGKILL');
      problems.push('vpn-panel serve did not exit within 5 s of SIGTERM; killed');
    }
  }
  if (parts.lab !== undefined) problems.push(...(await parts.lab.cleanup()));
  await parts.database?.drop();
  return problems;
}
