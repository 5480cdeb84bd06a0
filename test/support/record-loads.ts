/**
 * Preloaded with `node --import` by test/architecture/imports.test.ts: appends the URL of every module the
 * process loads (ES modules and `require`s, ours and packages') to the file in RECORD_LOADS_FILE.
 */
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const file = process.env.RECORD_LOADS_FILE;
if (file === undefined) throw new Error('RECORD_LOADS_FILE names the file to record loaded modules in');
registerHooks({
  load(url, context, nextLoad) {
    appendFileSync(file, `${url}\n`);
    return nextLoad(url, context);
  },
});
