import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { MySqlStore, PostgresStore, SqliteStore } from '../../lib/index.js';
import { derivedName } from '../../lib/stores/postgres/postgres.schema.js';

/** A shipped migration without its leading comment lines: the DDL itself. */
function ddl(path: string): string {
  return readFileSync(path, 'utf8').replace(/^(--[^\n]*\n)+/, '');
}

describe('the SQL files shipped for migration tools', () => {
  it('are versioned, one folder per store', () => {
    expect(readdirSync('sql').sort()).toEqual(['mysql', 'postgres', 'sqlite']);
    expect(readdirSync('sql/postgres').sort()).toEqual([
      '001_idempotency_records.sql',
      '002_idempotency_phases.sql',
      '003_idempotency_claim_reads_first.sql',
      '004_idempotency_phases_exact.sql',
    ]);
    expect(readdirSync('sql/sqlite')).toEqual(['001_idempotency_records.sql']);
    expect(readdirSync('sql/mysql')).toEqual(['001_idempotency_records.sql']);
  });

  it('hold exactly what createSchema runs with the default names', async () => {
    const postgres = new PostgresStore({ connectionString: 'postgres://127.0.0.1:1/none', sweepIntervalMs: 0 });
    const sqlite = new SqliteStore({ filename: ':memory:', sweepIntervalMs: 0 });
    // Applied in order, the versions make up what createSchema runs.
    expect(
      ddl('sql/postgres/001_idempotency_records.sql') +
        ddl('sql/postgres/002_idempotency_phases.sql') +
        ddl('sql/postgres/003_idempotency_claim_reads_first.sql') +
        ddl('sql/postgres/004_idempotency_phases_exact.sql'),
    ).toBe(postgres.schemaSql());
    expect(ddl('sql/sqlite/001_idempotency_records.sql')).toBe(sqlite.schemaSql());
    const mysql = new MySqlStore({ uri: 'mysql://127.0.0.1:1/none', sweepIntervalMs: 0 });
    expect(ddl('sql/mysql/001_idempotency_records.sql')).toBe(mysql.schemaSql());
    await Promise.all([postgres.close(), sqlite.close(), mysql.close()]);
  });

  it('name an object derived from a long table by the table cut short and a hash only past 63 bytes', () => {
    const fits = 'a'.repeat(63 - '_claim2'.length);
    expect(derivedName(fits, 'claim2')).toBe(`${fits}_claim2`);
    const long = derivedName(`${fits}b`, 'claim2');
    expect(long).toHaveLength(63);
    expect(long).toMatch(/^a{47}_[0-9a-f]{8}_claim2$/);
  });
});
