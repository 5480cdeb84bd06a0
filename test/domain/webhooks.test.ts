import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import {
  generateWebhookSecret,
  isForbiddenAddress,
  nextAttemptDelayMs,
  parseRetryAfterSeconds,
  RETRY_SCHEDULE_MS,
  signWebhook,
} from '../../src/domain/webhooks.ts';

describe('signWebhook', () => {
  test('matches the Standard Webhooks reference vector', () => {
    const signature = signWebhook(
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      1614265330,
      '{"test": 2432232314}',
    );
    assert.equal(signature, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  test('a generated secret signs what the standardwebhooks library verifies', () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ id: 7, kind: 'device.created', detail: 'ünïcode ✓' });
    const timestampSeconds = Math.floor(Date.now() / 1000);
    const headers = {
      'webhook-id': 'msg_7_1',
      'webhook-timestamp': String(timestampSeconds),
      'webhook-signature': signWebhook(secret, 'msg_7_1', timestampSeconds, body),
    };
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(secret).verify(`${body} `, headers), /No matching signature/);
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers), /No matching signature/);
  });

  test('secrets are whsec_ and 32 random bytes in base64', () => {
    const secret = generateWebhookSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    assert.notEqual(generateWebhookSecret(), secret);
  });
});

describe('nextAttemptDelayMs', () => {
  const middle = () => 0.5;
  const lowest = () => 0;
  const highest = () => 0.999_999_999;

  test('the production schedule is 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    assert.deepEqual(RETRY_SCHEDULE_MS, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  });

  test('follows the schedule, then gives up after the last retry', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((attempts) =>
      nextAttemptDelayMs(attempts, RETRY_SCHEDULE_MS, undefined, middle),
    );
    assert.deepEqual(delays, [...RETRY_SCHEDULE_MS, undefined]);
  });

  test('jitter stays within ±10 % of each step', () => {
    for (const [i, stepMs] of RETRY_SCHEDULE_MS.entries()) {
      const low = nextAttemptDelayMs(i + 1, RETRY_SCHEDULE_MS, undefined, lowest) ?? Number.NaN;
      const high = nextAttemptDelayMs(i + 1, RETRY_SCHEDULE_MS, undefined, highest) ?? Number.NaN;
      assert.equal(low, stepMs * 0.9);
      assert.ok(high <= stepMs * 1.1 && high > stepMs * 1.099, `${high} for step ${stepMs}`);
    }
  });

  const retryAfterCases: Array<{ name: string; retryAfterSeconds: number; random: () => number; expectedMs: number }> =
    [
      { name: 'a longer Retry-After replaces the step', retryAfterSeconds: 60, random: lowest, expectedMs: 60_000 },
      {
        name: 'a shorter Retry-After leaves the jittered step',
        retryAfterSeconds: 1,
        random: lowest,
        expectedMs: 4_500,
      },
      {
        name: 'jitter never takes the wait below Retry-After',
        retryAfterSeconds: 5,
        random: lowest,
        expectedMs: 5_000,
      },
      {
        name: 'fractional seconds round up to whole ms',
        retryAfterSeconds: 10.0004,
        random: lowest,
        expectedMs: 10_001,
      },
      {
        name: 'a huge Retry-After is capped at the longest step',
        retryAfterSeconds: 10 ** 9,
        random: lowest,
        expectedMs: 36_000_000,
      },
    ];
  for (const c of retryAfterCases) {
    test(c.name, () =>
      assert.equal(nextAttemptDelayMs(1, RETRY_SCHEDULE_MS, c.retryAfterSeconds, c.random), c.expectedMs),
    );
  }

  test('Retry-After does not bring back a delivery out of retries', () => {
    assert.equal(nextAttemptDelayMs(8, RETRY_SCHEDULE_MS, 30, middle), undefined);
  });
});

describe('parseRetryAfterSeconds', () => {
  const nowMs = Date.parse('2026-01-01T00:00:00Z');
  const cases: Array<[string | undefined, number | undefined]> = [
    [undefined, undefined],
    ['120', 120],
    [' 0 ', 0],
    ['Thu, 01 Jan 2026 00:01:30 GMT', 90],
    ['Wed, 31 Dec 2025 23:00:00 GMT', 0],
    ['soon', undefined],
    ['-5', undefined],
  ];
  for (const [header, expected] of cases) {
    test(`${JSON.stringify(header)} → ${expected}`, () =>
      assert.equal(parseRetryAfterSeconds(header, nowMs), expected));
  }
});

