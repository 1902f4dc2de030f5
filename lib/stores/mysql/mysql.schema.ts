/** The claim procedure of `table`: its name is the table's with `_claim`. */
export const claimProcedure = (table: string): string => `${table}_claim`;

/** The transactional completion's procedure: an UPDATE that answers its row count as a row. */
export const completeProcedure = (table: string): string => `${table}_complete`;

/**
 * The longest store key in bytes: the primary key is `VARBINARY(3072)`, InnoDB's bound on an index
 * key. A key of 255 characters under a 255-character scope is at most about 2,500 bytes in UTF-8.
 */
export const MAX_KEY_BYTES = 3072;

/**
 * One row per key, as in the PostgreSQL store: `expires_at` is the end of the lease while the
 * handler runs and the end of the record once it is stored, UTC, from the database's clock
 * (`UTC_TIMESTAMP(3)`, whatever the session's `time_zone`). Every text column is binary: keys and
 * owners are compared byte for byte, never by a case- or accent-insensitive collation that would
 * make `Key-A` and `key-a` one key.
 */
function tableSql(table: string): string {
  return `CREATE TABLE IF NOT EXISTS \`${table}\` (
  \`key\` VARBINARY(${MAX_KEY_BYTES}) NOT NULL,
  fingerprint VARBINARY(1024) NOT NULL,
  state TINYINT NOT NULL,
  owner VARBINARY(255) NULL,
  expires_at DATETIME(3) NOT NULL,
  record LONGBLOB NULL,
  PRIMARY KEY (\`key\`),
  KEY \`${table}_expires_at\` (expires_at)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC`;
}

/**
 * A claim in one round trip. MySQL has no `RETURNING` and no `ON CONFLICT … WHERE`, so the decision
 * is a procedure: a plain (non-locking) read of the live row first, so a replay or a conflict writes
 * and locks nothing; otherwise an insert that takes over an expired row in place (`expires_at` is
 * assigned last: MySQL evaluates the assignments in order, and the earlier ones must still see the
 * old expiry), then the read again, which now finds the row, ours or a faster claimant's. Each
 * statement commits on its own (autocommit), so each read sees the latest row. The caller's own
 * live claim answers "claimed": a claim retried after a lost connection is not refused by itself.
 */
function claimSql(table: string): string {
  const expired = 'expires_at <= UTC_TIMESTAMP(3)';
  return `CREATE PROCEDURE IF NOT EXISTS \`${claimProcedure(table)}\`(IN p_key VARBINARY(${MAX_KEY_BYTES}), IN p_owner VARBINARY(255), IN p_fingerprint VARBINARY(1024), IN p_lease_ms BIGINT)
claim: BEGIN
  DECLARE v_state TINYINT;
  DECLARE v_fingerprint VARBINARY(1024);
  DECLARE v_owner VARBINARY(255);
  DECLARE v_record LONGBLOB;
  DECLARE v_attempt INT DEFAULT 0;
  WHILE v_attempt < 10 DO
    SET v_attempt = v_attempt + 1, v_state = NULL;
    SELECT state, fingerprint, owner, record INTO v_state, v_fingerprint, v_owner, v_record
      FROM \`${table}\` WHERE \`key\` = p_key AND expires_at > UTC_TIMESTAMP(3);
    IF v_state IS NOT NULL THEN
      SELECT v_state = 0 AND v_owner <=> p_owner AS claimed, v_state AS state, v_fingerprint AS fingerprint, v_record AS record;
      LEAVE claim;
    END IF;
    INSERT INTO \`${table}\` (\`key\`, fingerprint, state, owner, expires_at, record)
      VALUES (p_key, p_fingerprint, 0, p_owner, UTC_TIMESTAMP(3) + INTERVAL p_lease_ms * 1000 MICROSECOND, NULL)
      ON DUPLICATE KEY UPDATE
        fingerprint = IF(${expired}, VALUES(fingerprint), fingerprint),
        state = IF(${expired}, 0, state),
        owner = IF(${expired}, VALUES(owner), owner),
        record = IF(${expired}, NULL, record),
        expires_at = IF(${expired}, VALUES(expires_at), expires_at);
  END WHILE;
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'idempotency claim did not settle after 10 attempts';
END`;
}

/**
 * The fenced completion in the application's transaction, as a procedure so that it answers a row
 * (`completed`: 1 or 0) through any driver's `query`, which for an UPDATE returns a result header,
 * not rows. Only within the claim's lease: past `transactionTimeoutMs` the key may have been taken.
 */
function completeSql(table: string): string {
  return `CREATE PROCEDURE IF NOT EXISTS \`${completeProcedure(table)}\`(IN p_key VARBINARY(${MAX_KEY_BYTES}), IN p_owner VARBINARY(255), IN p_record LONGBLOB, IN p_ttl_ms BIGINT)
BEGIN
  UPDATE \`${table}\` SET state = 1, owner = NULL, record = p_record,
    expires_at = UTC_TIMESTAMP(3) + INTERVAL p_ttl_ms * 1000 MICROSECOND
  WHERE \`key\` = p_key AND owner = p_owner AND state = 0 AND expires_at > UTC_TIMESTAMP(3);
  SELECT ROW_COUNT() AS completed;
END`;
}

/** The statements `createSchema` runs, in order, each sent alone. */
export function mysqlSchemaStatements(table: string): string[] {
  return [tableSql(table), claimSql(table), completeSql(table)];
}

/**
 * The same statements as one script for the `mysql` client and migration tools that read its
 * `DELIMITER` lines (the procedures' bodies hold semicolons): `sql/mysql/001_idempotency_records.sql`.
 */
export function mysqlSchemaSql(table: string): string {
  const [create, ...procedures] = mysqlSchemaStatements(table);
  return `${create};\nDELIMITER //\n${procedures.map((p) => `${p} //\n`).join('')}DELIMITER ;\n`;
}
