/**
 * sdk/python (`vpn-panel`, import `vpn_panel`): its pytest tests (sdk/python/tests) against a live panel, and its
 * models are what the pinned generator makes of the served document today. The venv is scripts/sdk-tools.sh's
 * (the `ci` group of scripts/install-packages.sh makes it); without it the tests skip, except in CI.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PYTHON_VENV, pythonFile } from '../../sdk/tools/generate.ts';
import { openApiDocument } from '../../src/main/openapi.ts';
import { ROOT } from '../support/panel.ts';
import { missingToolchain, runSdkTests, type SdkPanel, startSdkPanel } from '../support/sdk-panel.ts';

const PYTHON = join(PYTHON_VENV, 'bin/python');
const skip = missingToolchain(existsSync(PYTHON) ? undefined : 'sdk/python/.venv (bash scripts/sdk-tools.sh)');

describe('the Python SDK against a live panel', { skip, timeout: 120_000 }, () => {
  let live: SdkPanel;

  before(async () => {
    live = await startSdkPanel();
  });
  after(() => live.stop());

  it('passes pytest: pages, ApiError name_taken, 80 reads past the rate limit, webhooks, each namespace', async () => {
    const args = ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests'];
    const { code, output } = await runSdkTests(live, PYTHON, args, join(ROOT, 'sdk/python'));
    assert.equal(code, 0, output);
    assert.match(output, /\d+ passed/, output);
    assert.doesNotMatch(output, /skipped|failed/, output);
  });

  it('is generated from the served document: regenerating changes nothing (npm run gen:sdk)', async () => {
    const file = pythonFile(await openApiDocument());
    assert.equal(readFileSync(join(ROOT, file.path), 'utf8'), file.text, `${file.path} is stale: npm run gen:sdk`);
  });
});
