import { type AgentCertificate, loadCertificate, loadOrCreateAgentCertificate } from '../agent/certificate.ts';
import { buildAgentApp } from '../agent/http.ts';
import { type AgentConfig, loadAgentConfig } from '../main/config.ts';
import { createLogger } from '../main/logging.ts';
import { limitHeapGrowth } from '../main/memory.ts';
import { MetricsEndpoint, NodeMetrics } from '../main/metrics.ts';
import { makeAgent } from '../main/node-driver.ts';
import { VERSION } from '../main/version.ts';
import { parseCommandArgs } from './usage.ts';

/** `vpn-panel node`: the agent alone on a VPN host, until SIGTERM or SIGINT. */
export async function nodeCommand(args: string[]): Promise<number> {
  parseCommandArgs(args, {});
  const config = loadAgentConfig(process.env);
  limitHeapGrowth(config.heapGrowingPercent);
  const log = createLogger(config.logLevel);
  const certificate = agentCertificate(config);
  if (certificate?.created) log.info({ certFile: certificate.certFile }, 'made a key and self-signed certificate');
  const metrics = config.metrics && new MetricsEndpoint(config.metrics);
  const agent = await makeAgent(config, log, VERSION, metrics && new NodeMetrics(metrics.registry));
  const https = certificate && { cert: certificate.cert, key: certificate.key };
  const app = await buildAgentApp({ agent, token: config.token, logger: log, https });
  await metrics?.listen(log);
  await app.listen({ port: config.port, host: config.host });
  agent.start((err: unknown) => log.error({ err }, 'usage metering failed'));
  const tls = certificate ? { certSha256: certificate.sha256 } : { tls: 'off' };
  const pin = certificate ? `; pin it with nodes add --cert-sha256 ${certificate.sha256}` : ' (plain HTTP)';
  log.info({ driver: agent.driverKind, publicHost: config.publicHost, ...tls }, `node agent ready${pin}`);
  return new Promise((resolve) => {
    const stop = () => {
      Promise.all([app.close(), agent.stop(), metrics?.close()]).then(
        () => resolve(0),
        () => resolve(1),
      );
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}

/** The certificate the agent serves: the configured files, else its own in DATA_DIR; none with AGENT_TLS=off. */
function agentCertificate(config: AgentConfig): AgentCertificate | undefined {
  switch (config.tls.kind) {
    case 'off':
      return undefined;
    case 'files':
      return loadCertificate(config.tls.certFile, config.tls.keyFile);
    case 'self-signed':
      return loadOrCreateAgentCertificate(config.dataDir, config.publicHost, new Date());
  }
}
