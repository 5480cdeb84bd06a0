import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';

interface OldShareLink {
  device_id: number;
  token: string;
  expires_at: string | null;
  created_at: string;
}

interface NewShareLink extends OldShareLink {
  token_hash: string;
}

/** Rows a statement inserts: 5 values each, far below either database's limit on bound values. */
const BATCH_ROWS = 500;

/**
 * Share links are found by the SHA-256 of their token (`token_hash`). The token stays in `token`
 * only to show the link's URL again; the panel seals it with its secret at the next start
 * (ENCRYPTED_COLUMNS), like every value written before encryption. Existing links keep working.
 * The table is made anew (rows held in memory: one per device at most) because SQLite can add
 * neither a NOT NULL column without a default nor drop the old unique constraint on `token`; the
 * hash is computed here, not by a shared helper, so this migration never changes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<OldShareLink>`select device_id, token, expires_at, created_at from share_links`.execute(
    db,
  );
  await db.schema.dropTable('share_links').execute();
  await db.schema
    .createTable('share_links')
    .addColumn('device_id', 'integer', (c) => c.primaryKey().references('devices.id').onDelete('cascade'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('token', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  for (let i = 0; i < rows.length; i += BATCH_ROWS) {
    const values = rows.slice(i, i + BATCH_ROWS).map((row) => ({
      device_id: row.device_id,
      token_hash: createHash('sha256').update(row.token).digest('hex'),
      token: row.token,
      expires_at: row.expires_at,
      created_at: row.created_at,
    }));
    await db.withTables<{ share_links: NewShareLink }>().insertInto('share_links').values(values).execute();
  }
}
