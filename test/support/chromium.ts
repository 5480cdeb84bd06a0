/**
 * Debian's headless Chromium driven by playwright-core (its own browser downloads are not used), for the
 * browser tests. Chromium must be at /usr/bin/chromium (`apt-get install chromium`): when it is missing a
 * test file is skipped, except under CI (`CI` set), where that is a failure; a Chromium that is there but
 * does not start is always a failure. It only ever loads pages from 127.0.0.1: the flags keep it from
 * calling home, which this machine (and CI) refuses.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const chromiumMissing = !existsSync(CHROMIUM);

/** A browser test file's `skip`: the reason when Chromium is missing outside CI, else false. */
export const chromiumSkip: string | false =
  chromiumMissing && process.env.CI === undefined
    ? `needs Debian's Chromium at ${CHROMIUM}: apt-get install chromium`
    : false;

/** Starts Chromium, or fails saying why (missing under CI, or not starting). */
export async function launchChromium(): Promise<Browser> {
  if (chromiumMissing)
    throw new Error(`${CHROMIUM} is missing; CI must install Debian's chromium (apt-get install chromium)`);
  try {
    return await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, timeout: 30_000 });
  } catch (error) {
    throw new Error(
      `could not launch ${CHROMIUM} with playwright-core: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}
