-- Debezium events decoded into changes of a zipper table
-- (zipper_lake._decode_events; src/apply/events/zl_events_debezium.c)
SET timezone = 'UTC';

CREATE TABLE ev_debezium_t (id int, name text, balance numeric, opened date,
                            updated timestamp, seen timestamptz, alarm time, active boolean,
                            tags text[], data bytea,
                            valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_debezium_t', ARRAY['id'], time_zone => 'Europe/Berlin');

-- payload-only events (schemas.enable = false), decimal.handling.mode =
-- string; 1704189600000 ms = 2024-01-02 10:00:00 UTC
CREATE TABLE ev_debezium_events (event jsonb);
INSERT INTO ev_debezium_events VALUES
-- an insert: fields that are no columns (extra, valid_from) are ignored
('{"before": null, "after": {"id": 1, "name": "ann", "balance": "10.50", "opened": "2024-01-02",
   "updated": "2024-01-02 11:00:00", "seen": "2024-01-02 11:00:00", "active": true,
   "tags": ["a", "b c", null, "q\"uote"], "extra": "ignored", "valid_from": "ignored"},
  "source": {"ts_ms": 1704189600000, "lsn": 1000, "db": "shop", "schema": "public", "table": "account"},
  "op": "c", "ts_ms": 1704189600900}'),
-- snapshot rows: source.ts_ms 0 or absent, the envelope's ts_ms is the time
('{"before": null, "after": {"id": 2, "name": "bob", "balance": 5},
  "source": {"ts_ms": 0, "lsn": 900, "db": "shop", "schema": "public", "table": "account"},
  "op": "r", "ts_ms": 1704189000000}'),
('{"before": null, "after": {"id": 3, "name": "cid"},
  "source": {"lsn": 900, "db": "shop", "schema": "public", "table": "account"},
  "op": "r", "ts_ms": 1704189000000}'),
-- an update without before (REPLICA IDENTITY DEFAULT); a zoned time for the
-- timestamptz column keeps its offset
('{"before": null, "after": {"id": 1, "name": "ann", "balance": "11.00", "seen": "2024-01-02T12:00:00Z"},
  "source": {"ts_ms": 1704189660000, "lsn": 1100, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189660900}'),
-- two changes at one time: ordered by lsn (they are stored the other way round)
('{"before": null, "after": {"id": 2, "name": "bob2"},
  "source": {"ts_ms": 1704189720000, "lsn": 1300, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189720900}'),
('{"before": null, "after": {"id": 2, "name": "bob1"},
  "source": {"ts_ms": 1704189720000, "lsn": 1200, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189720900}'),
-- an update that changes the key (REPLICA IDENTITY FULL before): a delete of
-- 3 and an upsert of 30 at the same time
('{"before": {"id": 3, "name": "cid", "balance": null},
  "after": {"id": 30, "name": "cid", "balance": null},
  "source": {"ts_ms": 1704189780000, "lsn": 1400, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189780900}'),
-- the same key: not a key change
('{"before": {"id": 1, "name": "ann"}, "after": {"id": 1, "name": "ann b"},
  "source": {"ts_ms": 1704189840000, "lsn": 1500, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189840900}'),
-- unchanged TOAST values (a text and an array): kept, so not listed
('{"before": null, "after": {"id": 2, "name": "__debezium_unavailable_value",
   "tags": ["__debezium_unavailable_value"], "balance": "6"},
  "source": {"ts_ms": 1704189900000, "lsn": 1600, "db": "shop", "schema": "public", "table": "account"},
  "op": "u", "ts_ms": 1704189900900}'),
-- a delete whose before holds only the key
('{"before": {"id": 30}, "after": null,
  "source": {"ts_ms": 1704189960000, "lsn": 1700, "db": "shop", "schema": "public", "table": "account"},
  "op": "d", "ts_ms": 1704189960900}'),
-- tombstones: NULL, JSON null
(NULL),
('null'),
-- a truncate
('{"source": {"ts_ms": 1704190020000, "lsn": 1800, "db": "shop", "schema": "public", "table": "account"},
  "op": "t", "ts_ms": 1704190020900}'),
-- a logical decoding message: skipped
('{"source": {"ts_ms": 1704190080000, "lsn": 1900, "db": "shop", "schema": "public", "table": ""},
  "op": "m", "ts_ms": 1704190080900, "message": {"prefix": "p", "content": "aGk="}}'),
-- another table of the same source
('{"before": null, "after": {"id": 1, "name": "not an account"},
  "source": {"ts_ms": 1704190140000, "lsn": 2000, "db": "shop", "schema": "public", "table": "other"},
  "op": "c", "ts_ms": 1704190140900}'),
-- upper-case field names (Oracle) match lower-case columns; an exact match
-- wins over a folded one (ID 4 and id 40: the key is 40)
('{"before": null, "after": {"ID": 5, "NAME": "eve", "Balance": "1"},
  "source": {"ts_ms": 1704190200000, "scn": "9000", "schema": "SHOP", "table": "ACCOUNT"},
  "op": "c", "ts_ms": 1704190200900}'),
('{"before": null, "after": {"ID": 4, "id": 40, "NAME": "fay"},
  "source": {"ts_ms": 1704190200000, "scn": "9001", "schema": "SHOP", "table": "ACCOUNT"},
  "op": "c", "ts_ms": 1704190200900}'),
-- MySQL: the position is binlog file number, pos and row
('{"before": null, "after": {"id": 6, "active": false},
  "source": {"ts_ms": 1704190260000, "file": "mysql-bin.000003", "pos": 4567, "row": 1, "db": "shop", "table": "account"},
  "op": "c", "ts_ms": 1704190260900}'),
-- SQL Server: change_lsn
('{"before": null, "after": {"id": 7},
  "source": {"ts_ms": 1704190320000, "change_lsn": "00000027:00000758:0003", "db": "shop", "schema": "dbo", "table": "account"},
  "op": "c", "ts_ms": 1704190320900}');

SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- only the events of one source table: its name, or qualified by schema,
-- or by database and schema; the others are skipped
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium',
                                  source_table => 'account')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium',
                                  source_table => 'public.account')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium',
                                  source_table => 'shop.public.account')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium',
                                  source_table => 'nosuchtable')
 GROUP BY op ORDER BY op;

