/**
 * AmneziaWG servers through the API (issue 24 items 3 and 4): the protocol and its parameters, drawn or given and
 * checked; placement on a node that runs it; PATCH of the parameters (the node gets them, the configs change, an
 * event says so); the configs, the share page and moves between the two kinds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { headerRange, type Obfuscation } from '../../src/domain/protocols.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { FakeAgent } from '../support/fake-agent.ts';
import { type ApiCall, callApi, type PanelProcess, startPanel } from '../support/panel.ts';

/** The rules a client needs of a whole set (docs/decisions.md "AmneziaWG servers"). */
function assertUsable(o: Obfuscation): void {
  assert.ok(o.jmin <= o.jmax && o.jmax <= 1280, `jmin ${o.jmin} <= jmax ${o.jmax} <= 1280`);
  assert.notEqual(o.s1 + 56, o.s2, 'the two handshakes differ in size');
  const ranges = [o.h1, o.h2, o.h3, o.h4].map((h) => headerRange(h));
  for (const [i, range] of ranges.entries()) {
    assert.ok(range !== undefined && range[0] >= 5, `h${i + 1} ${JSON.stringify(range)} is none of 1-4`);
    for (const other of ranges.slice(i + 1)) {
      assert.ok(other !== undefined && (other[1] < range[0] || range[1] < other[0]), 'the headers never overlap');
    }
  }
}

/** A server's parameters, which an AmneziaWG server has. */
function paramsOf(server: { obfuscation: Obfuscation | null }): Obfuscation {
  assert.ok(server.obfuscation !== null, 'an AmneziaWG server has obfuscation');
  return server.obfuscation;
}

