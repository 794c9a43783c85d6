-- Maxwell events decoded into changes of a zipper table
-- (zipper_lake._decode_events; src/apply/events/zl_events_maxwell.c)
SET timezone = 'UTC';

CREATE TABLE ev_maxwell_t (id int, name text, qty int, sizes text[], born date,
                           valid_from timestamp NOT NULL, valid_to timestamp NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_maxwell_t', ARRAY['id']);

-- ts is in seconds: 1704189600 = 2024-01-02 10:00:00 UTC.  The default order
-- at one time is the transaction (xid) and the row's offset in it (xoffset)
CREATE TABLE ev_maxwell_events (event json);
INSERT INTO ev_maxwell_events VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "xid": 8249, "xoffset": 0,
  "data": {"id": 1, "name": "ann", "qty": 3, "sizes": ["S", "M"], "born": "2001-02-03"}}'),
-- the rest of the transaction, stored out of order
('{"database": "shop", "table": "item", "type": "update", "ts": 1704189600, "xid": 8249, "xoffset": 2,
  "commit": true, "data": {"id": 1, "name": "ann", "qty": 5, "sizes": ["S", "M"], "born": "2001-02-03"},
  "old": {"qty": 4}}'),
('{"database": "shop", "table": "item", "type": "update", "ts": 1704189600, "xid": 8249, "xoffset": 1,
  "data": {"id": 1, "name": "ann", "qty": 4, "sizes": ["S", "M"], "born": "2001-02-03"},
  "old": {"qty": 3}}'),
-- a later transaction in the same second
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "xid": 8250,
  "commit": true, "data": {"id": 2, "name": "bob", "qty": null, "sizes": [], "born": null}}'),
-- an update that changes the key: old holds the old id
('{"database": "shop", "table": "item", "type": "update", "ts": 1704189660, "xid": 8251, "xoffset": 0,
  "commit": true, "data": {"id": 20, "name": "bob", "qty": null}, "old": {"id": 2}}'),
-- a delete: its key
('{"database": "shop", "table": "item", "type": "delete", "ts": 1704189720, "xid": 8252,
  "commit": true, "data": {"id": 1, "name": "ann", "qty": 5}}'),
-- a bootstrap (snapshot): its rows are upserts, start and complete are skipped
('{"database": "shop", "table": "item", "type": "bootstrap-start", "ts": 1704189780, "data": {}}'),
('{"database": "shop", "table": "item", "type": "bootstrap-insert", "ts": 1704189780,
  "data": {"id": 3, "name": "cid", "qty": 1}}'),
('{"database": "shop", "table": "item", "type": "bootstrap-complete", "ts": 1704189780, "data": {}}'),
-- DDL events are skipped
('{"type": "table-alter", "database": "shop", "table": "item", "ts": 1704189840,
  "sql": "ALTER TABLE item ADD COLUMN note text", "old": {}, "def": {}}'),
('{"type": "database-create", "database": "shop2", "ts": 1704189840, "sql": "CREATE DATABASE shop2"}'),
-- another table
('{"database": "shop", "table": "orders", "type": "insert", "ts": 1704189900, "xid": 8253,
  "data": {"id": 1, "name": "not an item"}}');

SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_events', 'maxwell')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- one source table
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_events', 'maxwell', source_table => 'shop.item')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_events', 'maxwell', source_table => 'orders')
 GROUP BY op ORDER BY op;

-- Malformed events reject the batch, naming the event
CREATE TABLE ev_maxwell_bad (event text);
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": "2024-01-02", "data": {"id": 1}}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600.5, "data": {"id": 1}}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "replace", "ts": 1704189600, "data": {"id": 1}}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "insert", "data": {"id": 1}}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "delete", "ts": 1704189600}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "xid": 1, "xoffset": -1, "data": {"id": 1}}');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE
TRUNCATE ev_maxwell_bad;
INSERT INTO ev_maxwell_bad VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "data": {"id": 1}, }');
SELECT * FROM zipper_lake._decode_events('ev_maxwell_t', 'ev_maxwell_bad', 'maxwell');
\echo :SQLSTATE

-- A date value that depends on the clock (today) is refused, and nothing
-- changes (README "Loading CDC events"); a fixed special value is accepted
CREATE TABLE ev_maxwell_try (event text);
INSERT INTO ev_maxwell_try VALUES
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "data": {"id": 1, "born": "2001-02-03"}}'),
('{"database": "shop", "table": "item", "type": "insert", "ts": 1704189600, "data": {"id": 2, "born": "today"}}');
SELECT * FROM zipper_lake.apply_events('ev_maxwell_t', 'ev_maxwell_try', 'maxwell', missing_columns => 'keep');
\echo :SQLSTATE
SELECT count(*) FROM ev_maxwell_t;
-- the same word inside a JSON array or object (the date/time parser skips
-- punctuation, so ["today"] and {"on": "today"} read as today)
UPDATE ev_maxwell_try SET event = replace(event, '"today"', '["today"]');
SELECT * FROM zipper_lake.apply_events('ev_maxwell_t', 'ev_maxwell_try', 'maxwell', missing_columns => 'keep');
\echo :SQLSTATE
UPDATE ev_maxwell_try SET event = replace(event, '["today"]', '{"on": "today"}');
SELECT * FROM zipper_lake.apply_events('ev_maxwell_t', 'ev_maxwell_try', 'maxwell', missing_columns => 'keep');
\echo :SQLSTATE
SELECT count(*) FROM ev_maxwell_t;
UPDATE ev_maxwell_try SET event = replace(event, '{"on": "today"}', '"today"');
UPDATE ev_maxwell_try SET event = replace(event, '"today"', '"-infinity"');
SELECT * FROM zipper_lake.apply_events('ev_maxwell_t', 'ev_maxwell_try', 'maxwell', missing_columns => 'keep');
SELECT id, born FROM ev_maxwell_t ORDER BY id;
