import { randomInt } from 'node:crypto';
import { AppError } from './errors.ts';

/**
 * The protocols a server speaks. `amneziawg` is WireGuard's cryptography with a wire image DPI does not
 * recognise: junk packets before the handshake, padded handshake messages, other message headers.
 */
export type ServerProtocol = 'wireguard' | 'amneziawg';
export const SERVER_PROTOCOLS: readonly ServerProtocol[] = ['wireguard', 'amneziawg'];

/**
 * An AmneziaWG server's obfuscation parameters, named as awg-quick and the AmneziaWG apps name them in lower
 * case: `jc` junk packets of `jmin`-`jmax` bytes before each handshake; `s1`-`s4` bytes of padding before
 * the handshake initiation, response, cookie reply and transport messages; `h1`-`h4` the four message
 * headers, a number or a range `"A-B"` (AmneziaWG 2.0); `i1`-`i5` the optional special junk packets.
 */
export interface Obfuscation {
  jc: number;
  jmin: number;
  jmax: number;
  s1: number;
  s2: number;
  s3: number;
  s4: number;
  h1: string;
  h2: string;
  h3: string;
  h4: string;
  i1?: string;
  i2?: string;
  i3?: string;
  i4?: string;
  i5?: string;
}

/** The optional special junk packets, in the order awg-quick writes them. */
export const SPECIAL_JUNK_KEYS = ['i1', 'i2', 'i3', 'i4', 'i5'] as const;
export type SpecialJunkKey = (typeof SPECIAL_JUNK_KEYS)[number];
const HEADER_KEYS = ['h1', 'h2', 'h3', 'h4'] as const;
const NUMBER_KEYS = ['jc', 'jmin', 'jmax', 's1', 's2', 's3', 's4'] as const;

/**
 * What a client accepts (docs/decisions.md "AmneziaWG servers"): a junk packet is at most the 1280 bytes of
 * IPv6's minimum MTU; a header is a 32-bit message type, 1-4 being WireGuard's own.
 */
export const OBFUSCATION_LIMITS = {
  jcMax: 128,
  junkBytesMax: 1280,
  paddingBytesMax: 1280,
  headerMin: 5,
  headerMax: 4_294_967_295,
} as const;

/** The ranges new values are drawn from: within the limits, and near what the AmneziaWG generators draw. */
const GENERATED = {
  jc: [3, 10],
  jmin: [40, 80],
  jmaxTop: 1000,
  s1: [15, 150],
  s2: [15, 150],
  s3: [0, 64],
  // Some clients read a header as a signed 32-bit number.
  header: [OBFUSCATION_LIMITS.headerMin, 2_147_483_647],
} as const;

/**
 * A special junk packet as tags: `<b 0x…>` bytes, `<r N>`/`<rc N>`/`<rd N>` random bytes, letters or digits,
 * `<c>` a counter, `<t>` a timestamp.
 */
const SPECIAL_JUNK = /^(?:<(?:b 0x[0-9a-fA-F]+|r \d{1,4}|rc \d{1,4}|rd \d{1,4}|c|t)>)+$/;
export const SPECIAL_JUNK_MAX_CHARS = 4096;

/** A header as text: one number, or a range "A-B". */
const HEADER_TEXT = /^(\d{1,10})(?:-(\d{1,10}))?$/;

/** The bytes WireGuard's handshake initiation, response and cookie reply have before padding. */
const INITIATION_BYTES = 148;
const RESPONSE_BYTES = 92;
const COOKIE_REPLY_BYTES = 64;

/** A random integer in [min, max] from the CSPRNG. */
export type RandomInt = (min: number, max: number) => number;
const cryptoRandomInt: RandomInt = (min, max) => randomInt(min, max + 1);

/**
 * An AmneziaWG server's MTU plus its transport padding `s4` stays within WireGuard's default MTU, which leaves
 * room for WireGuard's 32 bytes and the outer IPv6 and UDP headers on a 1500-byte path. Past it every full data
 * packet is fragmented, and amneziawg-go carried 0.1 Mbit/s instead of hundreds (s4 32 at mtu 1420, measured).
 */
export const PADDED_MTU_MAX = 1420;
const DRAWN_S4_MAX = 32;

/** Refuses `s4` (or the `mtu` a PATCH gives) when a padded data packet would not fit the path. */
export function checkTransportPadding(o: Obfuscation, mtu: number, field: 's4' | 'mtu' = 's4'): void {
  if (mtu + o.s4 <= PADDED_MTU_MAX) return;
  const problem =
    `with mtu ${mtu} and s4 ${o.s4}, padded data packets exceed a 1500-byte path: ` +
    `mtu + s4 at most ${PADDED_MTU_MAX}`;
  throw field === 's4' ? invalid('s4', problem) : new AppError('validation_failed', `mtu ${problem}`, { mtu: problem });
}

function invalid(field: string, problem: string): AppError {
  return new AppError('validation_failed', `obfuscation.${field} ${problem}`, { [`obfuscation.${field}`]: problem });
}

