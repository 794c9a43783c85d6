-- wal2json (format-version 2) rows decoded into changes of a zipper table
-- (zipper_lake._decode_events; src/apply/events/zl_events_wal2json.c)
SET timezone = 'UTC';

CREATE TABLE ev_wal2json_t (id int, name text, big text, amount numeric, ts timestamp,
                            tstz timestamptz, flag boolean, arr int[], j jsonb,
                            valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_wal2json_t', ARRAY['id'], time_zone => 'Europe/Berlin');

-- the output of pg_logical_slot_get_changes(slot, NULL, NULL,
-- 'format-version', '2', 'include-timestamp', '1', 'include-lsn', '1'),
-- rows stored as they came: lsn, xid, data
CREATE TABLE ev_wal2json_events (lsn pg_lsn, xid xid, data text);
INSERT INTO ev_wal2json_events VALUES
('0/1549A08', '734', '{"action":"B","timestamp":"2024-01-02 10:00:00.5+00","lsn":"0/154E0C8","nextlsn":"0/154E0F8"}'),
('0/154DF68', '734', '{"action":"I","timestamp":"2024-01-02 10:00:00.5+00","lsn":"0/154DF68","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":1},{"name":"name","type":"text","value":"a"},{"name":"big","type":"text","value":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},{"name":"amount","type":"numeric","value":1.50},{"name":"ts","type":"timestamp without time zone","value":"2024-01-01 10:00:00"},{"name":"tstz","type":"timestamp with time zone","value":"2024-01-01 08:00:00+00"},{"name":"flag","type":"boolean","value":true},{"name":"arr","type":"integer[]","value":"{1,2}"},{"name":"j","type":"jsonb","value":"{\"a\": 1}"},{"name":"f","type":"double precision","value":null}]}'),
-- a second change of the transaction: the same timestamp, ordered by lsn
('0/154DFA0', '734', '{"action":"I","timestamp":"2024-01-02 10:00:00.5+00","lsn":"0/154DFA0","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":5},{"name":"name","type":"text","value":"e"}]}'),
('0/154E0F8', '734', '{"action":"C","timestamp":"2024-01-02 10:00:00.5+00","lsn":"0/154E0C8","nextlsn":"0/154E0F8"}'),
-- an update that leaves the TOAST value big unchanged: wal2json omits it (kept)
('0/154E0F8', '735', '{"action":"B","timestamp":"2024-01-02 10:01:00+00","lsn":"0/154E1E8","nextlsn":"0/154E218"}'),
('0/154E130', '735', '{"action":"U","timestamp":"2024-01-02 10:01:00+00","lsn":"0/154E130","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":1},{"name":"name","type":"text","value":"b"},{"name":"amount","type":"numeric","value":1.50},{"name":"ts","type":"timestamp without time zone","value":"2024-01-01 10:00:00"},{"name":"tstz","type":"timestamp with time zone","value":"2024-01-01 08:00:00+00"},{"name":"flag","type":"boolean","value":true},{"name":"arr","type":"integer[]","value":"{1,2}"},{"name":"j","type":"jsonb","value":"{\"a\": 1}"},{"name":"f","type":"double precision","value":null}],"identity":[{"name":"id","type":"integer","value":1}]}'),
('0/154E218', '735', '{"action":"C","timestamp":"2024-01-02 10:01:00+00","lsn":"0/154E1E8","nextlsn":"0/154E218"}'),
-- an update that changes the key: identity holds the old one
('0/154E250', '736', '{"action":"U","timestamp":"2024-01-02 10:02:00+00","lsn":"0/154E250","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":2},{"name":"name","type":"text","value":"b"}],"identity":[{"name":"id","type":"integer","value":1}]}'),
-- a delete: the key from identity
('0/154E388', '737', '{"action":"D","timestamp":"2024-01-02 10:03:00+00","lsn":"0/154E388","schema":"public","table":"acct","identity":[{"name":"id","type":"integer","value":2}]}'),
-- a truncate, a message, and a change of another table
('0/154F210', '739', '{"action":"T","timestamp":"2024-01-02 10:04:00+00","lsn":"0/154F210","schema":"public","table":"acct"}'),
('0/154F3F0', '740', '{"action":"M","timestamp":"2024-01-02 10:05:00+00","lsn":"0/154F3F0","transactional":true,"prefix":"pfx","content":"hello"}'),
('0/1550000', '741', '{"action":"I","timestamp":"2024-01-02 10:06:00+00","lsn":"0/1550000","schema":"audit","table":"acct","columns":[{"name":"id","type":"integer","value":1}]}'),
-- a timestamp without a zone is taken in the table's zone (Berlin, +01)
('0/1550100', '742', '{"action":"I","timestamp":"2024-01-02 11:07:00","lsn":"0/1550100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":7},{"name":"tstz","type":"timestamp with time zone","value":"2024-01-02 11:07:00"}]}'),
-- without include-lsn: no position of its own
('0/1550200', '743', '{"action":"I","timestamp":"2024-01-02 10:08:00+00","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":8}]}');

SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_events', 'wal2json', event => 'data')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- the slot's lsn column (pg_lsn) as seq
SELECT op, change_time, seq, sub_seq, event_ref
  FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_events', 'wal2json', event => 'data',
                                  seq => 'lsn')
 WHERE op <> 's'
 ORDER BY change_time, seq, sub_seq, event_ref;

