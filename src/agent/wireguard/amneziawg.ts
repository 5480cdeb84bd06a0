/**
 * An AmneziaWG server's obfuscation as amneziawg-go's UAPI holds it (device/uapi.go of amneziawg-go v0.2.16): the
 * device keys `jc`, `jmin`, `jmax`, `s1`-`s4`, `h1`-`h4`, `i1`-`i5`. `get=1` leaves out a number that is 0 and an
 * `i` never set, and prints a header range `A-A` as `A`. `set=1` refuses `jc`, `jmin`, `jmax` of 0, and an `i` once
 * set cannot be unset, so a change to those needs a new interface; every other change is applied in place
 * (docs/dataplane.md, "AmneziaWG").
 */
import type { Obfuscation } from '../../domain/protocols.ts';

export const AMNEZIAWG_SOCKET_DIR = '/var/run/amneziawg';

const NUMBER_KEYS = ['jc', 'jmin', 'jmax', 's1', 's2', 's3', 's4'] as const;
const HEADER_KEYS = ['h1', 'h2', 'h3', 'h4'] as const;
const PACKET_KEYS = ['i1', 'i2', 'i3', 'i4', 'i5'] as const;
const OBFUSCATION_KEYS: readonly string[] = [...NUMBER_KEYS, ...HEADER_KEYS, ...PACKET_KEYS];
/** The paddings: settable to 0 in place (the junk numbers are not). */
const ZEROABLE = new Set(['s1', 's2', 's3', 's4']);

/** The device lines `get=1` answers for `o`, by key, in the order set=1 takes them. */
export function obfuscationKeys(o: Obfuscation): Map<string, string> {
  const keys = new Map<string, string>();
  for (const key of NUMBER_KEYS) if (o[key] !== 0) keys.set(key, String(o[key]));
  for (const key of HEADER_KEYS) keys.set(key, headerSpec(o[key]));
  for (const key of PACKET_KEYS) {
    const value = o[key];
    if (value !== undefined) keys.set(key, value);
  }
  return keys;
}

export interface ObfuscationChange {
  /** The keys to set in place (a padding back to 0 as `0`); empty when nothing differs. */
  set: Map<string, string>;
  /** A difference set=1 cannot make: the interface must be made anew. */
  recreate: boolean;
}

/** What turns the device's obfuscation `have` (Dump.deviceKeys) into `want`. */
export function obfuscationChange(
  have: Readonly<Record<string, string>> | undefined,
  want: Obfuscation,
): ObfuscationChange {
  const set = new Map<string, string>();
  let recreate = false;
  for (const [key, , wanted] of differences(have, want)) {
    if (wanted !== undefined) set.set(key, wanted);
    else if (ZEROABLE.has(key)) set.set(key, '0');
    else recreate = true;
  }
  return { set, recreate };
}

/** What differs between the device's obfuscation and `want`, one line each (the drift check). */
export function obfuscationProblems(
  iface: string,
  have: Readonly<Record<string, string>> | undefined,
  want: Obfuscation,
): string[] {
  const shown = (key: string, value: string | undefined): string =>
    value === undefined ? `no ${key}` : `${key}=${value}`;
  return differences(have, want).map(
    ([key, found, wanted]) => `interface ${iface} has ${shown(key, found)}, not ${shown(key, wanted)}`,
  );
}

/** [key, the device's value, the wanted one] for each obfuscation key where they differ; undefined: absent. */
function differences(
  have: Readonly<Record<string, string>> | undefined,
  want: Obfuscation,
): [string, string | undefined, string | undefined][] {
  const wanted = obfuscationKeys(want);
  const found = new Map(Object.entries(have ?? {}).filter(([key]) => OBFUSCATION_KEYS.includes(key)));
  return OBFUSCATION_KEYS.filter((key) => found.get(key) !== wanted.get(key)).map((key) => [
    key,
    found.get(key),
    wanted.get(key),
  ]);
}

/** A header as amneziawg-go prints it: `A-B` with A = B as `A`, numbers without leading zeros. */
function headerSpec(spec: string): string {
  const range = /^(\d+)(?:-(\d+))?$/.exec(spec);
  if (range === null) return spec;
  const [start, end] = [Number(range[1]), Number(range[2] ?? range[1])];
  return start === end ? String(start) : `${start}-${end}`;
}