describe('isForbiddenAddress', () => {
  const forbidden: Array<[string, string]> = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network'],
    ['10.0.0.1', 'private 10/8'],
    ['10.128.0.1', 'the panel VPN range 10.128/9'],
    ['10.255.255.255', 'private 10/8, last'],
    ['100.64.0.1', 'CGNAT, first'],
    ['100.100.100.200', 'CGNAT, a cloud metadata address'],
    ['100.127.255.254', 'CGNAT, last'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback, last'],
    ['169.254.169.254', 'link-local metadata'],
    ['169.254.0.1', 'link-local'],
    ['172.16.0.1', 'private 172.16/12, first'],
    ['172.31.255.254', 'private 172.16/12, last'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.10', 'documentation TEST-NET-1'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['192.168.1.1', 'private 192.168/16'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.254', 'benchmarking, last'],
    ['198.51.100.7', 'documentation TEST-NET-2'],
    ['203.0.113.9', 'documentation TEST-NET-3'],
    ['224.0.0.251', 'multicast'],
    ['239.255.255.250', 'multicast, last block'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'IPv6 unspecified'],
    ['::1', 'IPv6 loopback'],
    ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback, dotted'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped metadata'],
    ['::ffff:10.1.2.3', 'IPv4-mapped private'],
    ['0:0:0:0:0:ffff:c0a8:0101', 'IPv4-mapped private, uncompressed'],
    ['64:ff9b::10.0.0.1', 'NAT64 of a private address'],
    ['64:ff9b:1::1', 'local-use NAT64'],
    ['2002:0a00:0001::1', '6to4 of a private address'],
    ['2002:7f00:1::', '6to4 of loopback'],
    ['100::1', 'discard-only'],
    ['2001::1', 'Teredo'],
    ['2001:2::1', 'benchmarking'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['fc00::1', 'ULA fc00::/7'],
    ['fd00:ec2::254', 'ULA, a cloud metadata address'],
    ['fdff:ffff::1', 'ULA, last half'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local with a zone'],
    ['febf::1', 'link-local, last'],
    ['fec0::1', 'site-local (deprecated)'],
    ['ff02::1', 'multicast'],
    ['4000::1', 'outside global unicast'],
    ['FE80::ABCD', 'upper-case link-local'],
    ['', 'empty text'],
    ['localhost', 'a name, not an address'],
    ['127.1', 'short IPv4 form'],
    ['1.2.3.256', 'octet out of range'],
    ['1::2::3', 'two ::'],
    ['1:2:3:4:5:6:7:8:9', 'nine groups'],
  ];
  const allowed: Array<[string, string]> = [
    ['1.1.1.1', 'public IPv4'],
    ['8.8.8.8', 'public IPv4'],
    ['9.255.255.255', 'just below 10/8'],
    ['11.0.0.0', 'just above 10/8'],
    ['100.63.255.255', 'just below CGNAT'],
    ['100.128.0.0', 'just above CGNAT'],
    ['172.15.255.255', 'just below 172.16/12'],
    ['172.32.0.0', 'just above 172.16/12'],
    ['169.253.255.255', 'just below link-local'],
    ['192.0.1.1', 'between 192.0.0/24 and TEST-NET-1'],
    ['192.167.255.255', 'just below 192.168/16'],
    ['198.17.255.255', 'just below benchmarking'],
    ['223.255.255.255', 'just below multicast'],
    ['2606:4700:4700::1111', 'public IPv6'],
    ['2a00:1450:4001:81b::200e', 'public IPv6'],
    ['2001:4860:4860::8888', 'public IPv6 in 2001::/16 outside 2001::/23'],
    ['::ffff:1.1.1.1', 'IPv4-mapped public'],
    ['::ffff:808:808', 'IPv4-mapped public, hex'],
    ['64:ff9b::8.8.8.8', 'NAT64 of a public address'],
    ['2002:0808:0808::1', '6to4 of a public address'],
  ];
  for (const [ip, why] of forbidden)
    test(`refuses ${JSON.stringify(ip)}: ${why}`, () => assert.equal(isForbiddenAddress(ip), true));
  for (const [ip, why] of allowed) test(`allows ${ip}: ${why}`, () => assert.equal(isForbiddenAddress(ip), false));
});
