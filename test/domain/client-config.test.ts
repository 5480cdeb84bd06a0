import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClientConfigInput, configFileName, renderClientConfig } from '../../src/domain/client-config.ts';
import { AppError } from '../../src/domain/errors.ts';
import { needsTool } from '../support/tools.ts';

// Real keys from `wg genkey | wg pubkey`.
const DEVICE_PRIVATE_KEY = '4GvL+KavliU97SqGoE2o4qms21A1d4nclaFtqkT+AWg=';
const SERVER_PUBLIC_KEY = '/Mtte4Rgjc92DTSiL3XYyYDqgk3hRGigILdIjPbgs1Q=';

/**
 * The kill-switch lines of docs/dataplane.md ("Measured facts" 5), copied, not imported: the renderer must
 * match them.
 */
const VERIFIED_POST_UP =
  'PostUp = ' +
  'iptables -I OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT' +
  ' && ip6tables -I OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT';
const VERIFIED_PRE_DOWN =
  'PreDown = ' +
  'iptables -D OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT' +
  ' && ip6tables -D OUTPUT ! -o %i -m mark ! --mark $(wg show %i fwmark) -m addrtype ! --dst-type LOCAL -j REJECT';

/** A device on a server created with the defaults (docs/decisions.md "Server fields and defaults"). */
const typical: ClientConfigInput = {
  privateKey: DEVICE_PRIVATE_KEY,
  address: '10.128.0.2',
  address6: 'fd3a:1b2c:4d5e::2',
  dns: ['1.1.1.1'],
  mtu: 1420,
  serverPublicKey: SERVER_PUBLIC_KEY,
  clientAllowedIps: ['0.0.0.0/0', '::/0'],
  endpoint: 'vpn.example.com',
  listenPort: 51820,
  persistentKeepalive: 25,
};

const TYPICAL_TEXT = `[Interface]
PrivateKey = 4GvL+KavliU97SqGoE2o4qms21A1d4nclaFtqkT+AWg=
Address = 10.128.0.2/32, fd3a:1b2c:4d5e::2/128
DNS = 1.1.1.1
MTU = 1420

[Peer]
PublicKey = /Mtte4Rgjc92DTSiL3XYyYDqgk3hRGigILdIjPbgs1Q=
AllowedIPs = 0.0.0.0/0, ::/0
Endpoint = vpn.example.com:51820
PersistentKeepalive = 25
`;

/** The typical device's Address line: both families, each a single address. */
const ADDRESS = 'Address = 10.128.0.2/32, fd3a:1b2c:4d5e::2/128';

/** A config file from its lines: LF endings and one trailing newline. */
const lines = (...all: string[]): string => `${all.join('\n')}\n`;

test('a typical device renders exactly', () => {
  assert.equal(renderClientConfig(typical, { killSwitch: false }), TYPICAL_TEXT);
});

