/**
 * How the driver goes on past a failed step: each step's failure is recorded in a list, and the
 * DriverError at the end lists them (docs/dataplane.md).
 */
import { messageOf } from '../../domain/errors.ts';
import type { CommandRunner, RunOptions } from '../commands.ts';

/** A DriverError lists at most this many failures; the rest are counted. */
const MAX_REPORTED_FAILURES = 20;

/** Runs one command; false when it failed (the failure is recorded). */
export type Step = (cmd: string, args: readonly string[], opts?: RunOptions) => Promise<boolean>;

/** A step runner that records a failure in `failures` and returns false instead of throwing. */
export function stepper(runner: CommandRunner, failures: string[]): Step {
  return async (cmd, args, opts) => {
    try {
      await runner.run(cmd, args, opts);
      return true;
    } catch (error) {
      failures.push(messageOf(error));
      return false;
    }
  };
}

/** Runs one step that is not a command; false when it failed (the failure is recorded in `failures`). */
export async function attempt(failures: string[], work: () => Promise<unknown>): Promise<boolean> {
  try {
    await work();
    return true;
  } catch (error) {
    failures.push(messageOf(error));
    return false;
  }
}

/** The failures a DriverError lists: the first MAX_REPORTED_FAILURES, then how many more. */
export function collapse(failures: readonly string[]): string[] {
  if (failures.length <= MAX_REPORTED_FAILURES) return [...failures];
  return [...failures.slice(0, MAX_REPORTED_FAILURES), `… and ${failures.length - MAX_REPORTED_FAILURES} more`];
}
