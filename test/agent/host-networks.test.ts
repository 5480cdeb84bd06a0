import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { describe, test } from 'node:test';
import { Agent } from '../../src/agent/agent.ts';
import { RecordingRunner } from '../../src/agent/commands.ts';
import { DryRunDriver } from '../../src/agent/dry-run-driver.ts';
import { WireGuardDriver } from '../../src/agent/wireguard/driver.ts';
import { AgentStatusSchema } from '../../src/agent/protocol.ts';
import Value from 'typebox/value';

const inet = (local: string, prefixlen: number) => ({
  family: local.includes(':') ? 'inet6' : 'inet',
  local,
  prefixlen,
});

/** `ip -j addr show` of a host with a public uplink, a private LAN and a server's veth end. */
const IP_ADDR = JSON.stringify([
  { ifname: 'lo', flags: ['UP'], addr_info: [inet('127.0.0.1', 8), inet('::1', 128)] },
  { ifname: 'eth0', flags: ['UP'], addr_info: [inet('192.0.2.2', 24), inet('fd00::2', 64)] },
  { ifname: 'eth1', flags: ['UP'], addr_info: [inet('10.0.5.7', 24)] },
  { ifname: 'vp1h', flags: ['UP'], addr_info: [inet('169.254.1.5', 30)] },
  { ifname: 'eth2', flags: [], addr_info: [] },
]);
const ALL = ['127.0.0.1/8', '::1/128', '192.0.2.2/24', 'fd00::2/64', '10.0.5.7/24', '169.254.1.5/30'];
const driverOn = (runner: RecordingRunner) =>
  new WireGuardDriver({ runner, hostNetns: 'hh', implementation: 'kernel' });

describe("the node's own networks", () => {
  test('the WireGuard driver reads every address of the host namespace with its prefix', async () => {
    const runner = new RecordingRunner().on('ip -n hh -j addr show', { stdout: IP_ADDR });
    assert.deepEqual(await driverOn(runner).hostNetworks(), ALL);
  });

  test('a host whose links cannot be read is an error, not "no networks"', async () => {
    const runner = new RecordingRunner().on('ip -n hh -j addr show', { exitCode: 1, stderr: 'Cannot open netns' });
    await assert.rejects(driverOn(runner).hostNetworks());
  });

  test("the dry-run driver reports the machine's interfaces", async () => {
    const expected = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.cidr));
    assert.deepEqual(await new DryRunDriver().hostNetworks(), expected);
    assert.ok(expected.includes('127.0.0.1/8'), 'loopback at least');
  });

  test("the agent's status carries them, and leaves them out when the host cannot be read", async () => {
    const runner = new RecordingRunner().on('ip -n hh -j addr show', { stdout: IP_ADDR });
    const status = await new Agent(driverOn(runner), 'test').status();
    assert.ok(Value.Check(AgentStatusSchema, status));
    assert.deepEqual(status.networks, ALL);
    const broken = new RecordingRunner().on('ip -n hh -j addr show', { exitCode: 1 });
    const without = await new Agent(driverOn(broken), 'test').status();
    assert.equal(without.networks, undefined);
    assert.ok(Value.Check(AgentStatusSchema, without), 'still a valid status: the heartbeat goes on');
  });
});