-- the same events as json and as text decode alike
CREATE TABLE ev_debezium_text (event text);
INSERT INTO ev_debezium_text SELECT event::text FROM ev_debezium_events ORDER BY ctid;
CREATE TABLE ev_debezium_json (event json);
INSERT INTO ev_debezium_json SELECT event::json FROM ev_debezium_events ORDER BY ctid;
SELECT count(*) AS differ FROM (
  (SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium')
   EXCEPT ALL
   SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_text', 'debezium'))
  UNION ALL
  (SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_text', 'debezium')
   EXCEPT ALL
   SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_json', 'debezium'))) x;

-- a seq column orders the events instead of their own position, and names
-- them in errors; another event column name
CREATE TABLE ev_debezium_kafka (kafka_offset bigint, value jsonb);
INSERT INTO ev_debezium_kafka VALUES
(41, '{"before": null, "after": {"id": 1}, "source": {"ts_ms": 1704189600000, "lsn": 5000}, "op": "c"}'),
(40, '{"before": null, "after": {"id": 2}, "source": {"ts_ms": 1704189600000, "lsn": 6000}, "op": "c"}'),
(NULL, '{"before": null, "after": {"id": 3}, "source": {"ts_ms": 1704189600000, "lsn": 7000}, "op": "c"}');
SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium',
                                  event => 'value', seq => 'kafka_offset')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- with the schema/payload envelope: values decoded by the schema's logical
-- types.  balance: Decimal (scale 2, base64 big-endian two's complement);
-- amount: VariableScaleDecimal; opened: Date (days); updated:
-- MicroTimestamp; seen: NanoTimestamp (a wall-clock value, taken in the
-- table's zone Europe/Berlin for the timestamptz column); alarm: MicroTime;
-- data: bytes (base64)
CREATE TABLE ev_debezium_envelope (event jsonb);
CREATE FUNCTION ev_debezium_enveloped(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('schema', jsonb_build_object(
  'type', 'struct', 'name', 'shop.public.account.Envelope', 'optional', false,
  'fields', jsonb_build_array(
    jsonb_build_object('field', 'before', 'type', 'struct', 'optional', true, 'name', 'shop.public.account.Value', 'fields', f.fields),
    jsonb_build_object('field', 'after', 'type', 'struct', 'optional', true, 'name', 'shop.public.account.Value', 'fields', f.fields),
    jsonb_build_object('field', 'source', 'type', 'struct', 'optional', false, 'name', 'io.debezium.connector.postgresql.Source',
                       'fields', jsonb_build_array(jsonb_build_object('field', 'ts_ms', 'type', 'int64'),
                                                   jsonb_build_object('field', 'lsn', 'type', 'int64'))),
    jsonb_build_object('field', 'op', 'type', 'string', 'optional', false),
    jsonb_build_object('field', 'ts_ms', 'type', 'int64', 'optional', true))),
  'payload', payload)
FROM (SELECT jsonb_build_array(
  jsonb_build_object('field', 'id', 'type', 'int32', 'optional', false),
  jsonb_build_object('field', 'name', 'type', 'string', 'optional', true),
  jsonb_build_object('field', 'balance', 'type', 'bytes', 'optional', true,
                     'name', 'org.apache.kafka.connect.data.Decimal', 'version', 1,
                     'parameters', jsonb_build_object('scale', '2', 'connect.decimal.precision', '40')),
  jsonb_build_object('field', 'amount', 'type', 'struct', 'optional', true,
                     'name', 'io.debezium.data.VariableScaleDecimal', 'version', 1,
                     'fields', jsonb_build_array(jsonb_build_object('field', 'scale', 'type', 'int32'),
                                                 jsonb_build_object('field', 'value', 'type', 'bytes'))),
  jsonb_build_object('field', 'opened', 'type', 'int32', 'optional', true, 'name', 'io.debezium.time.Date', 'version', 1),
  jsonb_build_object('field', 'updated', 'type', 'int64', 'optional', true, 'name', 'io.debezium.time.MicroTimestamp', 'version', 1),
  jsonb_build_object('field', 'seen', 'type', 'int64', 'optional', true, 'name', 'io.debezium.time.NanoTimestamp', 'version', 1),
  jsonb_build_object('field', 'alarm', 'type', 'int64', 'optional', true, 'name', 'io.debezium.time.MicroTime', 'version', 1),
  jsonb_build_object('field', 'data', 'type', 'bytes', 'optional', true)) AS fields) f
$$;
-- a column added after registration
ALTER TABLE ev_debezium_t ADD COLUMN amount numeric;
INSERT INTO ev_debezium_envelope VALUES
(ev_debezium_enveloped('{"before": null, "after": {"id": 1, "name": "ann", "balance": "BBo=",
   "amount": {"scale": 3, "value": "MDk="}, "opened": 19724, "updated": 1704189600000000,
   "seen": 1704189600123456789, "alarm": 36000000000, "data": "3q2+7w=="},
   "source": {"ts_ms": 1704189600000, "lsn": 100}, "op": "c", "ts_ms": 1704189600500}')),
(ev_debezium_enveloped('{"before": null, "after": {"id": 2, "balance": "++Y=",
   "amount": {"scale": 0, "value": "+w=="}, "opened": -1, "updated": -1, "alarm": 0, "data": ""},
   "source": {"ts_ms": 1704189660000, "lsn": 200}, "op": "c", "ts_ms": 1704189660500}')),
(ev_debezium_enveloped('{"before": null, "after": {"id": 3, "balance": "AY7pD/bDc+DuTj8K0g==",
   "amount": {"scale": 2, "value": "/nEW8Ak8jB8RscD1Lg=="}},
   "source": {"ts_ms": 1704189720000, "lsn": 300}, "op": "c", "ts_ms": 1704189720500}')),
(ev_debezium_enveloped('{"before": null, "after": {"id": 4, "balance": "AA==", "amount": {"scale": 1, "value": "AIA="}},
   "source": {"ts_ms": 1704189780000, "lsn": 400}, "op": "r", "ts_ms": 1704189780500}')),
-- unchanged TOAST values in the envelope: a text, and a bytea (its bytes
-- are the placeholder's)
(ev_debezium_enveloped('{"before": null, "after": {"id": 1, "name": "__debezium_unavailable_value",
   "data": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", "balance": "fw=="},
   "source": {"ts_ms": 1704189840000, "lsn": 500}, "op": "u", "ts_ms": 1704189840500}')),
-- a key change and a delete with decoded keys
(ev_debezium_enveloped('{"before": {"id": 4, "name": null}, "after": {"id": 44, "name": null},
   "source": {"ts_ms": 1704189900000, "lsn": 600}, "op": "u", "ts_ms": 1704189900500}')),
(ev_debezium_enveloped('{"before": {"id": 44}, "after": null,
   "source": {"ts_ms": 1704189960000, "lsn": 700}, "op": "d", "ts_ms": 1704189960500}')),
-- a tombstone in the envelope
('{"schema": null, "payload": null}');
SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_envelope', 'debezium')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- the decoded values are accepted by the columns' types
SELECT v.id, v.balance, v.amount, v.opened, v.updated, v.seen, v.alarm, v.data
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_envelope', 'debezium') e,
       LATERAL (SELECT (jsonb_populate_record(NULL::ev_debezium_t,
                                              jsonb_object(e.columns, e.vals))).*) v
 WHERE e.op = 'u'
 ORDER BY e.change_time, e.sub_seq;

-- Time unit variants: Timestamp (ms) and Time (ms), zone-less for a
-- timestamp column; a NanoTime
CREATE TABLE ev_debezium_units (event jsonb);
INSERT INTO ev_debezium_units VALUES
('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [
    {"field": "id", "type": "int32"},
    {"field": "updated", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "seen", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "alarm", "type": "int32", "name": "io.debezium.time.Time"}]}]},
  "payload": {"after": {"id": 1, "updated": 1704189600250, "seen": 1719828000000000, "alarm": 36000500},
              "source": {"ts_ms": 1704189600000}, "op": "c"}}'),
('{"schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [
    {"field": "id", "type": "int32"},
    {"field": "alarm", "type": "int64", "name": "io.debezium.time.NanoTime"}]}]},
  "payload": {"after": {"id": 2, "alarm": 36000000001500},
              "source": {"ts_ms": 1704189600000}, "op": "c"}}');
SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_units', 'debezium')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- Events read through a view have no ctid: they are named by row number
CREATE VIEW ev_debezium_view AS SELECT value AS event FROM ev_debezium_kafka;
SELECT op, event_ref, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_view', 'debezium', event => 'event')
 ORDER BY event_ref;
SELECT op, event_ref, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value')
 ORDER BY event_ref;
-- a partitioned events table: the partition is named too
CREATE TABLE ev_debezium_parted (day int, event jsonb) PARTITION BY LIST (day);
CREATE TABLE ev_debezium_parted_1 PARTITION OF ev_debezium_parted FOR VALUES IN (1);
CREATE TABLE ev_debezium_parted_2 PARTITION OF ev_debezium_parted FOR VALUES IN (2);
INSERT INTO ev_debezium_parted VALUES
(1, '{"after": {"id": 1}, "source": {"ts_ms": 1704189600000}, "op": "c"}'),
(2, '{"after": {"id": 2}, "source": {"ts_ms": 1704189600000}, "op": "c"}');
SELECT op, event_ref, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_parted', 'debezium')
 ORDER BY event_ref;

-- Malformed events reject the batch, naming the event
CREATE TABLE ev_debezium_bad (event text);
INSERT INTO ev_debezium_bad VALUES
('{"after": {"id": 1}, "source": {"ts_ms": 1704189600000}, "op": "c"}'),
('{"after": {"id": 1}, "source": {"ts_ms": 1704189600000}, "op": "c"');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('[1, 2]');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('"c"');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"id": 1}, "source": {"ts_ms": 1704189600000}}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"id": 1}, "source": {"ts_ms": 1704189600000}, "op": "x"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"id": 1}, "source": {"ts_ms": 0}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"id": 1}, "source": {"ts_ms": "1704189600000"}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"id": 1}, "ts_ms": 99999999999999999, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": null, "source": {"ts_ms": 1704189600000}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"after": {"name": "no key"}, "source": {"ts_ms": 1704189600000}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
-- a delete without before (REPLICA IDENTITY NOTHING), or before without the key
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"before": null, "after": null, "source": {"ts_ms": 1704189600000}, "op": "d"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad VALUES ('{"before": {"name": "x"}, "after": null, "source": {"ts_ms": 1704189600000}, "op": "d"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
-- a value its schema does not describe
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad
SELECT ev_debezium_enveloped('{"after": {"id": 1, "balance": 10.5}, "source": {"ts_ms": 1704189600000}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
TRUNCATE ev_debezium_bad;
INSERT INTO ev_debezium_bad
SELECT ev_debezium_enveloped('{"after": {"id": 1, "balance": "not base64!"}, "source": {"ts_ms": 1704189600000}, "op": "c"}');
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad', 'debezium');
\echo :SQLSTATE
-- a seq column names the event by its seq
CREATE TABLE ev_debezium_bad_seq AS SELECT 42 AS s, event FROM ev_debezium_bad;
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_bad_seq', 'debezium', seq => 's');
\echo :SQLSTATE

-- Refused without a change (README "Loading CDC events"): positions that
-- are no integers or no positions of their connector, a Decimal of no
-- bytes, a date or time value that depends on the clock.  Each batch also
-- holds a valid event (id 100), which must not land either
SELECT changes FROM zipper_lake.apply_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value',
                                             seq => 'kafka_offset', missing_columns => 'keep');
CREATE TABLE ev_debezium_before AS SELECT * FROM ev_debezium_t;
CREATE TABLE ev_debezium_try_events (s numeric, event jsonb);
CREATE FUNCTION ev_debezium_try(bad jsonb, bad_seq numeric DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    TRUNCATE ev_debezium_try_events;
    INSERT INTO ev_debezium_try_events VALUES
    (NULL, '{"after": {"id": 100}, "source": {"ts_ms": 1704290000000, "lsn": 1}, "op": "c"}'),
    (bad_seq, bad);
    SELECT changes INTO n FROM zipper_lake.apply_events('ev_debezium_t', 'ev_debezium_try_events', 'debezium',
                                                        seq => 's', missing_columns => 'keep');
    RETURN n;
END $$;
\set SHOW_CONTEXT never
-- positions: a fraction (in lsn or in the seq column), a binlog file without
-- its number, a row beyond the 63 bits of a MySQL position, a malformed SQL
-- Server LSN, an SCN of other than digits
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000, "lsn": 1.5}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000}, "op": "c"}', 2.5);
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000, "file": "mysql-bin", "pos": 4}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000, "file": "mysql-bin.000003", "pos": 4, "row": 2048}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000, "change_lsn": "27:758:3"}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101}, "source": {"ts_ms": 1704290000000, "scn": "9000.5"}, "op": "c"}');
\echo :SQLSTATE
-- Decimals of no bytes (a Decimal, a VariableScaleDecimal)
SELECT ev_debezium_try(ev_debezium_enveloped('{"after": {"id": 101, "balance": ""}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}'));
\echo :SQLSTATE
SELECT ev_debezium_try(ev_debezium_enveloped('{"after": {"id": 101, "amount": {"scale": 2, "value": ""}}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}'));
\echo :SQLSTATE
-- (a VariableScaleDecimal without its scale was refused before)
SELECT ev_debezium_try(ev_debezium_enveloped('{"after": {"id": 101, "amount": {"value": "AQ=="}}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}'));
\echo :SQLSTATE
-- now, today, tomorrow, yesterday (any case) for a timestamptz, date,
-- time or timestamp column
SELECT ev_debezium_try('{"after": {"id": 101, "seen": "now"}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101, "opened": "Today"}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101, "alarm": "NOW"}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}');
\echo :SQLSTATE
SELECT ev_debezium_try('{"after": {"id": 101, "updated": " tomorrow 10:00 "}, "source": {"ts_ms": 1704290000000, "lsn": 2}, "op": "c"}');
\echo :SQLSTATE
SELECT count(*) AS differences
  FROM ((TABLE ev_debezium_t EXCEPT ALL TABLE ev_debezium_before) UNION ALL (TABLE ev_debezium_before EXCEPT ALL TABLE ev_debezium_t)) d;