/** A header's interval; undefined when its text is not a number or a range. */
export function headerRange(text: string): [number, number] | undefined {
  const match = HEADER_TEXT.exec(text);
  if (match === null) return undefined;
  const low = Number(match[1]);
  return [low, match[2] === undefined ? low : Number(match[2])];
}

function checkHeaders(o: Obfuscation): void {
  const seen: [string, [number, number]][] = [];
  for (const key of HEADER_KEYS) {
    const range = headerRange(o[key]);
    if (range === undefined) throw invalid(key, 'must be a number or a range "A-B"');
    const [low, high] = range;
    if (low > high) throw invalid(key, 'is a range whose start is above its end');
    if (low < OBFUSCATION_LIMITS.headerMin || high > OBFUSCATION_LIMITS.headerMax)
      throw invalid(
        key,
        `must lie in ${OBFUSCATION_LIMITS.headerMin}-${OBFUSCATION_LIMITS.headerMax} (1-4 are WireGuard's)`,
      );
    const clash = seen.find(([, [l, h]]) => low <= h && l <= high);
    if (clash !== undefined) throw invalid(key, `overlaps ${clash[0]}: the four headers must differ`);
    seen.push([key, range]);
  }
}

/**
 * Checks a whole set of parameters; the first rule broken is a validation_failed naming `obfuscation.<key>`. The
 * three handshake messages keep distinct padded sizes, so the receiver tells them apart by size (s1 + 56 != s2).
 */
export function validateObfuscation(o: Obfuscation): void {
  for (const key of NUMBER_KEYS) {
    if (!Number.isSafeInteger(o[key]) || o[key] < 0) throw invalid(key, 'must be an integer of 0 or more');
  }
  if (o.jc > OBFUSCATION_LIMITS.jcMax) throw invalid('jc', `must be at most ${OBFUSCATION_LIMITS.jcMax}`);
  if (o.jmin > OBFUSCATION_LIMITS.junkBytesMax)
    throw invalid('jmin', `must be at most ${OBFUSCATION_LIMITS.junkBytesMax}`);
  if (o.jmax > OBFUSCATION_LIMITS.junkBytesMax)
    throw invalid('jmax', `must be at most ${OBFUSCATION_LIMITS.junkBytesMax}`);
  if (o.jmin > o.jmax) throw invalid('jmin', 'must not be above jmax');
  for (const key of ['s1', 's2', 's3', 's4'] as const) {
    if (o[key] > OBFUSCATION_LIMITS.paddingBytesMax)
      throw invalid(key, `must be at most ${OBFUSCATION_LIMITS.paddingBytesMax}`);
  }
  const initiation = INITIATION_BYTES + o.s1;
  if (RESPONSE_BYTES + o.s2 === initiation)
    throw invalid('s2', 'must not be s1 + 56: both handshakes would be one size');
  if (COOKIE_REPLY_BYTES + o.s3 === initiation || COOKIE_REPLY_BYTES + o.s3 === RESPONSE_BYTES + o.s2)
    throw invalid('s3', 'gives the cookie reply the size of a handshake message');
  checkHeaders(o);
  for (const key of SPECIAL_JUNK_KEYS) {
    const value = o[key];
    if (value === undefined) continue;
    if (value.length > SPECIAL_JUNK_MAX_CHARS || !SPECIAL_JUNK.test(value))
      throw invalid(key, 'must be tags such as <b 0x0a0b><r 16><c><t>');
  }
}

/** A value drawn until `ok` holds (the rules exclude a few values of wide ranges, so it ends at once). */
function drawn(random: RandomInt, [min, max]: readonly [number, number], ok: (v: number) => boolean): number {
  for (;;) {
    const value = random(min, max);
    if (ok(value)) return value;
  }
}

/**
 * `given` completed with values drawn from the CSPRNG, then checked whole: what is drawn keeps the rules against
 * what was given (s2 is never s1 + 56, a header overlaps none given). i1-i5 are never drawn.
 */
