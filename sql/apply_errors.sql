-- Bad input rejects the whole batch with an error naming key, time and
-- column, and changes nothing.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE TABLE z (id int, region text, amount int,
                valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('z', ARRAY['id', 'region']);
CREATE TABLE good (id int, region text, amount int, change_time timestamptz, op text);
INSERT INTO good VALUES (1, 'eu', 10, '2026-01-01', 'I');
SELECT changes FROM zipper_lake.apply_changes('z', 'good');
CREATE TABLE snapshot_before AS SELECT * FROM z;

-- each bad batch also carries a valid change for key 2, which must not land
CREATE TABLE bad (id int, region text, amount int, change_time timestamptz, op text, n int);
CREATE FUNCTION try(rows text, seq name DEFAULT NULL) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE bad;
    EXECUTE 'INSERT INTO bad VALUES (2, ''us'', 20, ''2026-01-01'', ''I'', 0), ' || rows;
    PERFORM zipper_lake.apply_changes('z', 'bad', seq => seq);
END $$;

SELECT try($$(NULL, 'eu', 1, '2026-01-02', 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, NULL, 1, '2026-01-02', 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, NULL, 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, 'infinity', 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, '-infinity', 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, '2026-01-02', 'X', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, '2026-01-02', 'U', 0), (3, 'eu', 2, '2026-01-02', 'U', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, '2026-01-02', 'U', 0), (3, 'eu', 1, '2026-01-02', 'D', 0)$$);
\echo :SQLSTATE
SELECT try($$(3, 'eu', 1, '2026-01-02', 'U', 1), (3, 'eu', 2, '2026-01-02', 'U', 1)$$, 'n');
\echo :SQLSTATE

-- seq must be an integer: a numeric or floating-point seq with a fraction
-- (or NaN) is refused, never rounded
CREATE TABLE bad_numeric_seq (id int, region text, amount int, change_time timestamptz, op text, n numeric);
INSERT INTO bad_numeric_seq VALUES (2, 'us', 20, '2026-01-01', 'I', 0), (3, 'eu', 1, '2026-01-02', 'U', 1.5);
SELECT * FROM zipper_lake.apply_changes('z', 'bad_numeric_seq', seq => 'n');
\echo :SQLSTATE
CREATE TABLE bad_float_seq (id int, region text, amount int, change_time timestamptz, op text, n float8);
INSERT INTO bad_float_seq VALUES (2, 'us', 20, '2026-01-01', 'I', 0), (3, 'eu', 1, '2026-01-02', 'U', 2.5);
SELECT * FROM zipper_lake.apply_changes('z', 'bad_float_seq', seq => 'n');
\echo :SQLSTATE
UPDATE bad_float_seq SET n = 'NaN' WHERE id = 3;
SELECT * FROM zipper_lake.apply_changes('z', 'bad_float_seq', seq => 'n');
\echo :SQLSTATE
-- nor one out of bigint's range
UPDATE bad_numeric_seq SET n = 1e30 WHERE id = 3;
SELECT * FROM zipper_lake.apply_changes('z', 'bad_numeric_seq', seq => 'n');
\echo :SQLSTATE

-- a value that does not convert to its column's type fails with the
-- conversion's error, and a detail naming column, key, time and value
CREATE TABLE bad_values (id bigint, region text, amount bigint, change_time timestamptz, op text);
INSERT INTO bad_values VALUES (2, 'us', 20, '2026-01-01', 'I'), (3, 'eu', 5000000000, '2026-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('z', 'bad_values');
\echo :SQLSTATE
UPDATE bad_values SET amount = 1, id = 9000000000 WHERE region = 'eu';
SELECT * FROM zipper_lake.apply_changes('z', 'bad_values');
\echo :SQLSTATE
-- (a long value clipped), in a snapshot too (at the snapshot's time)
CREATE TABLE bad_image (id int, region text, amount numeric);
INSERT INTO bad_image VALUES (1, 'eu', 10), (3, 'eu', 1e100);
SELECT * FROM zipper_lake.apply_snapshot('z', 'bad_image', '2026-01-03');
\echo :SQLSTATE
-- an integral value is its integer: 5.000 follows 4 (in another table)
CREATE TABLE zn (id int, amount int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zn', ARRAY['id']);
CREATE TABLE numeric_seq (id int, amount int, change_time timestamptz, n numeric);
INSERT INTO numeric_seq VALUES (1, 5, '2026-01-01', 5.000), (1, 4, '2026-01-01', 4);
SELECT * FROM zipper_lake.apply_changes('zn', 'numeric_seq', seq => 'n');
SELECT id, amount, valid_from FROM zn;

-- open end other than infinity: a change at or after it is refused
CREATE TABLE z9 (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('z9', ARRAY['id'], open_end => '9999-12-31');
CREATE TABLE late9 (id int, change_time timestamptz);
INSERT INTO late9 VALUES (1, '9999-12-31');
SELECT * FROM zipper_lake.apply_changes('z9', 'late9');
\echo :SQLSTATE

-- columns: missing key, value, change time or seq; unassignable types
CREATE TABLE no_key (region text, amount int, change_time timestamptz);
SELECT * FROM zipper_lake.apply_changes('z', 'no_key');
\echo :SQLSTATE
CREATE TABLE no_value (id int, region text, change_time timestamptz);
SELECT * FROM zipper_lake.apply_changes('z', 'no_value');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('z', 'good', change_time => 'happened_at');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('z', 'good', seq => 'n');
\echo :SQLSTATE
CREATE TABLE wrong_type (id int, region text, amount text, change_time timestamptz);
SELECT * FROM zipper_lake.apply_changes('z', 'wrong_type');
\echo :SQLSTATE
CREATE TABLE wrong_time (id int, region text, amount int, change_time int);
SELECT * FROM zipper_lake.apply_changes('z', 'wrong_time');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('z', 'good', change_time => NULL);
\echo :SQLSTATE

-- targets that cannot take changes
CREATE TABLE heap_target (id int);
SELECT * FROM zipper_lake.apply_changes('heap_target', 'good');
\echo :SQLSTATE
CREATE TABLE unregistered (id int, region text, amount int, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT * FROM zipper_lake.apply_changes('unregistered', 'good');
\echo :SQLSTATE
-- a registration that was rolled back is gone, also for this session's caches
BEGIN;
SELECT zipper_lake.register('unregistered', ARRAY['region']);
SELECT count(*) FROM unregistered WHERE valid_to = 'infinity';
ROLLBACK;
SELECT * FROM zipper_lake.apply_changes('unregistered', 'good');
\echo :SQLSTATE
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'unregistered'::regclass;
-- registered key columns keep their type and collation
ALTER TABLE z ALTER COLUMN region TYPE text COLLATE "C";
\echo :SQLSTATE
ALTER TABLE z ALTER COLUMN amount TYPE int;

-- nothing changed
SELECT count(*) AS differences FROM ((TABLE z EXCEPT ALL TABLE snapshot_before) UNION ALL (TABLE snapshot_before EXCEPT ALL TABLE z)) d;
SELECT count(*) FROM zipper_lake.inspect('z');
