-- README "Loading CDC events": apply_events applies decoded events like
-- apply_changes (the fold, its counts) and counts what it skipped.
SET timezone = 'UTC';
SET datestyle = 'ISO';
CREATE TABLE ae (id int, name text, balance numeric, valid_from timestamptz NOT NULL,
                 valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ae', ARRAY['id']);
CREATE FUNCTION ae_show() RETURNS TABLE (id int, name text, balance numeric, valid_from text, valid_to text)
LANGUAGE sql AS $$
    SELECT id, name, balance, to_char(valid_from, 'MM-DD HH24:MI'),
           CASE WHEN valid_to = 'infinity' THEN 'open' ELSE to_char(valid_to, 'MM-DD HH24:MI') END
      FROM ae ORDER BY id, valid_from
$$;

-- Debezium (payload only): a snapshot read (source.ts_ms 0: the envelope's
-- ts_ms), inserts, two updates of one millisecond stored out of lsn order,
-- an unchanged TOAST value kept, a delete with only the key, a tombstone,
-- another table's event; 1704189600000 ms = 01-02 10:00
CREATE TABLE ae_dbz (event jsonb);
INSERT INTO ae_dbz VALUES
('{"before": null, "after": {"id": 1, "name": "ann", "balance": "10"},
  "source": {"ts_ms": 0, "lsn": 100, "table": "account"}, "op": "r", "ts_ms": 1704189600000}'),
('{"before": null, "after": {"id": 2, "name": "bob", "balance": "5"},
  "source": {"ts_ms": 1704189660000, "lsn": 200, "table": "account"}, "op": "c", "ts_ms": 1704189660500}'),
('{"before": null, "after": {"id": 1, "name": "ann", "balance": "12"},
  "source": {"ts_ms": 1704189720000, "lsn": 400, "table": "account"}, "op": "u", "ts_ms": 1704189720500}'),
('{"before": null, "after": {"id": 1, "name": "ann", "balance": "11"},
  "source": {"ts_ms": 1704189720000, "lsn": 300, "table": "account"}, "op": "u", "ts_ms": 1704189720500}'),
('{"before": null, "after": {"id": 2, "name": "__debezium_unavailable_value", "balance": "6"},
  "source": {"ts_ms": 1704189780000, "lsn": 500, "table": "account"}, "op": "u", "ts_ms": 1704189780500}'),
('{"before": {"id": 1}, "after": null,
  "source": {"ts_ms": 1704189840000, "lsn": 600, "table": "account"}, "op": "d", "ts_ms": 1704189840500}'),
(NULL),
('{"before": null, "after": {"id": 9, "name": "other", "balance": "0"},
  "source": {"ts_ms": 1704189840000, "lsn": 650, "table": "orders"}, "op": "c", "ts_ms": 1704189840500}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium', source_table => 'account');
SELECT * FROM ae_show();
-- re-applied: nothing
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium', source_table => 'account');
-- a late event in a later batch takes effect until the next change applied
TRUNCATE ae_dbz;
INSERT INTO ae_dbz VALUES
('{"before": null, "after": {"id": 2, "name": "bob", "balance": "5.5"},
  "source": {"ts_ms": 1704189690000, "lsn": 250, "table": "account"}, "op": "u", "ts_ms": 1704189690500}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium');
SELECT * FROM ae_show() WHERE id = 2;
-- a truncate deletes every key then
TRUNCATE ae_dbz;
INSERT INTO ae_dbz VALUES
('{"source": {"ts_ms": 1704193200000, "lsn": 700, "table": "account"}, "op": "t", "ts_ms": 1704193200500}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium');
SELECT count(*) AS open FROM ae WHERE valid_to = 'infinity';
-- every event skipped (a wrong source_table) is an error; so is an event
-- lacking a value column, unless missing_columns says otherwise
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium', source_table => 'acount');
\echo :SQLSTATE
TRUNCATE ae_dbz;
INSERT INTO ae_dbz VALUES
('{"before": null, "after": {"id": 5, "name": "eve"},
  "source": {"ts_ms": 1704196800000, "lsn": 800, "table": "account"}, "op": "c", "ts_ms": 1704196800500}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium', missing_columns => 'null');
-- a null event column is refused as _decode_events refuses it (shared check)
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium', event => NULL);
\echo :SQLSTATE
SELECT * FROM ae_show() WHERE id = 5;
-- a value its column's type does not take: the type's error, naming the
-- event, the column and the value; nothing applied
TRUNCATE ae_dbz;
INSERT INTO ae_dbz VALUES
('{"before": null, "after": {"id": 6, "name": "fay", "balance": "1"},
  "source": {"ts_ms": 1704196900000, "lsn": 810, "table": "account"}, "op": "c", "ts_ms": 1704196900500}'),
('{"before": null, "after": {"id": "seven", "name": "gus", "balance": "1"},
  "source": {"ts_ms": 1704196900000, "lsn": 820, "table": "account"}, "op": "c", "ts_ms": 1704196900500}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_dbz', 'debezium');
\echo :SQLSTATE
SELECT count(*) AS fay FROM ae WHERE id = 6;

-- Canal: several rows in one event (array order), a DDL event skipped; es in ms
CREATE TABLE ae_canal (event text);
INSERT INTO ae_canal VALUES
('{"data": [{"id": "10", "name": "c1", "balance": "1"}, {"id": "11", "name": "c2", "balance": "2"}],
  "database": "shop", "table": "account", "es": 1704200400000, "isDdl": false, "type": "INSERT"}'),
('{"data": null, "database": "shop", "table": "account", "es": 1704200400000, "isDdl": true,
  "type": "ALTER", "sql": "ALTER TABLE account ADD x int"}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_canal', 'canal');
-- Canal with a seq column (e.g. the Kafka offset): rows of one event follow
-- each other in array order after it
CREATE TABLE ae_canal_seq (kafka_offset bigint, event text);
INSERT INTO ae_canal_seq VALUES
(7, '{"data": [{"id": "12", "name": "first", "balance": "1"}, {"id": "12", "name": "second", "balance": "1"}],
      "database": "shop", "table": "account", "es": 1704200400000, "isDdl": false, "type": "INSERT"}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_canal_seq', 'canal', seq => 'kafka_offset');
SELECT name FROM ae WHERE id = 12;
-- Maxwell: ts in seconds, xid/xoffset order
CREATE TABLE ae_maxwell (event json);
INSERT INTO ae_maxwell VALUES
('{"database": "shop", "table": "account", "type": "update", "ts": 1704204000, "xid": 7, "xoffset": 1,
  "data": {"id": 10, "name": "c1", "balance": 3}, "old": {"balance": 1}}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_maxwell', 'maxwell');
-- GoldenGate: op_ts without a zone, in the table's time zone (UTC)
CREATE TABLE ae_ogg (event jsonb);
INSERT INTO ae_ogg VALUES
('{"table": "SHOP.ACCOUNT", "op_type": "D", "op_ts": "2024-01-02 14:00:00.000000", "pos": "00000000000000002000",
  "before": {"ID": 11, "NAME": "c2", "BALANCE": 2}}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_ogg', 'ogg');
-- wal2json (format-version 2): a column it leaves out (unchanged TOAST) is kept
CREATE TABLE ae_w2j (event jsonb);
INSERT INTO ae_w2j VALUES
('{"action": "U", "schema": "public", "table": "account", "timestamp": "2024-01-02 15:00:00+00", "lsn": "0/3000",
  "columns": [{"name": "id", "type": "integer", "value": 10}, {"name": "balance", "type": "numeric", "value": 4}],
  "identity": [{"name": "id", "type": "integer", "value": 10}]}');
SELECT * FROM zipper_lake.apply_events('ae', 'ae_w2j', 'wal2json');
SELECT * FROM ae_show() WHERE id >= 10;
SELECT * FROM zipper_lake.verify('ae');
DROP TABLE ae, ae_dbz, ae_canal, ae_canal_seq, ae_maxwell, ae_ogg, ae_w2j;
DROP FUNCTION ae_show();
