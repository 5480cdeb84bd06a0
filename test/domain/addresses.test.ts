import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  addressWithPrefix,
  canonicalNetwork,
  ipv6Groups,
  isHost,
  isIpAddress,
  isNetwork,
} from '../../src/domain/addresses.ts';

describe('endpoints: a host name or an address, nothing else', () => {
  const hosts = ['vpn.example.com', 'a', 'xn--bcher-kva.example', 'a-b.c-d.example', `${'a'.repeat(63)}.example`];
  hosts.push('192.0.2.1', '2001:db8::1', '::1', '::ffff:192.0.2.1');
  for (const host of hosts) test(`accepts ${host}`, () => assert.equal(isHost(host), true));

  const refused: Array<[intent: string, text: string]> = [
    ['a lone colon', ':'],
    ['colons only', ':::'],
    ['an empty string', ''],
    ['a port', 'vpn.example.com:51820'],
    ['an IPv4 address with a port', '192.0.2.1:51820'],
    ['a bracketed IPv6 address', '[2001:db8::1]'],
    ['an IPv6 zone', 'fe80::1%eth0'],
    ['a scheme', 'https://vpn.example.com'],
    ['a space', 'vpn example.com'],
    ['a newline (a config line of its own)', 'vpn.example.com\nPostUp = id'],
    ['a trailing dot', 'vpn.example.com.'],
    ['an empty label', 'vpn..example.com'],
    ['a leading hyphen', '-vpn.example.com'],
    ['a trailing hyphen in a label', 'vpn-.example.com'],
    ['a 64-character label', `${'a'.repeat(64)}.example`],
    ['an underscore', 'vpn_1.example.com'],
    ['an IPv4 address out of range', '192.0.2.256'],
    ['an IPv4 address with leading zeros', '192.000.2.1'],
    ['three octets', '192.0.2'],
    ['an all-digit last label', 'vpn.123'],
    ['two double colons', '2001::db8::1'],
    ['nine IPv6 groups', '1:2:3:4:5:6:7:8:9'],
    ['a five-digit IPv6 group', '2001:db8::12345'],
    ['a name over 253 characters', `${'a.'.repeat(126)}ab`],
    ['non-ASCII letters', 'bücher.example'],
  ];
  for (const [intent, text] of refused) {
    test(`refuses ${intent}: ${JSON.stringify(text)}`, () => assert.equal(isHost(text), false));
  }
});

describe('DNS servers: IP addresses only', () => {
  for (const ip of ['1.1.1.1', '2606:4700:4700::1111', '::', '0.0.0.0']) {
    test(`accepts ${ip}`, () => assert.equal(isIpAddress(ip), true));
  }
  for (const text of ['dns.example', '1.1.1.1/32', '1.1.1', ':', '1.1.1.1 ', 'fe80::1%2']) {
    test(`refuses ${JSON.stringify(text)}`, () => assert.equal(isIpAddress(text), false));
  }
});

describe('IPv6 text', () => {
  test('expands :: and an IPv4 tail', () => {
    assert.deepEqual(ipv6Groups('2001:db8::1'), [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    assert.deepEqual(ipv6Groups('::ffff:192.0.2.1'), [0, 0, 0, 0, 0, 0xffff, 0xc000, 0x0201]);
    assert.deepEqual(ipv6Groups('::'), [0, 0, 0, 0, 0, 0, 0, 0]);
  });
  test(':: must stand for at least one group', () => assert.equal(ipv6Groups('1:2:3:4::5:6:7:8'), undefined));
  test('an IPv4 tail only at the end', () => assert.equal(ipv6Groups('192.0.2.1::1'), undefined));
});

describe('client_allowed_ips: real networks', () => {
  const networks = ['0.0.0.0/0', '::/0', '10.0.0.0/8', '192.0.2.1/32', '100.64.0.0/10'];
  for (const cidr of [...networks, '2001:db8::/32', '2001:db8::1/128', 'fd00::/8']) {
    test(`accepts ${cidr}`, () => assert.equal(isNetwork(cidr), true));
  }
  const refused: Array<[intent: string, text: string]> = [
    ['an IPv4 prefix over 32', '0.0.0.0/999'],
    ['IPv4 /33', '10.0.0.0/33'],
    ['an IPv6 prefix over 128', '::/129'],
    ['host bits set (IPv4)', '10.0.0.1/8'],
    ['host bits set: "everything" that is not', '0.0.0.1/0'],
    ['host bits set (IPv6)', '2001:db8::1/32'],
    ['no prefix', '10.0.0.0'],
    ['an empty prefix', '10.0.0.0/'],
    ['a prefix with a leading zero', '10.0.0.0/08'],
    ['a host name', 'example.com/24'],
    ['two prefixes', '10.0.0.0/8/8'],
    ['a broken address', '10.0.0.256/32'],
    ['a space', '10.0.0.0/8 '],
  ];
  for (const [intent, text] of refused) {
    test(`refuses ${intent}: ${JSON.stringify(text)}`, () => assert.equal(isNetwork(text), false));
  }
});

describe('allowed ips as wg prints them', () => {
  test('host bits are cleared', () => {
    assert.equal(canonicalNetwork('10.128.0.2/32'), '10.128.0.2/32');
    assert.equal(canonicalNetwork('10.128.0.77/24'), '10.128.0.0/24');
    assert.equal(canonicalNetwork('0.0.0.1/0'), '0.0.0.0/0');
  });
  test('IPv6 in its short form', () => {
    assert.equal(canonicalNetwork('fd00::2/128'), 'fd00::2/128');
    assert.equal(canonicalNetwork('FD00:0:0::2/64'), 'fd00::/64');
    assert.equal(canonicalNetwork('2001:db8:0:1:0:0:0:1/128'), '2001:db8:0:1::1/128');
    assert.equal(canonicalNetwork('1:0:2:0:3:0:4:0/128'), '1:0:2:0:3:0:4:0/128');
  });
  const refused = ['10.128.0.256/32', '10.1.2.3', '10.1.2.3/33', '010.1.2.3/32', 'fd00::2/129', 'fd00:::2/64', 'a/24'];
  for (const text of refused) {
    test(`refuses ${JSON.stringify(text)}`, () => assert.equal(canonicalNetwork(text), undefined));
  }
  test('an address with its prefix is taken apart as written, host bits kept', () => {
    assert.deepEqual(addressWithPrefix('10.128.0.1/24'), { family: 4, parts: [10, 128, 0, 1], prefix: 24 });
    assert.deepEqual(addressWithPrefix('fd00::1/64'), { family: 6, parts: [0xfd00, 0, 0, 0, 0, 0, 0, 1], prefix: 64 });
    assert.equal(addressWithPrefix('10.128.0.1'), undefined);
  });
});