describe('renderClientConfig', () => {
  const peer = (endpoint: string, ...rest: string[]): string[] => [
    '[Peer]',
    `PublicKey = ${SERVER_PUBLIC_KEY}`,
    'AllowedIPs = 0.0.0.0/0, ::/0',
    `Endpoint = ${endpoint}`,
    ...rest,
  ];
  const cases: Array<[intent: string, input: ClientConfigInput, killSwitch: boolean, expected: string]> = [
    [
      'a client-made key leaves out PrivateKey (its owner adds it)',
      { ...typical, privateKey: null },
      false,
      lines(
        '[Interface]',
        ADDRESS,
        'DNS = 1.1.1.1',
        'MTU = 1420',
        '',
        ...peer('vpn.example.com:51820', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'an IPv4 endpoint is written as is',
      { ...typical, endpoint: '203.0.113.7', listenPort: 443 },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'DNS = 1.1.1.1',
        'MTU = 1420',
        '',
        ...peer('203.0.113.7:443', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'an IPv6 endpoint is bracketed so its colons do not read as the port',
      { ...typical, endpoint: '2001:db8::7' },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'DNS = 1.1.1.1',
        'MTU = 1420',
        '',
        ...peer('[2001:db8::7]:51820', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'a device of a server without IPv6 has its IPv4 address alone',
      { ...typical, address6: null },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        'Address = 10.128.0.2/32',
        'DNS = 1.1.1.1',
        'MTU = 1420',
        '',
        ...peer('vpn.example.com:51820', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'no DNS servers leaves out the DNS line',
      { ...typical, dns: [] },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'MTU = 1420',
        '',
        ...peer('vpn.example.com:51820', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'keepalive 0 leaves out PersistentKeepalive',
      { ...typical, persistentKeepalive: 0 },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'DNS = 1.1.1.1',
        'MTU = 1420',
        '',
        ...peer('vpn.example.com:51820'),
      ),
    ],
    [
      'lists are comma-separated; a split tunnel renders without a kill switch',
      {
        ...typical,
        dns: ['1.1.1.1', '2606:4700:4700::1111'],
        mtu: 1280,
        clientAllowedIps: ['10.128.0.0/24', '192.168.10.0/24'],
        persistentKeepalive: 15,
      },
      false,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'DNS = 1.1.1.1, 2606:4700:4700::1111',
        'MTU = 1280',
        '',
        '[Peer]',
        `PublicKey = ${SERVER_PUBLIC_KEY}`,
        'AllowedIPs = 10.128.0.0/24, 192.168.10.0/24',
        'Endpoint = vpn.example.com:51820',
        'PersistentKeepalive = 15',
      ),
    ],
    [
      'the kill switch adds the verified PostUp and PreDown lines to [Interface]',
      typical,
      true,
      lines(
        '[Interface]',
        `PrivateKey = ${DEVICE_PRIVATE_KEY}`,
        ADDRESS,
        'DNS = 1.1.1.1',
        'MTU = 1420',
        VERIFIED_POST_UP,
        VERIFIED_PRE_DOWN,
        '',
        ...peer('vpn.example.com:51820', 'PersistentKeepalive = 25'),
      ),
    ],
    [
      'the kill switch works with a client-made key too',
      { ...typical, privateKey: null, dns: [] },
      true,
      lines(
        '[Interface]',
        ADDRESS,
        'MTU = 1420',
        VERIFIED_POST_UP,
        VERIFIED_PRE_DOWN,
        '',
        ...peer('vpn.example.com:51820', 'PersistentKeepalive = 25'),
      ),
    ],
  ];
  for (const [intent, input, killSwitch, expected] of cases) {
    test(intent, () => {
      assert.equal(renderClientConfig(input, { killSwitch }), expected);
    });
  }

  const splitTunnels: Array<[intent: string, allowedIps: string[]]> = [
    ['a private range only', ['10.128.0.0/24']],
    ['IPv4 full tunnel without ::/0', ['0.0.0.0/0']],
    ['IPv6 full tunnel without 0.0.0.0/0', ['::/0']],
    ['two halves instead of /0 (wg-quick sets no fwmark for them)', ['0.0.0.0/1', '128.0.0.0/1', '::/0']],
  ];
  for (const [intent, allowedIps] of splitTunnels) {
    test(`the kill switch is refused with 422 naming kill_switch: ${intent}`, () => {
      assert.throws(
        () => renderClientConfig({ ...typical, clientAllowedIps: allowedIps }, { killSwitch: true }),
        (error: unknown) => {
          assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`);
          assert.equal(error.code, 'validation_failed');
          assert.deepEqual(Object.keys(error.fields), ['kill_switch']);
          assert.match(error.message, /0\.0\.0\.0\/0 and ::\/0/);
          return true;
        },
      );
    });
  }

  const unsafe: Array<[intent: string, input: ClientConfigInput]> = [
    [
      'a line break in the endpoint would add a hook',
      { ...typical, endpoint: 'vpn.example.com:51820\nPostUp = touch /tmp/owned' },
    ],
    ['a carriage return in an allowed range', { ...typical, clientAllowedIps: ['0.0.0.0/0\r', '::/0'] }],
    ['a # in a DNS entry would cut the line', { ...typical, dns: ['1.1.1.1 # resolver'] }],
    ['an empty DNS entry', { ...typical, dns: [''] }],
    ['a line break in the IPv6 address', { ...typical, address6: 'fd00::2\nPostUp = touch /tmp/owned' }],
  ];
  for (const [intent, input] of unsafe) {
    test(`a stored value that would change the file is refused: ${intent}`, () => {
      assert.throws(
        () => renderClientConfig(input, { killSwitch: false }),
        (error: unknown) => error instanceof AppError && error.code === 'internal_error',
      );
    });
  }
});

const FILE_NAME = /^[a-zA-Z0-9_=+.-]{1,15}\.conf$/;
const fileNameCases: Array<[intent: string, deviceName: string, fileName: string]> = [
  ['a plain name is kept', 'laptop', 'laptop.conf'],
  ['the characters wg-quick allows are kept', 'a=b+c_d.e-f', 'a=b+c_d.e-f.conf'],
  ['spaces become one dash each run, none at the ends', '  Alice   iPhone  ', 'Alice-iPhone.conf'],
  ['accents are dropped, punctuation becomes a dash', "Zoë's Phone", 'Zoe-s-Phone.conf'],
  ['a long name keeps its first 15 characters', "Bob's MacBook Pro 2024", 'Bob-s-MacBook-P.conf'],
  ['a cut that ends on a dash drops the dash', 'abcdefghijklmn opq', 'abcdefghijklmn.conf'],
  ['a 64-character name fits', 'x'.repeat(64), `${'x'.repeat(15)}.conf`],
  ['a leading dash would read as an option to ip', '-rf', 'rf.conf'],
  ['a leading dot would hide the file', '.hidden', 'hidden.conf'],
  ['emoji go, letters stay', '📱 phone', 'phone.conf'],
  ['an empty name gets a hash of itself', '', 'wg-e3b0c442.conf'],
  ['a name in another script gets a hash', 'Телефон', 'wg-822f9fd9.conf'],
  ['another such name gets another hash', '手机', 'wg-2e07333c.conf'],
  ['"..", which is no interface name, gets a hash', '..', 'wg-5ec1f7e7.conf'],
  ['a Windows reserved name gets a prefix', 'CON', 'wg-CON.conf'],
  ['a Windows reserved name with an extension too', 'nul.box', 'wg-nul.box.conf'],
  ['a name that only starts like a reserved one is kept', 'console', 'console.conf'],
];

describe('configFileName', () => {
  for (const [intent, deviceName, fileName] of fileNameCases) {
    test(`${intent}: ${JSON.stringify(deviceName)} → ${fileName}`, () => {
      assert.equal(configFileName(deviceName), fileName);
      assert.match(fileName, FILE_NAME);
    });
  }
});

// wg-quick strip parses the file as `wg-quick up` does: it refuses a file whose name is no interface
// name, takes out its own keys (Address, DNS, MTU, PostUp, PreDown) and prints what is left for `wg`.
const isRoot = process.getuid?.() === 0;
const notRoot = isRoot ? false : 'needs root: wg-quick re-runs itself through sudo otherwise';
const skipStrip = needsTool('wg-quick', 'wireguard-tools') || notRoot;

describe('wg-quick strip accepts the rendered file', { skip: skipStrip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'client-config-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const strip = (fileName: string, text: string): string => {
    const path = join(dir, fileName);
    writeFileSync(path, text);
    chmodSync(path, 0o600);
    return execFileSync('wg-quick', ['strip', path], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  };
  // What `wg` gets: the lines wg-quick did not take as its own, then the blank line its `echo` adds.
  const wgPart = (privateKey: string | null, endpoint: string, keepalive: string | null): string =>
    `${lines(
      '[Interface]',
      ...(privateKey === null ? [] : [`PrivateKey = ${privateKey}`]),
      '',
      '[Peer]',
      `PublicKey = ${SERVER_PUBLIC_KEY}`,
      'AllowedIPs = 0.0.0.0/0, ::/0',
      `Endpoint = ${endpoint}`,
      ...(keepalive === null ? [] : [keepalive]),
    )}\n`;
  const cases: Array<[intent: string, input: ClientConfigInput, killSwitch: boolean, stripped: string]> = [
    [
      'a typical device',
      typical,
      false,
      wgPart(DEVICE_PRIVATE_KEY, 'vpn.example.com:51820', 'PersistentKeepalive = 25'),
    ],
    [
      'a client-made key',
      { ...typical, privateKey: null },
      false,
      wgPart(null, 'vpn.example.com:51820', 'PersistentKeepalive = 25'),
    ],
    [
      'an IPv6 endpoint, no DNS, no keepalive',
      { ...typical, endpoint: '2001:db8::7', dns: [], persistentKeepalive: 0 },
      false,
      wgPart(DEVICE_PRIVATE_KEY, '[2001:db8::7]:51820', null),
    ],
    ['the kill switch', typical, true, wgPart(DEVICE_PRIVATE_KEY, 'vpn.example.com:51820', 'PersistentKeepalive = 25')],
  ];
  for (const [intent, input, killSwitch, stripped] of cases) {
    test(intent, () => {
      assert.equal(
        strip(configFileName("Zoë's Phone 15 Pro Max"), renderClientConfig(input, { killSwitch })),
        stripped,
      );
    });
  }

  test('every file name configFileName makes is one wg-quick accepts', () => {
    for (const [, deviceName] of fileNameCases) {
      assert.equal(
        strip(configFileName(deviceName), TYPICAL_TEXT),
        wgPart(DEVICE_PRIVATE_KEY, 'vpn.example.com:51820', 'PersistentKeepalive = 25'),
      );
    }
  });

  test('a name that is no interface name is refused, so the check above means something', () => {
    assert.throws(() => strip("Zoë's Phone.conf", TYPICAL_TEXT), /must be a valid interface name/);
  });
});