-- one source table: table or schema.table
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_events', 'wal2json', event => 'data',
                                  source_table => 'public.acct')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_events', 'wal2json', event => 'data',
                                  source_table => 'acct')
 GROUP BY op ORDER BY op;

-- Malformed rows reject the batch, naming the row
CREATE TABLE ev_wal2json_bad (lsn pg_lsn, data jsonb);
INSERT INTO ev_wal2json_bad VALUES
('0/10', '{"action":"I","lsn":"0/10","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":1}]}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data', seq => 'lsn');
\echo :SQLSTATE
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/20', '{"action":"X","timestamp":"2024-01-02 10:00:00+00","schema":"public","table":"acct"}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data', seq => 'lsn');
\echo :SQLSTATE
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/30', '{"action":"D","timestamp":"2024-01-02 10:00:00+00","schema":"public","table":"acct"}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data', seq => 'lsn');
\echo :SQLSTATE
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/40', '{"action":"D","timestamp":"2024-01-02 10:00:00+00","schema":"public","table":"acct","identity":[{"name":"name","type":"text","value":"x"}]}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data', seq => 'lsn');
\echo :SQLSTATE
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/50', '{"action":"I","timestamp":"2024-01-02 10:00:00+00","schema":"public","table":"acct","columns":[{"name":"id","type":"integer"}]}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data', seq => 'lsn');
\echo :SQLSTATE
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/60', '{"action":"I","timestamp":"2024-01-02 10:00:00+00","lsn":"zero","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":1}]}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data');
\echo :SQLSTATE
-- format-version 1 (one row a transaction) is not understood
TRUNCATE ev_wal2json_bad;
INSERT INTO ev_wal2json_bad VALUES
('0/70', '{"change":[{"kind":"insert","schema":"public","table":"acct","columnnames":["id"],"columntypes":["integer"],"columnvalues":[1]}]}');
SELECT * FROM zipper_lake._decode_events('ev_wal2json_t', 'ev_wal2json_bad', 'wal2json', event => 'data');
\echo :SQLSTATE

-- Refused without a change (README "Loading CDC events"): a timestamp or a
-- date or time value that depends on the clock (now, today, tomorrow,
-- yesterday in any case, also with a time), and a columns or identity list
-- naming a column twice.  Each batch also holds a valid row (id 100), which
-- must not land either
SELECT changes FROM zipper_lake.apply_events('ev_wal2json_t', 'ev_wal2json_events', 'wal2json',
                                             event => 'data', source_table => 'public.acct');
CREATE TABLE ev_wal2json_before AS SELECT * FROM ev_wal2json_t;
CREATE TABLE ev_wal2json_try_events (data jsonb);
CREATE FUNCTION ev_wal2json_try(bad jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    TRUNCATE ev_wal2json_try_events;
    INSERT INTO ev_wal2json_try_events VALUES
    ('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000000","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":100}]}'),
    (bad);
    SELECT changes INTO n FROM zipper_lake.apply_events('ev_wal2json_t', 'ev_wal2json_try_events', 'wal2json',
                                                        event => 'data');
    RETURN n;
END $$;
\set SHOW_CONTEXT never
SELECT ev_wal2json_try('{"action":"I","timestamp":"now","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"I","timestamp":"TOMORROW 10:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101},{"name":"tstz","type":"timestamp with time zone","value":"today"}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101},{"name":"ts","type":"timestamp without time zone","value":" Now"}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101},{"name":"id","type":"integer","value":102}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101},{"name":"name","type":"text","value":"a"},{"name":"name","type":"text","value":"b"}]}');
\echo :SQLSTATE
SELECT ev_wal2json_try('{"action":"D","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","identity":[{"name":"id","type":"integer","value":1},{"name":"id","type":"integer","value":5}]}');
\echo :SQLSTATE
SELECT count(*) AS differences
  FROM ((TABLE ev_wal2json_t EXCEPT ALL TABLE ev_wal2json_before) UNION ALL (TABLE ev_wal2json_before EXCEPT ALL TABLE ev_wal2json_t)) d;
\set SHOW_CONTEXT errors
-- accepted: fixed special values; names that differ only in case are no
-- duplicates (the exact match wins)
SELECT ev_wal2json_try('{"action":"I","timestamp":"2024-03-01 10:00:00+00","lsn":"0/2000100","schema":"public","table":"acct","columns":[{"name":"id","type":"integer","value":101},{"name":"ID","type":"integer","value":102},{"name":"ts","type":"timestamp without time zone","value":"epoch"},{"name":"tstz","type":"timestamp with time zone","value":"infinity"}]}');
SELECT id, ts, tstz FROM ev_wal2json_t WHERE id > 100 ORDER BY id;
