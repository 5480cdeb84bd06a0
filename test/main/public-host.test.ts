/**
 * PUBLIC_HOST (docs/configuration.md): a host name, an IPv4 or an IPv6 address, for the panel and the node.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadAgentConfig, loadPanelConfig } from '../../src/main/config.ts';

const AGENT = { AGENT_TOKEN: 'a-token-of-16-characters' };

describe('PUBLIC_HOST', () => {
  const accepted: Array<[given: string, stored: string]> = [
    ['vpn.example.com', 'vpn.example.com'],
    ['203.0.113.7', '203.0.113.7'],
    ['2001:db8::7', '2001:db8::7'],
    ['[2001:db8::7]', '2001:db8::7'],
    ['2001:DB8::7', '2001:DB8::7'],
  ];
  for (const [given, stored] of accepted) {
    it(`takes ${given} as ${stored}, for the panel and the node`, () => {
      assert.equal(loadPanelConfig({ PUBLIC_HOST: given }).publicHost, stored);
      assert.equal(loadAgentConfig({ ...AGENT, PUBLIC_HOST: given }).publicHost, stored);
    });
  }

  for (const given of [
    'vpn.example.com:51820',
    '[2001:db8::7]:51820',
    'https://vpn.example.com',
    '[vpn.example.com]',
  ]) {
    it(`refuses ${given} with the variable's name`, () => {
      assert.throws(
        () => loadPanelConfig({ PUBLIC_HOST: given }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, /^invalid configuration: PUBLIC_HOST must be a host name or an IPv4 or IPv6/);
          return true;
        },
      );
      assert.throws(() => loadAgentConfig({ ...AGENT, PUBLIC_HOST: given }), ConfigError);
    });
  }

  it('defaults to an address of the host', () => {
    const host = loadPanelConfig({}).publicHost;
    assert.ok(/^[0-9.]+$/.test(host) || /^[23][0-9a-f:]+$/.test(host), host);
  });
});
