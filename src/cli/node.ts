import { readFileSync } from 'node:fs';
import { buildAgentApp } from '../agent/http.ts';
import { loadAgentConfig } from '../main/config.ts';
import { createLogger } from '../main/logging.ts';
import { makeAgent } from '../main/node-driver.ts';
import { VERSION } from '../main/panel.ts';
import { parseCommandArgs } from './usage.ts';

/** `vpn-panel node`: the agent alone on a VPN host, until SIGTERM or SIGINT. */
export async function nodeCommand(args: string[]): Promise<number> {
  parseCommandArgs(args, {});
  const config = loadAgentConfig(process.env);
  const log = createLogger(config.logLevel);
  const agent = await makeAgent(config, log, VERSION);
  const app = await buildAgentApp({
    agent,
    token: config.token,
    logger: log,
    https: config.tls && { cert: readFileSync(config.tls.certFile), key: readFileSync(config.tls.keyFile) },
  });
  await app.listen({ port: config.port, host: config.host });
  agent.start((err: unknown) => log.error({ err }, 'usage metering failed'));
  log.info({ driver: agent.driverKind, publicHost: config.publicHost }, 'node agent ready');
  return new Promise((resolve) => {
    const stop = () => {
      Promise.all([app.close(), agent.stop()]).then(
        () => resolve(0),
        () => resolve(1),
      );
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}
