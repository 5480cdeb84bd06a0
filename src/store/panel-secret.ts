import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Queryable, write } from './db.ts';
import type { Store } from './open.ts';
import { formatSecret, parseSecret, SECRET_BYTES } from '../domain/panel-secret.ts';
import { sealPlainValues, SecretBox } from './encryption.ts';
import { preparePrivateDir, tightenIfPresent } from '../platform/private-files.ts';

/** Where the panel secret comes from: `PANEL_SECRET`, else this file in DATA_DIR. */
export const SECRET_FILE = 'panel.secret';
/** The panel_settings key of the fingerprint of the secret the database's values are sealed with. */
const FINGERPRINT_KEY = 'secret_fingerprint';

export interface SecretOptions {
  dataDir: string;
  /** PANEL_SECRET, already checked to be 32 bytes. */
  panelSecret: Buffer | undefined;
}

/** The panel secret is missing or is not the one the database was sealed with: start-up stops with this line. */
export class PanelSecretError extends Error {}

interface GivenSecret {
  secret: Buffer;
  /** How the operator names it: `PANEL_SECRET` or the file's path. */
  source: string;
}

function isErrno(error: unknown, code: string): boolean {
  return error instanceof Error && 'code' in error && error.code === code;
}

/** The secret this process was given (PANEL_SECRET, else DATA_DIR/panel.secret), if any. */
function givenSecret(options: SecretOptions): GivenSecret | undefined {
  if (options.panelSecret !== undefined) return { secret: options.panelSecret, source: 'PANEL_SECRET' };
  const path = join(options.dataDir, SECRET_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw error;
  }
  const secret = parseSecret(text.trim());
  if (secret === undefined)
    throw new PanelSecretError(`${path} is not a panel secret (${SECRET_BYTES} bytes in base64)`);
  // A copy an operator made with cp (moving a panel) is 0644.
  tightenIfPresent(path);
  return { secret, source: path };
}

/** A new secret in DATA_DIR/panel.secret, readable by the panel's user only; another process's file wins a race. */
function createSecretFile(dataDir: string): GivenSecret {
  preparePrivateDir(dataDir);
  const path = join(dataDir, SECRET_FILE);
  const secret = randomBytes(SECRET_BYTES);
  try {
    writeFileSync(path, `${formatSecret(secret)}\n`, { mode: 0o600, flag: 'wx' });
    return { secret, source: path };
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw error;
    const existing = givenSecret({ dataDir, panelSecret: undefined });
    if (existing === undefined) throw error;
    return existing;
  }
}

/** The fingerprint of the secret the database's values are sealed with; undefined before the first start. */
export async function sealedWith(db: Queryable): Promise<string | undefined> {
  const row = await db
    .selectFrom('panel_settings')
    .select('value')
    .where('key', '=', FINGERPRINT_KEY)
    .executeTakeFirst();
  return row?.value;
}

/**
 * The box of the secret given to this process, checked against the fingerprint a database (or a
 * backup) was sealed under; `undefined` fingerprint: nothing sealed yet, any secret (or none) does.
 */
export function secretFor(fingerprint: string | undefined, options: SecretOptions): SecretBox | undefined {
  const given = givenSecret(options);
  if (fingerprint === undefined) return given && new SecretBox(given.secret);
  if (given === undefined) {
    throw new PanelSecretError(
      `the private keys are encrypted with a panel secret that is not here (fingerprint ${fingerprint}): ` +
        `copy ${SECRET_FILE} of the panel they come from into ${options.dataDir}, or set PANEL_SECRET`,
    );
  }
  const box = new SecretBox(given.secret);
  if (box.fingerprint !== fingerprint) {
    throw new PanelSecretError(
      `${given.source} is not the panel secret the private keys are encrypted with ` +
        `(fingerprint ${fingerprint}, this one ${box.fingerprint}); use the secret of the panel they come from`,
    );
  }
  return box;
}

/**
 * Opens the database's secrets at start: checks the given secret against the one the database is
 * sealed with; on first start makes the secret (unless given) and records its fingerprint. Values
 * still in plain are sealed in the same transaction.
 */
export async function unlockSecrets(store: Store, options: SecretOptions): Promise<SecretBox> {
  const existing = secretFor(await sealedWith(store.db), options);
  const box = existing ?? new SecretBox(createSecretFile(options.dataDir).secret);
  await write(store.db, async (tx) => {
    await tx
      .insertInto('panel_settings')
      .values({ key: FINGERPRINT_KEY, value: box.fingerprint })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    // Two first starts at once on one PostgreSQL: the first recorded fingerprint holds.
    secretFor(await sealedWith(tx), options);
    await sealPlainValues(tx, store.dialect, box);
  });
  return box;
}
