-- Canal flat messages decoded into changes of a zipper table
-- (zipper_lake._decode_events; src/apply/events/zl_events_canal.c)
SET timezone = 'UTC';

CREATE TABLE ev_canal_t (id bigint, name text, price numeric(10,2), made timestamp, seen timestamptz,
                         valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_canal_t', ARRAY['id'], time_zone => 'Asia/Shanghai');

-- es is the time of the change in milliseconds: 1704189600000 = 2024-01-02
-- 10:00:00 UTC; values are strings; rows of an event are kept in array order
CREATE TABLE ev_canal_events (event jsonb);
INSERT INTO ev_canal_events VALUES
-- three rows inserted by one statement
('{"data": [{"id": "1", "name": "ann", "price": "10.50", "made": "2024-01-02 18:00:00", "seen": "2024-01-02 18:00:00"},
            {"id": "2", "name": "bob", "price": null, "made": null, "seen": "2024-01-02 18:00:00+00"},
            {"id": "3", "name": "cid", "price": "1", "extra": "ignored"}],
  "database": "shop", "es": 1704189600000, "id": 7, "isDdl": false,
  "mysqlType": {"id": "bigint", "name": "varchar(20)", "price": "decimal(10,2)"},
  "old": null, "pkNames": ["id"], "sql": "", "sqlType": {"id": -5, "name": 12, "price": 3},
  "table": "product", "ts": 1704189600123, "type": "INSERT"}'),
-- an update of two rows: old holds the changed columns' old values; the
-- second row changes its key (3 to 30): a delete of 3 before the upsert of 30
('{"data": [{"id": "1", "name": "ann", "price": "11.00", "made": "2024-01-02 18:00:00", "seen": null},
            {"id": "30", "name": "cid", "price": "1"}],
  "database": "shop", "es": 1704189660000, "id": 8, "isDdl": false,
  "old": [{"price": "10.50"}, {"id": "3"}], "pkNames": ["id"],
  "table": "product", "ts": 1704189660123, "type": "UPDATE"}'),
-- an update without old
('{"data": [{"id": "2", "name": "bob b"}],
  "database": "shop", "es": 1704189720000, "id": 9, "isDdl": false, "old": null,
  "table": "product", "ts": 1704189720123, "type": "UPDATE"}'),
-- a delete of two rows: their keys
('{"data": [{"id": "2", "name": "bob b", "price": null}, {"id": "30", "name": "cid", "price": "1"}],
  "database": "shop", "es": 1704189780000, "id": 10, "isDdl": false, "old": null,
  "table": "product", "ts": 1704189780123, "type": "DELETE"}'),
-- DDL events are skipped
('{"data": null, "database": "shop", "es": 1704189840000, "id": 11, "isDdl": true,
  "old": null, "sql": "ALTER TABLE product ADD COLUMN note text", "table": "product",
  "ts": 1704189840123, "type": "ALTER"}'),
('{"data": null, "database": "shop", "es": 1704189840000, "id": 12, "isDdl": true,
  "old": null, "sql": "TRUNCATE product", "table": "product", "ts": 1704189840123, "type": "TRUNCATE"}'),
('{"data": null, "database": "shop", "es": 1704189840000, "id": 13,
  "sql": "CREATE TABLE x (a int)", "table": "x", "ts": 1704189840123, "type": "CREATE"}'),
-- another table
('{"data": [{"id": "1", "name": "not a product"}], "database": "shop", "es": 1704189900000, "id": 14,
  "isDdl": false, "old": null, "table": "orders", "ts": 1704189900123, "type": "INSERT"}'),
-- lower-case type
('{"data": [{"id": "4", "name": "dan"}], "database": "shop", "es": 1704189960000, "id": 15,
  "isDdl": false, "table": "product", "ts": 1704189960123, "type": "insert"}');

SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_events', 'canal')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- one source table: its name or database.table; the others are skipped
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_events', 'canal', source_table => 'product')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_events', 'canal', source_table => 'shop.orders')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_events', 'canal', source_table => 'other.product')
 GROUP BY op ORDER BY op;

-- Canal has no position of its own: events at one millisecond are ordered
-- by a seq column (here the Kafka offset), rows of an event by sub_seq
CREATE TABLE ev_canal_kafka (kafka_offset bigint, event text);
INSERT INTO ev_canal_kafka VALUES
(101, '{"data": [{"id": "5", "name": "second"}], "database": "shop", "es": 1704189600000,
        "isDdl": false, "table": "product", "type": "UPDATE", "old": [{"name": "first"}]}'),
