import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderClientConfig } from '../../src/domain/client-config.ts';
import { AppError } from '../../src/domain/errors.ts';
import { completeObfuscation, type Obfuscation, patchedObfuscation } from '../../src/domain/protocols.ts';

const FIXED: Obfuscation = {
  jc: 4,
  jmin: 40,
  jmax: 70,
  s1: 20,
  s2: 30,
  s3: 10,
  s4: 5,
  h1: '100',
  h2: '200-300',
  h3: '5',
  h4: '4294967295',
};

/** The field a validation error names. */
function fieldOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return Object.keys(error.fields)[0];
    throw error;
  }
  return undefined;
}

describe('AmneziaWG parameters', () => {
  test('drawn sets keep every rule, a thousand times over', () => {
    for (let i = 0; i < 1000; i++) {
      const o = completeObfuscation({}, 1420);
      assert.ok(o.jc >= 3 && o.jc <= 10 && o.jmin <= o.jmax && o.jmax <= 1280 && o.s1 + 56 !== o.s2);
      const headers = [o.h1, o.h2, o.h3, o.h4].map(Number);
      assert.equal(new Set(headers).size, 4);
      assert.ok(headers.every((h) => h >= 5 && h <= 2_147_483_647));
      assert.equal(o.i1, undefined, 'i1-i5 are never drawn');
    }
  });

  test('padding of data packets (s4) is drawn and accepted only where the MTU leaves room for it on the path', () => {
    for (let i = 0; i < 200; i++) {
      assert.equal(completeObfuscation({}, 1420).s4, 0, 'at the default mtu no room is left');
      const o = completeObfuscation({}, 1380);
      assert.ok(o.s4 >= 0 && o.s4 <= 32 && 1380 + o.s4 <= 1420, `s4 ${o.s4} at mtu 1380`);
    }
    assert.equal(completeObfuscation({ s4: 40 }, 1380).s4, 40);
    assert.equal(
      fieldOf(() => completeObfuscation({ s4: 1 }, 1420)),
      'obfuscation.s4',
    );
    assert.equal(
      fieldOf(() => completeObfuscation({ s4: 41 }, 1380)),
      'obfuscation.s4',
    );
  });

  test('a value drawn around a given one keeps clear of it', () => {
    // The stand-in counts up from each range's start, so s2's range (from 15) reaches 76 = s1 + 56 before 77.
    let counter = 0;
    const o = completeObfuscation({ s1: 20, jc: 3, jmin: 40, jmax: 70, s3: 0, s4: 0 }, 1420, (min, max) =>
      min === 15 ? min + (counter++ % (max - min + 1)) + 61 : min + (counter++ % (max - min + 1)),
    );
    assert.equal(o.s2, 77, 's2 = s1 + 56 is drawn again');
  });

  test('every rule broken is named', () => {
    const cases: [Partial<Obfuscation>, string][] = [
      [{ jc: 129 }, 'obfuscation.jc'],
      [{ jmin: 80, jmax: 70 }, 'obfuscation.jmin'],
      [{ jmax: 1281 }, 'obfuscation.jmax'],
      [{ s1: 20, s2: 76 }, 'obfuscation.s2'],
      [{ s1: 20, s3: 104 }, 'obfuscation.s3'],
      [{ h1: '4' }, 'obfuscation.h1'],
      [{ h2: '100' }, 'obfuscation.h2'],
      [{ h2: '90-110' }, 'obfuscation.h2'],
      [{ h3: '7-6' }, 'obfuscation.h3'],
      [{ h4: '4294967296' }, 'obfuscation.h4'],
      [{ h4: 'x' }, 'obfuscation.h4'],
      [{ i1: '<b 0x00>\nPostUp = id' }, 'obfuscation.i1'],
      [{ i5: '<b 0x00> # comment' }, 'obfuscation.i5'],
    ];
    for (const [change, field] of cases) {
      assert.equal(
        fieldOf(() => patchedObfuscation(FIXED, change)),
        field,
        JSON.stringify(change),
      );
    }
    assert.equal(
      fieldOf(() => patchedObfuscation(FIXED, { i1: '<b 0xc0ffee><r 16><rc 8><rd 4><c><t>' })),
      undefined,
    );
  });

  test('a patch replaces what it gives, null removes an i1-i5', () => {
    const withI = patchedObfuscation(FIXED, { jc: 6, i2: '<r 8>' });
    assert.deepEqual(withI, { ...FIXED, jc: 6, i2: '<r 8>' });
    assert.deepEqual(patchedObfuscation(withI, { i2: null }), { ...FIXED, jc: 6 });
  });

  test("an AmneziaWG device's [Interface] carries the keys as awg-quick reads them", () => {
    const input = {
      privateKey: '4GvL+KavliU97SqGoE2o4qms21A1d4nclaFtqkT+AWg=',
      address: '10.128.0.2',
      address6: null,
      dns: ['1.1.1.1'],
      mtu: 1420,
      serverPublicKey: '/Mtte4Rgjc92DTSiL3XYyYDqgk3hRGigILdIjPbgs1Q=',
      clientAllowedIps: ['0.0.0.0/0', '::/0'],
      endpoint: 'vpn.example.com',
      listenPort: 51820,
      persistentKeepalive: 25,
      obfuscation: { ...FIXED, i1: '<b 0xc0ffee><r 16>' },
    };
    assert.equal(
      renderClientConfig(input, { killSwitch: false }),
      `[Interface]
PrivateKey = 4GvL+KavliU97SqGoE2o4qms21A1d4nclaFtqkT+AWg=
Address = 10.128.0.2/32
DNS = 1.1.1.1
MTU = 1420
Jc = 4
Jmin = 40
Jmax = 70
S1 = 20
S2 = 30
S3 = 10
S4 = 5
H1 = 100
H2 = 200-300
H3 = 5
H4 = 4294967295
I1 = <b 0xc0ffee><r 16>

[Peer]
PublicKey = /Mtte4Rgjc92DTSiL3XYyYDqgk3hRGigILdIjPbgs1Q=
AllowedIPs = 0.0.0.0/0, ::/0
Endpoint = vpn.example.com:51820
PersistentKeepalive = 25
`,
    );
    const killSwitch = renderClientConfig(input, { killSwitch: true });
    assert.match(killSwitch, /^PostUp = .*\$\(awg show %i fwmark\)/m, 'awg-quick interfaces answer awg show');
    assert.doesNotMatch(killSwitch, /\$\(wg show/);
  });
});
