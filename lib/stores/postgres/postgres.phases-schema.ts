import { derivedName, type PostgresNames } from './postgres.schema.js';

// The recovery points' table (`atomicPhases` routes): its DDL, migration by migration, and the
// columns the verifier checks.

/** The table of recovery points (`atomicPhases` routes), beside the records: `<table>_phases`. */
export const PHASES_SUFFIX = 'phases';

/**
 * The recovery points' DDL: one row per key whose phased run has committed a phase and not finished,
 * the results of its phases by name. A row of its own, not columns of the record's: a claim's row is
 * deleted when the handler fails and taken over (reset) when its lease lapses, and both must leave the
 * recovery point for the retry that resumes. It lives for the route's ttl from its last phase.
 */
export function phasesSchemaSql({ schema, table }: PostgresNames): string {
  const t = `"${schema}"."${derivedName(table, PHASES_SUFFIX)}"`;
  return `CREATE TABLE IF NOT EXISTS ${t} (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  results jsonb NOT NULL,
  workflow text,
  input jsonb,
  updated_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "${derivedName(table, 'phases_expires_at')}" ON ${t} (expires_at);
`;
}

/**
 * Migration 004: each phase's result and the workflow's input as the JSON text the run made, beside
 * the `jsonb` columns. `jsonb` refuses a NUL or a lone surrogate in a string (such a result failed
 * every retry), reorders object keys (a response a completer finished had other bytes than a fresh
 * run's) and forgets the order of the phases. `texts` is an array of `[phase, json]` in commit order.
 * Pods of earlier releases go on reading and writing `results` and `input`, still written.
 */
export function phasesExactSql({ schema, table }: PostgresNames): string {
  const t = `"${schema}"."${derivedName(table, PHASES_SUFFIX)}"`;
  return `ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS texts jsonb;
ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS input_text text;
`;
}

/** The recovery point's columns of migration 004 ({@link phasesExactSql}). */
export const EXACT_COLUMNS: Readonly<Record<string, string>> = { texts: 'jsonb', input_text: 'text' };

/** The recovery point's columns of migration 002, as the verifier checks them. */
export const PHASES_COLUMNS: Readonly<Record<string, string>> = {
  key: 'text',
  fingerprint: 'text',
  results: 'jsonb',
  workflow: 'text',
  input: 'jsonb',
  updated_at: 'timestamp with time zone',
  expires_at: 'timestamp with time zone',
};