describe('AmneziaWG servers', () => {
  let db: TestDatabase;
  let panel: PanelProcess;
  let agent: FakeAgent;
  let key: string;
  let remoteId = 0;
  const call: ApiCall = (method, path, body) => callApi(panel.url, key, method, path, body);
  const serverCount = async () => (await call('GET', '/servers?limit=200')).expect(200).data.length as number;
  const configOf = async (deviceId: number) => (await call('GET', `/devices/${deviceId}`)).expect(200).config as string;

  before(async () => {
    db = await createTestDatabase('sqlite');
    agent = new FakeAgent();
    await agent.start();
    panel = await startPanel({ database: db });
    const added = await panel.cli(['nodes', 'add', '--name', 'fra-1', '--url', agent.url, '--token', agent.token]);
    assert.equal(added.code, 0, added.stderr);
    key = await panel.createKey('ops', 'all', ['--no-rate-limit']);
    const nodes = (await call('GET', '/nodes')).expect(200).data as { id: number; name: string }[];
    remoteId = nodes.find((n) => n.name === 'fra-1')?.id ?? 0;
  });
  after(async () => {
    await panel.stop();
    await agent.stop();
    await db.drop();
  });

  it('makes an AmneziaWG server with parameters drawn for it, and a WireGuard one as before', async () => {
    const awg = (await call('POST', '/servers', { name: 'awg-1', protocol: 'amneziawg' })).expect(201);
    assert.equal(awg.protocol, 'amneziawg');
    assertUsable(paramsOf(awg));
    assert.deepEqual(Object.keys(paramsOf(awg)), [
      'jc',
      'jmin',
      'jmax',
      's1',
      's2',
      's3',
      's4',
      'h1',
      'h2',
      'h3',
      'h4',
    ]);
    const other = (await call('POST', '/servers', { name: 'awg-2', protocol: 'amneziawg' })).expect(201);
    assert.notDeepEqual(other.obfuscation, awg.obfuscation, 'each server draws its own');
    assert.deepEqual((await call('GET', `/servers/${awg.id}`)).expect(200).obfuscation, awg.obfuscation);
    const wg = (await call('POST', '/servers', { name: 'wg-1' })).expect(201);
    assert.deepEqual([wg.protocol, wg.obfuscation], ['wireguard', null]);
    const listed = (await call('GET', '/servers?limit=200')).expect(200).data as { id: number; protocol: string }[];
    assert.deepEqual(
      listed.filter((s) => [awg.id, wg.id].includes(s.id)).map((s) => s.protocol),
      ['amneziawg', 'wireguard'],
    );
  });

  it('keeps the parameters given and draws the rest around them', async () => {
    const given = { jc: 5, jmin: 64, jmax: 64, s1: 20, h1: '100-200', h2: '300', i1: '<b 0xc0ffee><r 16><t>' };
    const body = { name: 'awg-given', protocol: 'amneziawg' as const, obfuscation: given };
    const made = paramsOf((await call('POST', '/servers', body)).expect(201));
    assert.deepEqual({ ...made, ...given }, made, 'what was given is kept');
    assertUsable(made);
  });

  it('refuses a broken parameter with 422 naming it, and saves nothing', async () => {
    const before = await serverCount();
    const cases: [Record<string, unknown>, string][] = [
      [{ obfuscation: { jc: 3 } }, 'obfuscation'],
      [{ protocol: 'wireguard', obfuscation: {} }, 'obfuscation'],
      [{ protocol: 'openvpn' }, 'protocol'],
      [{ protocol: 'amneziawg', obfuscation: { s1: 20, s2: 76 } }, 'obfuscation.s2'],
      [{ protocol: 'amneziawg', obfuscation: { jmin: 100, jmax: 50 } }, 'obfuscation.jmin'],
      [{ protocol: 'amneziawg', obfuscation: { jmax: 1281 } }, 'obfuscation.jmax'],
      [{ protocol: 'amneziawg', obfuscation: { h1: '10-20', h2: '15' } }, 'obfuscation.h2'],
      [{ protocol: 'amneziawg', obfuscation: { h1: '3' } }, 'obfuscation.h1'],
      [{ protocol: 'amneziawg', obfuscation: { h1: '30-20' } }, 'obfuscation.h1'],
      [{ protocol: 'amneziawg', obfuscation: { jc: '5' } }, 'obfuscation.jc'],
      [{ protocol: 'amneziawg', obfuscation: { i1: '<b 0x00>\nPostUp = touch /tmp/x' } }, 'obfuscation.i1'],
      [{ protocol: 'amneziawg', obfuscation: { s9: 1 } }, 'obfuscation.s9'],
      // Padded data packets would not fit a 1500-byte path: amneziawg-go then carries almost nothing.
      [{ protocol: 'amneziawg', obfuscation: { s4: 16 } }, 'obfuscation.s4'],
      [{ protocol: 'amneziawg', mtu: 1400, obfuscation: { s4: 21 } }, 'obfuscation.s4'],
    ];
    for (const [body, field] of cases) {
      const refused = await call('POST', '/servers', { name: 'broken', ...body });
      assert.equal(refused.status, 422, `${JSON.stringify(body)}: ${JSON.stringify(refused.json)}`);
      assert.equal(refused.error?.code, 'validation_failed');
      assert.ok(Object.hasOwn(refused.error?.fields ?? {}, field), `${field} in ${JSON.stringify(refused.json)}`);
    }
    assert.equal(await serverCount(), before, 'nothing was saved');
  });

  it('takes transport padding under a lower mtu, and refuses a later mtu that leaves it no room', async () => {
    const body = { name: 'awg-padded', protocol: 'amneziawg' as const, mtu: 1380, obfuscation: { s4: 40 } };
    const made = (await call('POST', '/servers', body)).expect(201);
    const id = made.id;
    assert.equal(paramsOf(made).s4, 40);
    const refused = await call('PATCH', `/servers/${id}`, { mtu: 1420 });
    assert.equal(refused.status, 422, JSON.stringify(refused.json));
    assert.ok(Object.hasOwn(refused.error?.fields ?? {}, 'mtu'), JSON.stringify(refused.json));
    const lowered = await call('PATCH', `/servers/${id}`, { mtu: 1380, obfuscation: { s4: 8 } });
    assert.equal(lowered.status, 200, JSON.stringify(lowered.json));
    assert.equal((await call('PATCH', `/servers/${id}`, { mtu: 1412 })).status, 200, 'mtu + s4 = 1420 fits');
  });

  it("lists each node's protocols, and makes no AmneziaWG server on a node without amneziawg-go", async () => {
    const nodes = (await call('GET', '/nodes')).expect(200).data as { name: string; protocols: string[] }[];
    assert.deepEqual(Object.fromEntries(nodes.map((n) => [n.name, n.protocols])), {
      local: ['wireguard', 'amneziawg'],
      'fra-1': ['wireguard'],
    });
    const before = await serverCount();
    const refused = await call('POST', '/servers', { name: 'awg-fra', protocol: 'amneziawg', node_id: remoteId });
    assert.equal(refused.status, 422, JSON.stringify(refused.json));
    assert.equal(
      refused.error?.message,
      "node 'fra-1' cannot run AmneziaWG servers: " +
        'amneziawg-go is not installed on it (or its agent predates AmneziaWG)',
    );
    assert.deepEqual(refused.error?.fields, { protocol: "node 'fra-1' cannot run it" });
    assert.equal(await serverCount(), before, 'nothing was saved');
    assert.deepEqual(agent.applied, [], 'the node was sent nothing');
  });

  it('sends the node an AmneziaWG server with its parameters, and a PATCH of them too', async () => {
    agent.protocols = ['wireguard', 'amneziawg'];
    const body = { name: 'awg-fra', protocol: 'amneziawg' as const, node_id: remoteId };
    const server = (await call('POST', '/servers', body)).expect(201);
    assert.deepEqual(agent.held.get(server.id)?.server.obfuscation, server.obfuscation);
    assert.equal(agent.held.get(server.id)?.server.protocol, 'amneziawg');
    const patched = (await call('PATCH', `/servers/${server.id}`, { obfuscation: { jc: 9, i2: '<r 32>' } })).expect(
      200,
    );
    assert.deepEqual(patched.obfuscation, { ...server.obfuscation, jc: 9, i2: '<r 32>' }, 'merged over the current');
    assert.deepEqual(agent.held.get(server.id)?.server.obfuscation, patched.obfuscation, 'the node applied it');
    const wg = (await call('POST', '/servers', { name: 'wg-fra', node_id: remoteId })).expect(201);
    const wgSpec = agent.held.get(wg.id)?.server;
    assert.ok(wgSpec !== undefined && !('protocol' in wgSpec) && !('obfuscation' in wgSpec), 'none for WireGuard');
  });

  it('changes every config and says so in an event on a PATCH of the parameters; the protocol is fixed', async () => {
    const server = (await call('POST', '/servers', { name: 'awg-patch', protocol: 'amneziawg' })).expect(201);
    const device = (await call('POST', '/devices', { server_id: server.id })).expect(201);
    assert.match(device.config, new RegExp(`\nJc = ${paramsOf(server).jc}\n`));
    const jc = paramsOf(server).jc === 4 ? 5 : 4;
    (await call('PATCH', `/servers/${server.id}`, { obfuscation: { jc, i1: '<b 0x0102><c>' } })).expect(200);
    const config = await configOf(device.id);
    assert.match(config, new RegExp(`\nJc = ${jc}\n`));
    assert.match(config, /\nH4 = \S+\nI1 = <b 0x0102><c>\n\n\[Peer\]/);
    const events = (await call('GET', '/events?kind=server.obfuscation_changed')).expect(200).data;
    const event = events.find((e) => e.server_id === server.id);
    assert.ok(event, 'server.obfuscation_changed names the server');
    assert.doesNotMatch(JSON.stringify(event), /0x0102|"jc"/, 'but not the parameters');

    const removed = (await call('PATCH', `/servers/${server.id}`, { obfuscation: { i1: null } })).expect(200);
    assert.equal(paramsOf(removed).i1, undefined, 'null removes an i1-i5');
    const clash = await call('PATCH', `/servers/${server.id}`, { obfuscation: { s2: paramsOf(removed).s1 + 56 } });
    assert.equal(clash.status, 422);
    assert.deepEqual(Object.keys(clash.error?.fields ?? {}), ['obfuscation.s2']);
    const changeProtocol = await call('PATCH', `/servers/${server.id}`, { protocol: 'wireguard' });
    assert.equal(changeProtocol.status, 422);
    assert.deepEqual(Object.keys(changeProtocol.error?.fields ?? {}), ['protocol']);
    (await call('PATCH', `/servers/${server.id}`, { protocol: 'amneziawg', name: 'awg-patched' })).expect(200);
    assert.deepEqual((await call('GET', `/servers/${server.id}`)).expect(200).obfuscation, removed.obfuscation);
    const wg = (await call('POST', '/servers', { name: 'wg-patch' })).expect(201);
    const onWireGuard = await call('PATCH', `/servers/${wg.id}`, { obfuscation: { jc: 4 } });
    assert.equal(onWireGuard.status, 422);
    assert.deepEqual(Object.keys(onWireGuard.error?.fields ?? {}), ['obfuscation']);
  });

  it("gives a moved device its new server's kind of config, and the share page names the app", async () => {
    const awg = (await call('POST', '/servers', { name: 'awg-move', protocol: 'amneziawg' })).expect(201);
    const wg = (await call('POST', '/servers', { name: 'wg-move' })).expect(201);
    const device = (await call('POST', '/devices', { server_id: wg.id })).expect(201);
    assert.doesNotMatch(device.config, /\nJc = /);
    const moved = (await call('POST', `/devices/${device.id}/move`, { server_id: awg.id })).expect(200);
    const keys = moved.config.match(/^(Jc|Jmin|Jmax|S[1-4]|H[1-4]) = /gm)?.map((k: string) => k.slice(0, -3));
    assert.deepEqual(keys, ['Jc', 'Jmin', 'Jmax', 'S1', 'S2', 'S3', 'S4', 'H1', 'H2', 'H3', 'H4']);
    const share = (await call('POST', `/devices/${device.id}/share`, {})).expect(201);
    const page = await (await fetch(share.url.replace(/^https?:\/\/[^/]+/, panel.url))).text();
    assert.match(page, /<dd id="protocol">AmneziaWG<\/dd>/);
    assert.match(page, /AmneziaVPN or AmneziaWG app \(the WireGuard app cannot open it\)/);
    assert.match(page, /alt="QR code of the AmneziaWG configuration"/);
    const back = (await call('POST', `/devices/${device.id}/move`, { server_id: wg.id })).expect(200);
    assert.doesNotMatch(back.config, /\nJc = /);
  });
});