\set SHOW_CONTEXT errors
-- accepted: positions of integral value (5.0 is 5), fixed special values
SELECT ev_debezium_try('{"after": {"id": 101, "alarm": "allballs", "seen": "infinity"},
                         "source": {"ts_ms": 1704290000000, "lsn": 2.0}, "op": "c"}');
SELECT ev_debezium_try('{"after": {"id": 102}, "source": {"ts_ms": 1704290000000}, "op": "c"}', 7.00);
SELECT id, alarm, seen FROM ev_debezium_t WHERE id > 100 ORDER BY id;

-- Arguments
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'protobuf');
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', 'debezium', event => 'payload');
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'kafka_offset');
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value', seq => 'value');
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value', seq => 'nope');
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_events', NULL);
\echo :SQLSTATE
SELECT * FROM zipper_lake._decode_events('ev_debezium_events', 'ev_debezium_events', 'debezium');
\echo :SQLSTATE
CREATE TABLE ev_debezium_unregistered (id int, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT * FROM zipper_lake._decode_events('ev_debezium_unregistered', 'ev_debezium_events', 'debezium');
\echo :SQLSTATE

-- The events are read as the caller: SELECT on them is needed
CREATE ROLE ev_debezium_reader;
GRANT USAGE ON SCHEMA public TO ev_debezium_reader;
SET ROLE ev_debezium_reader;
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value');
\echo :SQLSTATE
RESET ROLE;
GRANT SELECT (value) ON ev_debezium_kafka TO ev_debezium_reader;
SET ROLE ev_debezium_reader;
-- with SELECT on some columns only, events are named by row number
SELECT op, event_ref, vals
  FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value')
 ORDER BY event_ref;
-- the seq column needs the privilege too
SELECT * FROM zipper_lake._decode_events('ev_debezium_t', 'ev_debezium_kafka', 'debezium', event => 'value',
                                         seq => 'kafka_offset');
\echo :SQLSTATE
RESET ROLE;
REVOKE ALL ON ev_debezium_kafka FROM ev_debezium_reader;
REVOKE ALL ON SCHEMA public FROM ev_debezium_reader;
DROP ROLE ev_debezium_reader;