(100, '{"data": [{"id": "5", "name": "first"}, {"id": "6", "name": "x"}], "database": "shop",
        "es": 1704189600000, "isDdl": false, "table": "product", "type": "INSERT"}');
SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_kafka', 'canal', seq => 'kafka_offset')
 ORDER BY change_time, seq, sub_seq, event_ref;
SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_kafka', 'canal')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- Malformed events reject the batch, naming the event
CREATE TABLE ev_canal_bad (kafka_offset bigint, event text);
INSERT INTO ev_canal_bad VALUES
(1, '{"data": [{"id": "1"}], "es": 1704189600000, "table": "product", "type": "INSERT"}'),
(2, '{"data": {"id": "1"}, "es": 1704189600000, "table": "product", "type": "INSERT"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(3, '{"data": [{"id": "1"}], "es": 1704189600000, "table": "product", "type": "UPSERT"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(4, '{"data": [{"id": "1"}], "ts": 1704189600000, "table": "product", "type": "INSERT"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(5, '{"data": [], "es": 1704189600000, "table": "product", "type": "DELETE"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(6, '{"data": [{"id": "1"}, "2"], "es": 1704189600000, "table": "product", "type": "INSERT"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(7, '{"data": [{"id": "1"}, {"name": "no key"}], "es": 1704189600000, "table": "product", "type": "DELETE"}');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE
TRUNCATE ev_canal_bad;
INSERT INTO ev_canal_bad VALUES
(8, '{"data": [{"id": "1"}], "es": 1704189600000, "table": "product", "type": "INSERT"');
SELECT * FROM zipper_lake._decode_events('ev_canal_t', 'ev_canal_bad', 'canal', seq => 'kafka_offset');
\echo :SQLSTATE

-- Refused without a change (README "Loading CDC events"): isDdl that is no
-- boolean, an old array of more rows than data, a date or time value that
-- depends on the clock.  Each batch also holds a valid event (id 100),
-- which must not land either
SELECT changes FROM zipper_lake.apply_events('ev_canal_t', 'ev_canal_events', 'canal', source_table => 'product',
                                             missing_columns => 'keep');
CREATE TABLE ev_canal_before AS SELECT * FROM ev_canal_t;
CREATE TABLE ev_canal_try_events (event jsonb);
CREATE FUNCTION ev_canal_try(bad jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    TRUNCATE ev_canal_try_events;
    INSERT INTO ev_canal_try_events VALUES
    ('{"data": [{"id": "100", "name": "new"}], "database": "shop", "table": "product",
       "es": 1704290000000, "isDdl": false, "type": "INSERT"}'),
    (bad);
    SELECT changes INTO n FROM zipper_lake.apply_events('ev_canal_t', 'ev_canal_try_events', 'canal',
                                                        missing_columns => 'keep');
    RETURN n;
END $$;
\set SHOW_CONTEXT never
SELECT ev_canal_try('{"data": [{"id": "101"}], "table": "product", "es": 1704290000000, "isDdl": "yes", "type": "INSERT"}');
\echo :SQLSTATE
SELECT ev_canal_try('{"data": [{"id": "101"}], "table": "product", "es": 1704290000000, "isDdl": 0, "type": "INSERT"}');
\echo :SQLSTATE
SELECT ev_canal_try('{"data": [{"id": "1", "name": "x"}], "table": "product", "es": 1704290000000, "isDdl": false,
                      "type": "UPDATE", "old": [{"name": "ann"}, {"id": "2"}]}');
\echo :SQLSTATE
SELECT ev_canal_try('{"data": [{"id": "101", "made": "now"}], "table": "product", "es": 1704290000000, "isDdl": false, "type": "INSERT"}');
\echo :SQLSTATE
SELECT ev_canal_try('{"data": [{"id": "101", "seen": "Yesterday 10:00"}], "table": "product", "es": 1704290000000, "isDdl": false, "type": "INSERT"}');
\echo :SQLSTATE
SELECT count(*) AS differences
  FROM ((TABLE ev_canal_t EXCEPT ALL TABLE ev_canal_before) UNION ALL (TABLE ev_canal_before EXCEPT ALL TABLE ev_canal_t)) d;
\set SHOW_CONTEXT errors
-- accepted: isDdl null (as absent); old of fewer rows than data (Canal
-- leaves out the old values of a row whose update changed no column)
SELECT ev_canal_try('{"data": [{"id": "101", "name": "a"}, {"id": "102", "name": "b"}], "table": "product",
                      "es": 1704290000000, "isDdl": null, "type": "UPDATE", "old": [{"name": "z"}]}');
SELECT id, name FROM ev_canal_t WHERE id > 100 ORDER BY id;
