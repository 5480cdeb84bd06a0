import { type RawBuilder, sql } from 'kysely';
import { isPostgres, type Queryable } from './db.ts';

/**
 * The database's clock `offsetMs` from now, as the ISO text every time column holds. Leases are timed on
 * it, so panels whose clocks disagree still agree on when a lease ends.
 */
function databaseTime(db: Queryable, offsetMs: number): RawBuilder<string> {
  if (isPostgres(db)) {
    const at = sql`clock_timestamp() + ${offsetMs}::integer * interval '1 millisecond'`;
    return sql<string>`to_char((${at}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  }
  return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`${offsetMs / 1000} seconds`})`;
}

/**
 * Takes lease `name` for `holder` for `ttlMs`, or renews it when `holder` has it: true when `holder`
 * holds it now. One statement, so of two panels claiming at once exactly one gets a free or lapsed lease.
 */
export async function claimLease(db: Queryable, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const row = await db
    .insertInto('duty_leases')
    .values({ name, holder, expires_at: databaseTime(db, ttlMs) })
    .onConflict((oc) =>
      oc
        .column('name')
        .doUpdateSet((eb) => ({ holder: eb.ref('excluded.holder'), expires_at: eb.ref('excluded.expires_at') }))
        .where((eb) =>
          eb.or([eb('duty_leases.holder', '=', holder), eb('duty_leases.expires_at', '<=', databaseTime(db, 0))]),
        ),
    )
    .returning('holder')
    .executeTakeFirst();
  return row !== undefined;
}

/** Gives lease `name` up at once if `holder` has it, so another panel need not wait for it to lapse. */
export async function releaseLease(db: Queryable, name: string, holder: string): Promise<void> {
  await db.deleteFrom('duty_leases').where('name', '=', name).where('holder', '=', holder).execute();
}
