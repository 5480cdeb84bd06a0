import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClientConfigInput, renderClientConfig } from '../../src/domain/client-config.ts';
import { renderQrPng } from '../../src/http/qr.ts';
import { decodeQr, needsTool } from '../support/tools.ts';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The largest usual device: a long host name and four DNS servers. */
const device: ClientConfigInput = {
  privateKey: '4GvL+KavliU97SqGoE2o4qms21A1d4nclaFtqkT+AWg=',
  address: '10.255.255.254',
  dns: ['1.1.1.1', '1.0.0.1', '2606:4700:4700::1111', '2606:4700:4700::1001'],
  mtu: 1420,
  serverPublicKey: '/Mtte4Rgjc92DTSiL3XYyYDqgk3hRGigILdIjPbgs1Q=',
  clientAllowedIps: ['0.0.0.0/0', '::/0'],
  endpoint: 'vpn-frankfurt-01.eu-central.example.com',
  listenPort: 51820,
  persistentKeepalive: 25,
};

test('the QR code is a PNG', async () => {
  const png = await renderQrPng(renderClientConfig(device, { killSwitch: false }));
  assert.deepEqual(png.subarray(0, PNG_SIGNATURE.length), PNG_SIGNATURE);
});

describe('the QR code decodes to exactly the config text', { skip: needsTool('zbarimg', 'zbar-tools') }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'qr-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const cases: Array<[intent: string, text: string]> = [
    [
      'a short config (no DNS, no keepalive)',
      renderClientConfig(
        { ...device, dns: [], persistentKeepalive: 0, endpoint: '203.0.113.7' },
        { killSwitch: false },
      ),
    ],
    ['a full config', renderClientConfig(device, { killSwitch: false })],
    ['a client-made key', renderClientConfig({ ...device, privateKey: null }, { killSwitch: false })],
    ['the kill switch, the longest text', renderClientConfig(device, { killSwitch: true })],
  ];
  for (const [index, [intent, text]] of cases.entries()) {
    test(intent, async () => {
      const path = join(dir, `${index}.png`);
      writeFileSync(path, await renderQrPng(text));
      // zbarimg's newline after the config's own trailing one.
      assert.equal(decodeQr(path), `${text}\n`);
    });
  }
});
