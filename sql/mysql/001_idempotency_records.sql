-- nestjs-idempotency MySqlStore schema, version 001: exactly what createSchema runs with the defaults
-- (tableName 'idempotency_records'), for MySQL 8.0.29+ and MariaDB 10.6+. Apply it with your migration tool
-- (the DELIMITER lines are the mysql client's) and set createSchema: false. Another table name: store.schemaSql().
CREATE TABLE IF NOT EXISTS `idempotency_records` (
  `key` VARBINARY(3072) NOT NULL,
  fingerprint VARBINARY(1024) NOT NULL,
  state TINYINT NOT NULL,
  owner VARBINARY(255) NULL,
  expires_at DATETIME(3) NOT NULL,
  record LONGBLOB NULL,
  PRIMARY KEY (`key`),
  KEY `idempotency_records_expires_at` (expires_at)
) ENGINE=InnoDB ROW_FORMAT=DYNAMIC;
DELIMITER //
CREATE PROCEDURE IF NOT EXISTS `idempotency_records_claim`(IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_fingerprint VARBINARY(1024), IN p_lease_ms BIGINT)
claim: BEGIN
  DECLARE v_state TINYINT;
  DECLARE v_fingerprint VARBINARY(1024);
  DECLARE v_owner VARBINARY(255);
  DECLARE v_record LONGBLOB;
  DECLARE v_attempt INT DEFAULT 0;
  WHILE v_attempt < 10 DO
    SET v_attempt = v_attempt + 1, v_state = NULL;
    SELECT state, fingerprint, owner, record INTO v_state, v_fingerprint, v_owner, v_record
      FROM `idempotency_records` WHERE `key` = p_key AND expires_at > UTC_TIMESTAMP(3);
    IF v_state IS NOT NULL THEN
      SELECT v_state = 0 AND v_owner <=> p_owner AS claimed, v_state AS state, v_fingerprint AS fingerprint, v_record AS record;
      LEAVE claim;
    END IF;
    INSERT INTO `idempotency_records` (`key`, fingerprint, state, owner, expires_at, record)
      VALUES (p_key, p_fingerprint, 0, p_owner, UTC_TIMESTAMP(3) + INTERVAL p_lease_ms * 1000 MICROSECOND, NULL)
      ON DUPLICATE KEY UPDATE
        fingerprint = IF(expires_at <= UTC_TIMESTAMP(3), VALUES(fingerprint), fingerprint),
        state = IF(expires_at <= UTC_TIMESTAMP(3), 0, state),
        owner = IF(expires_at <= UTC_TIMESTAMP(3), VALUES(owner), owner),
        record = IF(expires_at <= UTC_TIMESTAMP(3), NULL, record),
        expires_at = IF(expires_at <= UTC_TIMESTAMP(3), VALUES(expires_at), expires_at);
  END WHILE;
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'idempotency claim did not settle after 10 attempts';
END //
CREATE PROCEDURE IF NOT EXISTS `idempotency_records_complete`(IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_record LONGBLOB, IN p_ttl_ms BIGINT)
BEGIN
  UPDATE `idempotency_records` SET state = 1, owner = NULL, record = p_record,
    expires_at = UTC_TIMESTAMP(3) + INTERVAL p_ttl_ms * 1000 MICROSECOND
  WHERE `key` = p_key AND owner = p_owner AND state = 0 AND expires_at > UTC_TIMESTAMP(3);
  SELECT ROW_COUNT() AS completed;
END //
DELIMITER ;
