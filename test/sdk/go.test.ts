/**
 * sdk/go (package `vpnpanel`): its `go test` tests (sdk/go/live_test.go) against a live panel, and its types are what
 * the pinned oapi-codegen makes of the served document today (through the Go module proxy). Without a `go` command
 * the tests skip, except in CI.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { goFile } from '../../sdk/tools/generate.ts';
import { openApiDocument } from '../../src/main/openapi.ts';
import { ROOT } from '../support/panel.ts';
import { missingToolchain, runSdkTests, type SdkPanel, startSdkPanel } from '../support/sdk-panel.ts';

function hasGo(): boolean {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const skip = missingToolchain(hasGo() ? undefined : 'go command (Go 1.26)');

describe('the Go SDK against a live panel', { skip, timeout: 120_000 }, () => {
  let live: SdkPanel;

  before(async () => {
    live = await startSdkPanel();
  });
  after(() => live.stop());

  it('passes go test: pages, ApiError name_taken, 80 reads past the rate limit, webhooks, each namespace', async () => {
    const { code, output } = await runSdkTests(live, 'go', ['test', '-count=1', '-v', './...'], join(ROOT, 'sdk/go'));
    assert.equal(code, 0, output);
    const names = ['Lists60Devices', 'DuplicateNameIsApiError', '80QuickReads', 'WebhookFromThePanel', 'ReachesEvery'];
    for (const name of names) {
      assert.match(output, new RegExp(`^--- PASS: Test${name}`, 'm'), output);
    }
    assert.doesNotMatch(output, /^--- (SKIP|FAIL)/m, output);
  });

  it('is generated from the served document: regenerating changes nothing (npm run gen:sdk)', async () => {
    const file = goFile(await openApiDocument());
    assert.equal(readFileSync(join(ROOT, file.path), 'utf8'), file.text, `${file.path} is stale: npm run gen:sdk`);
  });
});
