import type { ColumnDefinitionBuilder } from 'kysely';
import type { Dialect } from './db.ts';

/**
 * What a migration needs to know of the database it runs on. Apart from migrate.ts, which imports every
 * migration, so that the migrations need not import it back.
 */
export interface MigrationContext {
  /** For what only one database has (storage settings). */
  dialect: Dialect;
  /** The type of an auto-numbered integer primary key column. */
  idType: 'integer' | 'bigserial';
  /** Makes that column the primary key; ids of deleted rows are never handed out again. */
  id: (column: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
}
