import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

/**
 * The agent's own TLS certificate: an ECDSA P-256 key and a self-signed X.509 v3 certificate, made
 * with node:crypto and the small DER writer below (Node cannot issue certificates, and no dependency
 * or `openssl` binary is needed on a node). The panel trusts it by its SHA-256 fingerprint, not by a CA.
 */

/** The form `nodes add --cert-sha256` documents and the agent logs: 64 upper-case hex digits, no colons. */
export function certSha256(der: Buffer): string {
  return createHash('sha256').update(der).digest('hex').toUpperCase();
}

/** A fingerprint as an operator may paste it (any case, with or without colons); undefined when it is none. */
export function parseCertSha256(text: string): string | undefined {
  const hex = text.trim().replaceAll(':', '').toUpperCase();
  return /^[0-9A-F]{64}$/.test(hex) ? hex : undefined;
}

// DER (X.690): tag, definite length, contents.
function der(tag: number, ...contents: Buffer[]): Buffer {
  const body = Buffer.concat(contents);
  const length = body.length;
  if (length < 0x80) return Buffer.concat([Buffer.from([tag, length]), body]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n % 256);
  return Buffer.concat([Buffer.from([tag, 0x80 | bytes.length, ...bytes]), body]);
}

const sequence = (...items: Buffer[]) => der(0x30, ...items);
const set = (...items: Buffer[]) => der(0x31, ...items);
const octetString = (bytes: Buffer) => der(0x04, bytes);
/** A BIT STRING of whole bytes (no unused bits). */
const bitString = (bytes: Buffer) => der(0x03, Buffer.from([0]), bytes);
const utf8String = (text: string) => der(0x0c, Buffer.from(text, 'utf8'));
const explicit = (n: number, inner: Buffer) => der(0xa0 | n, inner);
const TRUE = der(0x01, Buffer.from([0xff]));

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const bytes = [first * 40 + second];
  for (const arc of rest) {
    const groups: number[] = [];
    for (let n = arc; ; n = Math.floor(n / 128)) {
      groups.unshift((n % 128) | (groups.length === 0 ? 0 : 0x80));
      if (n < 128) break;
    }
    bytes.push(...groups);
  }
  return der(0x06, Buffer.from(bytes));
}

/** UTCTime until 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5). */
function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]|\.\d{3}/g, '');
  if (date.getUTCFullYear() < 2050) return der(0x17, Buffer.from(iso.slice(2), 'ascii'));
  return der(0x18, Buffer.from(iso, 'ascii'));
}

function ipv6Bytes(address: string): Buffer {
  let text = address;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  // An embedded IPv4 tail (::ffff:192.0.2.1) is two 16-bit groups.
  if (v4?.[1] !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = Buffer.alloc(16);
  for (const [i, group] of groups.entries()) bytes.writeUInt16BE(parseInt(group, 16), i * 2);
  return bytes;
}

/** The subjectAltName entry for a host: iPAddress [7] for an address, dNSName [2] for a name. */
function generalName(host: string): Buffer {
  const version = isIP(host);
  if (version === 4) return der(0x87, Buffer.from(host.split('.').map(Number)));
  if (version === 6) return der(0x87, ipv6Bytes(host));
  return der(0x82, Buffer.from(host, 'ascii'));
}

export interface CertificatePem {
  keyPem: string;
  certPem: string;
}

const VALIDITY_YEARS = 10;

/** A new key and a self-signed certificate for `host` (the node's PUBLIC_HOST), valid for 10 years. */
export function makeSelfSignedCertificate(host: string, now: Date): CertificatePem {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecdsaWithSha256 = sequence(oid('1.2.840.10045.4.3.2'));
  const name = sequence(set(sequence(oid('2.5.4.3'), utf8String('vpn-panel node'))));
  const notAfter = new Date(now);
  notAfter.setUTCFullYear(now.getUTCFullYear() + VALIDITY_YEARS);
  const extensions = sequence(
    sequence(oid('2.5.29.19'), TRUE, octetString(sequence())), // basicConstraints, critical: not a CA
    sequence(oid('2.5.29.17'), octetString(sequence(generalName(host)))), // subjectAltName
  );
  const tbs = sequence(
    explicit(0, der(0x02, Buffer.from([2]))), // v3
    der(0x02, Buffer.from([0x01]), randomBytes(15)), // serial: 128 random bits, positive and minimal
    ecdsaWithSha256,
    name,
    sequence(time(new Date(now.getTime() - 60 * 60 * 1000)), time(notAfter)), // an hour back: clocks differ
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, extensions),
  );
  const certificate = sequence(tbs, ecdsaWithSha256, bitString(sign('sha256', tbs, privateKey)));
  const body = certificate.toString('base64').replace(/.{1,64}/g, '$&\n');
  return {
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    certPem: `-----BEGIN CERTIFICATE-----\n${body}-----END CERTIFICATE-----\n`,
  };
}

export interface AgentCertificate {
  key: Buffer;
  cert: Buffer;
  /** certSha256 of the certificate. */
  sha256: string;
  certFile: string;
  /** True when this start made the key and certificate. */
  created: boolean;
}

/** The certificate's fingerprint; throws naming the file when it holds no certificate. */
export function loadCertificate(certFile: string, keyFile: string): AgentCertificate {
  const cert = readFileSync(certFile);
  const sha256 = certSha256(new X509Certificate(cert).raw);
  return { key: readFileSync(keyFile), cert, sha256, certFile, created: false };
}

export const AGENT_KEY_FILE = 'agent-tls-key.pem';
export const AGENT_CERT_FILE = 'agent-tls-cert.pem';

/**
 * The agent's key and certificate in `dataDir`, made at the first start and reused after. Files are
 * written 0600 under temporary names (O_EXCL: never through a planted link) and renamed into place,
 * the certificate last, so a start interrupted half-way makes a new pair next time.
 */
export function loadOrCreateAgentCertificate(dataDir: string, host: string, now: Date): AgentCertificate {
  const keyFile = join(dataDir, AGENT_KEY_FILE);
  const certFile = join(dataDir, AGENT_CERT_FILE);
  if (existsSync(certFile) && existsSync(keyFile)) return loadCertificate(certFile, keyFile);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const made = makeSelfSignedCertificate(host, now);
  for (const [file, text] of [
    [keyFile, made.keyPem],
    [certFile, made.certPem],
  ] as const) {
    const temporary = `${file}.new`;
    rmSync(temporary, { force: true });
    writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' });
    renameSync(temporary, file);
  }
  return { ...loadCertificate(certFile, keyFile), created: true };
}
