-- Oracle GoldenGate JSON events decoded into changes of a zipper table
-- (zipper_lake._decode_events; src/apply/events/zl_events_ogg.c)
SET timezone = 'UTC';

CREATE TABLE ev_ogg_t (cust_code text, name text, city text, credit numeric, since timestamptz,
                       valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_ogg_t', ARRAY['cust_code'], time_zone => 'America/New_York');

-- op_ts has no zone: it is taken in the table's zone (New York, -05 in
-- winter), so 2024-01-02 05:00:00 is 10:00:00 UTC.  Oracle's upper-case
-- column names match the lower-case columns.  pos orders changes at one time
CREATE TABLE ev_ogg_events (event jsonb);
INSERT INTO ev_ogg_events VALUES
('{"table": "QASOURCE.TCUSTMER", "op_type": "I", "op_ts": "2024-01-02 05:00:00.000000",
  "current_ts": "2024-01-02T05:00:01.123000", "pos": "00000000000000001000",
  "after": {"CUST_CODE": "WILL", "NAME": "BG SOFTWARE CO.", "CITY": "SEATTLE", "CREDIT": 100.50,
            "SINCE": "2024-01-02 05:00:00", "STATE": "WA"}}'),
-- two changes at one op_ts, stored out of order: pos orders them
('{"table": "QASOURCE.TCUSTMER", "op_type": "U", "op_ts": "2024-01-02 05:01:00.000000",
  "pos": "00000000000000001300",
  "before": {"CUST_CODE": "WILL", "NAME": "BG SOFTWARE CO.", "CITY": "SEATTLE"},
  "after": {"CUST_CODE": "WILL", "CITY": "DENVER"}}'),
('{"table": "QASOURCE.TCUSTMER", "op_type": "U", "op_ts": "2024-01-02 05:01:00.000000",
  "pos": "00000000000000001200",
  "before": {"CUST_CODE": "WILL", "CITY": "SEATTLE"},
  "after": {"CUST_CODE": "WILL", "CITY": "SEATTLE", "CREDIT": null}}'),
-- an update that changes the key
('{"table": "QASOURCE.TCUSTMER", "op_type": "U", "op_ts": "2024-01-02 05:02:00.000000",
  "pos": "00000000000000001400",
  "before": {"CUST_CODE": "WILL"}, "after": {"CUST_CODE": "BILL", "NAME": "BG SOFTWARE CO."}}'),
-- an update without before
('{"table": "QASOURCE.TCUSTMER", "op_type": "U", "op_ts": "2024-01-02 05:03:00.000000",
  "pos": "00000000000000001500", "after": {"CUST_CODE": "BILL", "NAME": "BG"}}'),
-- a delete: its key from before
('{"table": "QASOURCE.TCUSTMER", "op_type": "D", "op_ts": "2024-01-02 05:04:00.000000",
  "pos": "00000000000000001600", "before": {"CUST_CODE": "BILL", "NAME": "BG", "CITY": "DENVER"}}'),
-- op_ts with a zone keeps it; ISO 8601 with T
('{"table": "QASOURCE.TCUSTMER", "op_type": "I", "op_ts": "2024-01-02T10:05:00.123456+00:00",
  "pos": "00000000000000001700", "after": {"CUST_CODE": "JANE", "NAME": "J"}}'),
-- a truncate; and summer time in New York (-04)
('{"table": "QASOURCE.TCUSTMER", "op_type": "T", "op_ts": "2024-07-02 06:00:00.000000",
  "pos": "00000000000000001800"}'),
-- another table
('{"table": "QASOURCE.TCUSTORD", "op_type": "I", "op_ts": "2024-07-02 06:01:00.000000",
  "pos": "00000000000000001900", "after": {"CUST_CODE": "WILL", "ORDER_ID": 1}}');

SELECT op, change_time, seq, sub_seq, event_ref, columns, vals
  FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_events', 'ogg')
 ORDER BY change_time, seq, sub_seq, event_ref;

-- one source table: the whole name or its table part
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_events', 'ogg', source_table => 'QASOURCE.TCUSTMER')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_events', 'ogg', source_table => 'TCUSTMER')
 GROUP BY op ORDER BY op;
