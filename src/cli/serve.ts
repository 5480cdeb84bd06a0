import { loadPanelConfig } from '../main/config.ts';
import { assemblePanel } from '../main/panel.ts';
import { parseCommandArgs } from './usage.ts';

/** Runs the panel until SIGTERM or SIGINT, then drains in-flight requests and closes the database. */
export async function serveCommand(args: string[]): Promise<number> {
  parseCommandArgs(args, {});
  const panel = await assemblePanel(loadPanelConfig(process.env));
  await panel.start();
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