export function completeObfuscation(
  given: Partial<Obfuscation>,
  mtu: number,
  random: RandomInt = cryptoRandomInt,
): Obfuscation {
  const jc = given.jc ?? random(...GENERATED.jc);
  const jmin = given.jmin ?? Math.min(random(...GENERATED.jmin), given.jmax ?? GENERATED.jmin[1]);
  const jmax = given.jmax ?? random(jmin, Math.max(jmin, GENERATED.jmaxTop));
  // Each padded handshake size differs from the others, given or drawn.
  const sizeOf = { s1: INITIATION_BYTES, s2: RESPONSE_BYTES, s3: COOKIE_REPLY_BYTES } as const;
  const padded: Partial<Record<keyof typeof sizeOf, number>> = { s1: given.s1, s2: given.s2, s3: given.s3 };
  for (const key of ['s1', 's2', 's3'] as const) {
    if (padded[key] !== undefined) continue;
    const others = (['s1', 's2', 's3'] as const).flatMap((k) => {
      const v = padded[k];
      return v === undefined ? [] : [sizeOf[k] + v];
    });
    padded[key] = drawn(random, GENERATED[key], (v) => !others.includes(sizeOf[key] + v));
  }
  const { s1 = 0, s2 = 0, s3 = 0 } = padded;
  const s4 = given.s4 ?? random(0, Math.max(0, Math.min(DRAWN_S4_MAX, PADDED_MTU_MAX - mtu)));
  const taken = HEADER_KEYS.flatMap((key) => {
    const range = given[key] === undefined ? undefined : headerRange(given[key]);
    return range === undefined ? [] : [range];
  });
  const headers: Partial<Record<(typeof HEADER_KEYS)[number], string>> = {};
  for (const key of HEADER_KEYS) {
    const value = given[key];
    if (value !== undefined) {
      headers[key] = value;
      continue;
    }
    const drawnHeader = drawn(random, GENERATED.header, (v) => !taken.some(([l, h]) => l <= v && v <= h));
    taken.push([drawnHeader, drawnHeader]);
    headers[key] = String(drawnHeader);
  }
  const { h1 = '', h2 = '', h3 = '', h4 = '' } = headers;
  const result: Obfuscation = { jc, jmin, jmax, s1, s2, s3, s4, h1, h2, h3, h4 };
  for (const key of SPECIAL_JUNK_KEYS) {
    const value = given[key];
    if (value !== undefined) result[key] = value;
  }
  validateObfuscation(result);
  checkTransportPadding(result, mtu);
  return result;
}

/** A patch of a server's parameters: a key given replaces the current one; an i-key given null removes it. */
export type ObfuscationPatch = Partial<Omit<Obfuscation, SpecialJunkKey>> & {
  [Key in SpecialJunkKey]?: string | null;
};

/** `current` with `patch` over it, checked whole. */
export function patchedObfuscation(current: Obfuscation, patch: ObfuscationPatch): Obfuscation {
  const merged: Obfuscation = {
    jc: patch.jc ?? current.jc,
    jmin: patch.jmin ?? current.jmin,
    jmax: patch.jmax ?? current.jmax,
    s1: patch.s1 ?? current.s1,
    s2: patch.s2 ?? current.s2,
    s3: patch.s3 ?? current.s3,
    s4: patch.s4 ?? current.s4,
    h1: patch.h1 ?? current.h1,
    h2: patch.h2 ?? current.h2,
    h3: patch.h3 ?? current.h3,
    h4: patch.h4 ?? current.h4,
  };
  for (const key of SPECIAL_JUNK_KEYS) {
    const value = patch[key] === undefined ? current[key] : patch[key];
    if (typeof value === 'string') merged[key] = value;
  }
  validateObfuscation(merged);
  return merged;
}

/** Whether two sets of parameters are the same (the order of keys aside). */
export function sameObfuscation(a: Obfuscation, b: Obfuscation): boolean {
  const keys = [...NUMBER_KEYS, ...HEADER_KEYS, ...SPECIAL_JUNK_KEYS];
  return keys.every((key) => a[key] === b[key]);
}

/** The protocols a node reported (stored as JSON text); null, not reported yet: WireGuard only, as an older agent. */
export function protocolsOf(stored: string | null): ServerProtocol[] {
  if (stored === null) return ['wireguard'];
  const value: unknown = JSON.parse(stored);
  if (!Array.isArray(value)) return ['wireguard'];
  return SERVER_PROTOCOLS.filter((p) => value.includes(p));
}

/** How the API and messages name a protocol. */
export const PROTOCOL_NAMES: Record<ServerProtocol, string> = { wireguard: 'WireGuard', amneziawg: 'AmneziaWG' };

/** Stored parameters (JSON text) back as an Obfuscation; a value of another shape is a broken row, not input. */
export function parseObfuscation(json: string): Obfuscation {
  const value: unknown = JSON.parse(json);
  if (typeof value !== 'object' || value === null) throw new Error('stored obfuscation is not an object');
  const field = (key: string): unknown => (key in value ? Reflect.get(value, key) : undefined);
  const number = (key: (typeof NUMBER_KEYS)[number]): number => {
    const v = field(key);
    if (typeof v !== 'number') throw new Error(`stored obfuscation has no number ${key}`);
    return v;
  };
  const text = (key: (typeof HEADER_KEYS)[number]): string => {
    const v = field(key);
    if (typeof v !== 'string') throw new Error(`stored obfuscation has no text ${key}`);
    return v;
  };
  const parsed: Obfuscation = {
    jc: number('jc'),
    jmin: number('jmin'),
    jmax: number('jmax'),
    s1: number('s1'),
    s2: number('s2'),
    s3: number('s3'),
    s4: number('s4'),
    h1: text('h1'),
    h2: text('h2'),
    h3: text('h3'),
    h4: text('h4'),
  };
  for (const key of SPECIAL_JUNK_KEYS) {
    const v = field(key);
    if (typeof v === 'string') parsed[key] = v;
  }
  return parsed;
}

/** The parameters as stored: the keys in the order awg-quick writes them. */
export function obfuscationJson(o: Obfuscation): string {
  return JSON.stringify(o, [...NUMBER_KEYS, ...HEADER_KEYS, ...SPECIAL_JUNK_KEYS]);
}