SELECT op, count(*)
  FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_events', 'ogg', source_table => 'CUSTMER')
 GROUP BY op ORDER BY op;

-- Malformed events reject the batch, naming the event
CREATE TABLE ev_ogg_bad (event jsonb);
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "X", "op_ts": "2024-01-02 05:00:00", "after": {"CUST_CODE": "A"}}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE
TRUNCATE ev_ogg_bad;
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "I", "after": {"CUST_CODE": "A"}}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE
TRUNCATE ev_ogg_bad;
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "I", "op_ts": "yesterday at noon", "after": {"CUST_CODE": "A"}}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE
TRUNCATE ev_ogg_bad;
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "I", "op_ts": "2024-01-02 05:00:00", "pos": "00-12", "after": {"CUST_CODE": "A"}}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE
TRUNCATE ev_ogg_bad;
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "D", "op_ts": "2024-01-02 05:00:00", "after": {"CUST_CODE": "A"}}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE
TRUNCATE ev_ogg_bad;
INSERT INTO ev_ogg_bad VALUES
('{"table": "Q.T", "op_type": "U", "op_ts": "2024-01-02 05:00:00", "before": {"CUST_CODE": "A"}, "after": ["A"]}');
SELECT * FROM zipper_lake._decode_events('ev_ogg_t', 'ev_ogg_bad', 'ogg');
\echo :SQLSTATE

-- Times and values that depend on the clock are refused (README "Loading
-- CDC events"): now, today, tomorrow and yesterday, in any case, also with
-- a time or a zone, as op_ts or as the value of a date or time column,
-- would give the batch another meaning each time it is applied.  Each
-- batch also holds a valid event (CUST_CODE NEW), which must not land
-- either: nothing changes
SELECT changes FROM zipper_lake.apply_events('ev_ogg_t', 'ev_ogg_events', 'ogg', source_table => 'TCUSTMER',
                                             missing_columns => 'keep');
CREATE TABLE ev_ogg_before AS SELECT * FROM ev_ogg_t;
CREATE TABLE ev_ogg_try_events (event jsonb);
CREATE FUNCTION ev_ogg_try(bad jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    TRUNCATE ev_ogg_try_events;
    INSERT INTO ev_ogg_try_events VALUES
    ('{"table": "Q.T", "op_type": "I", "op_ts": "2024-03-01 00:00:00", "pos": "1", "after": {"CUST_CODE": "NEW"}}'),
    (bad);
    SELECT changes INTO n FROM zipper_lake.apply_events('ev_ogg_t', 'ev_ogg_try_events', 'ogg',
                                                        missing_columns => 'keep');
    RETURN n;
END $$;
\set SHOW_CONTEXT never
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "now", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": " NOW ", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "Today 10:00", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "yesterday 23:00 +02", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "tomorrow America/New_York", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "2024-03-01 00:00:00", "pos": "2", "after": {"CUST_CODE": "A", "SINCE": "now"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "U", "op_ts": "2024-03-01 00:00:00", "pos": "2", "after": {"CUST_CODE": "A", "SINCE": "Tomorrow 08:00"}}');
\echo :SQLSTATE
-- (date/time input skips punctuation: "now()" is now)
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "now()", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
-- what is no finite date and time stays refused as such
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "infinity", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "epoch", "pos": "2", "after": {"CUST_CODE": "A"}}');
\echo :SQLSTATE
SELECT count(*) AS differences
  FROM ((TABLE ev_ogg_t EXCEPT ALL TABLE ev_ogg_before) UNION ALL (TABLE ev_ogg_before EXCEPT ALL TABLE ev_ogg_t)) d;
\set SHOW_CONTEXT errors
-- fixed times are accepted: ISO 8601, and fixed special values of a column
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "2024-03-01T00:00:00Z", "pos": "2",
                    "after": {"CUST_CODE": "B", "SINCE": "epoch"}}');
SELECT ev_ogg_try('{"table": "Q.T", "op_type": "I", "op_ts": "2024-03-01T00:00:00Z", "pos": "2",
                    "after": {"CUST_CODE": "B", "SINCE": "infinity"}}');
SELECT cust_code, since, valid_from, valid_to FROM ev_ogg_t WHERE cust_code IN ('NEW', 'B') ORDER BY 1, 3;
