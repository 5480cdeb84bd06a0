/**
 * Console passwords (issue 14): the time of one scrypt hash for OWASP's settings of equal strength at different
 * memory costs, and how many sign-ins a second the panel's PasswordHasher checks (two hashes at a time, so the
 * other two libuv threads stay free for file access and DNS). Each timing is the median of 7.
 * Run: node bench/passwords.ts
 */
import { scrypt } from 'node:crypto';
import { SCRYPT_PARAMS, type ScryptParams, scryptMaxmem } from '../src/domain/passwords.ts';
import { PasswordHasher } from '../src/services/passwords.ts';
import { loadAverage, machine, median, timed, writeSection } from './report.ts';

const RUNS = 7;
const SIGN_INS = 20;
/** OWASP Password Storage Cheat Sheet: these are equally strong; they trade memory for CPU. */
const SETTINGS: ScryptParams[] = [
  { N: 2 ** 17, r: 8, p: 1 },
  { N: 2 ** 16, r: 8, p: 2 },
  { N: 2 ** 15, r: 8, p: 3 },
  { N: 2 ** 14, r: 8, p: 5 },
];

function hashOnce(params: ScryptParams): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt('correct horse battery', 'a salt of 16 b..', 32, { ...params, maxmem: scryptMaxmem(params) }, (e, key) =>
      e ? reject(e) : resolve(key),
    ),
  );
}

const ms = (value: number) => `${value.toFixed(0)} ms`;
const load = loadAverage();
const rows: string[] = [];
for (const params of SETTINGS) {
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) runs.push((await timed(() => hashOnce(params))).wallMs);
  const chosen = params.N === SCRYPT_PARAMS.N && params.p === SCRYPT_PARAMS.p ? ' (chosen)' : '';
  const memory = `${(128 * params.N * params.r) / 2 ** 20} MiB`;
  rows.push(`| N=2^${Math.log2(params.N)}, r=${params.r}, p=${params.p}${chosen} | ${memory} | ${ms(median(runs))} |`);
}

const hasher = new PasswordHasher();
const stored = await hasher.hash('correct horse battery');
const batches: number[] = [];
for (let i = 0; i < 3; i++) {
  const { wallMs } = await timed(() =>
    Promise.all(Array.from({ length: SIGN_INS }, () => hasher.verify('wrong password!', stored))),
  );
  batches.push(wallMs);
}
const perSecond = (SIGN_INS * 1000) / median(batches);

writeSection(
  'Console passwords',
  `Command: \`node bench/passwords.ts\`. Machine: ${machine()}, load average ${load} before.

One scrypt hash (node:crypto, 32-byte key) for each of OWASP's equally strong settings, median of ${RUNS}:

| setting | memory | one hash |
|---|---|---|
${rows.join('\n')}

The panel uses N=2^15, r=8, p=3: the strength of OWASP's first setting at a quarter of its memory, so four
sign-ins at once hold 128 MiB, not 512. A sign-in for an unknown user hashes too (against a hash no password
matches), so the answer's time does not say whether a name exists. The PasswordHasher runs two hashes at a time:
${SIGN_INS} sign-ins at once were checked at **${perSecond.toFixed(1)} a second** (median of 3 batches), with the
other libuv threads free. Per client address, 30 attempts at once and then ten a minute are allowed
(SIGN_IN_ADDRESS_RATE): one address keeps the hasher busy for about ${(30 / perSecond).toFixed(0)} s at first, then
${((10 / 60 / perSecond) * 100).toFixed(0)} % of its time.`,
);
console.log(rows.join('\n'));
console.log(`${perSecond.toFixed(1)} sign-ins a second`);
