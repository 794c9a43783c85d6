-- Loads into an empty table are checked narrowly (src/write/zl_load.c, "Narrow
-- loads"): rows in start order per key go straight to placement (in start
-- order over all rows, to their runs unsorted: zl_place.c), checked by
-- 64-bit hashes of key and values; anything else falls back to the full
-- check, with the same results as loads into a non-empty table.
SET timezone = 'UTC';
CREATE SCHEMA load_narrow;
SET search_path = load_narrow, public;

CREATE FUNCTION fresh() RETURNS void LANGUAGE plpgsql SET client_min_messages = warning AS $$
BEGIN
    DROP TABLE IF EXISTS t;
    CREATE TABLE t (id int, name text, v numeric, valid_from timestamptz NOT NULL,
                    valid_to timestamptz NOT NULL) USING zipper_lake;
    PERFORM zipper_lake.register('t', ARRAY['id']);
END $$;
SELECT fresh();
CREATE FUNCTION show() RETURNS TABLE (id int, name text, v numeric, valid_from text, valid_to text)
LANGUAGE sql AS $$
    SELECT id, name, v, to_char(valid_from, 'MM-DD'), CASE WHEN valid_to = 'infinity' THEN 'open'
           ELSE to_char(valid_to, 'MM-DD') END FROM t ORDER BY id, t.valid_from
$$;
-- a history in start order: every row taken narrowly
CREATE TABLE src AS
SELECT g % 500 AS id, 'n' || (g / 500) AS name, (g / 500)::numeric AS v,
       '2024-01-01'::timestamptz + (g / 500) * interval '1 day' AS valid_from,
       CASE WHEN g / 500 = 19 THEN 'infinity'::timestamptz
            ELSE '2024-01-01'::timestamptz + (g / 500 + 1) * interval '1 day' END AS valid_to
  FROM generate_series(0, 9999) g;
-- what t holds against src: rows, rows only on one side, verify's findings
CREATE FUNCTION loaded(OUT rows bigint, OUT differences bigint, OUT problems bigint) LANGUAGE sql AS $$
    SELECT count(*), (SELECT count(*) FROM ((TABLE t EXCEPT ALL TABLE src) UNION ALL (TABLE src EXCEPT ALL TABLE t)) d),
           (SELECT count(*) FROM zipper_lake.verify('t')) FROM t
$$;
SELECT fresh();
INSERT INTO t SELECT * FROM src ORDER BY valid_from;
SELECT * FROM loaded();
-- the same rows out of start order: the full check, the same table
SELECT fresh();
INSERT INTO t SELECT * FROM src ORDER BY valid_from DESC;
SELECT * FROM loaded();
-- in start order per key but not over all rows: narrow (each run is in start order)
SELECT fresh();
INSERT INTO t SELECT * FROM src ORDER BY id, valid_from;
SELECT * FROM loaded();
-- open versions starting all over a day, loaded by key: narrow, and the run
-- (the current partition's window of that day) is sorted alone; verify
-- finds every sub-group sorted by valid_from
CREATE TABLE src_open AS
SELECT g AS id, 'o' || g AS name, g::numeric AS v,
       '2024-02-01'::timestamptz + ((g * 7919) % 1400) * interval '1 minute' AS valid_from,
       'infinity'::timestamptz AS valid_to
  FROM generate_series(1, 3000) g;
SELECT fresh();
INSERT INTO t SELECT * FROM src_open ORDER BY id;
SELECT count(*) AS rows,
       (SELECT count(*) FROM ((TABLE t EXCEPT ALL TABLE src_open) UNION ALL
                              (TABLE src_open EXCEPT ALL TABLE t)) d) AS differences,
       (SELECT count(*) FROM zipper_lake.verify('t')) AS problems FROM t;
SELECT count(*) AS sub_groups, min(first_start) = '2024-02-01' AS starts_first,
       max(last_start) = '2024-02-01 23:19' AS ends_last
  FROM zipper_lake.inspect('t');
-- versions every hour for three days, loaded by key: every run (a day's
-- partition and window) comes out of start order and is sorted alone, one
-- after another; also with the smallest work_mem
CREATE TABLE src_hourly AS
SELECT k AS id, 'h' || h AS name, (k * h)::numeric AS v,
       '2024-03-01'::timestamptz + h * interval '1 hour' AS valid_from,
       CASE WHEN h = 71 THEN 'infinity'::timestamptz
            ELSE '2024-03-01'::timestamptz + (h + 1) * interval '1 hour' END AS valid_to
  FROM generate_series(1, 200) k, generate_series(0, 71) h;
SELECT fresh();
INSERT INTO t SELECT * FROM src_hourly ORDER BY id, valid_from;
SELECT count(*) AS rows,
       (SELECT count(*) FROM ((TABLE t EXCEPT ALL TABLE src_hourly) UNION ALL
                              (TABLE src_hourly EXCEPT ALL TABLE t)) d) AS differences,
       (SELECT count(*) FROM zipper_lake.verify('t')) AS problems FROM t;
SELECT partition_end, count(*) AS sub_groups, sum(row_count) AS rows
  FROM zipper_lake.inspect('t') GROUP BY 1 ORDER BY 1;
SELECT fresh();
SET work_mem = '64kB';
INSERT INTO t SELECT * FROM src_hourly ORDER BY id, valid_from;
RESET work_mem;
SELECT count(*) AS rows,
       (SELECT count(*) FROM ((TABLE t EXCEPT ALL TABLE src_hourly) UNION ALL
                              (TABLE src_hourly EXCEPT ALL TABLE t)) d) AS differences,
       (SELECT count(*) FROM zipper_lake.verify('t')) AS problems FROM t;
-- more runs (partition and window) than half of work_mem gives direct placement: sorted
SELECT fresh();
SET work_mem = '1MB';
INSERT INTO t SELECT * FROM src ORDER BY valid_from;
RESET work_mem;
SELECT * FROM loaded();
-- more keys than work_mem holds: the load turns to the full check midway
SELECT fresh();
SET work_mem = '64kB';
INSERT INTO t SELECT * FROM src ORDER BY valid_from;
RESET work_mem;
SELECT * FROM loaded();

-- adjacent versions with equal values (numeric 1.0 = 1.00) become one
SELECT fresh();
INSERT INTO t VALUES (1, 'a', 1.0, '2024-01-01', '2024-01-02'), (2, 'b', 2, '2024-01-01', '2024-01-05'),
                     (1, 'a', 1.00, '2024-01-02', '2024-01-03'), (1, 'a', 1, '2024-01-03', 'infinity');
SELECT * FROM show();
-- adjacent versions with other values stay apart; a gap stays a gap
SELECT fresh();
INSERT INTO t VALUES (1, 'a', 1, '2024-01-01', '2024-01-02'), (1, 'a', 2, '2024-01-02', '2024-01-03'),
                     (1, 'a', 2, '2024-01-04', '2024-01-05');
SELECT * FROM show();
-- an overlap is refused with the full check's error (which names the two
-- versions; of two starting together, in an order of its own), late rows too
SELECT fresh();
INSERT INTO t VALUES (1, 'a', 1, '2024-01-01', '2024-01-03'), (1, 'b', 2, '2024-01-02', '2024-01-04');
INSERT INTO t VALUES (1, 'a', 1, '2024-01-03', '2024-01-04'), (1, 'b', 2, '2024-01-01', '2024-01-05');
SELECT count(*) FROM t;
-- a second statement of the same transaction loads into what the first wrote
BEGIN;
INSERT INTO t VALUES (1, 'a', 1, '2024-01-01', '2024-01-03');
INSERT INTO t VALUES (1, 'b', 1, '2024-01-02', '2024-01-04');
ROLLBACK;
BEGIN;
INSERT INTO t VALUES (1, 'a', 1, '2024-01-01', '2024-01-03');
SELECT count(*) FROM t;
INSERT INTO t VALUES (1, 'a', 1, '2024-01-03', '2024-01-04');
COMMIT;
SELECT * FROM show();

-- a load that began narrow meets rows another write state of its statement
-- stored meanwhile (a function with an exception block inserts): checked in full
CREATE FUNCTION inner_insert(name text, f timestamptz, t timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO t VALUES (1, name, 1, f, t);
    EXCEPTION WHEN division_by_zero THEN
        NULL;
    END;
    RETURN 0;
END $$;
SELECT fresh();
INSERT INTO t SELECT 1, 'outer', 1, timestamptz '2024-01-05', timestamptz '2024-01-20'
              UNION ALL SELECT 2 + inner_insert('inner', '2024-01-01', '2024-01-10'), 'b', 2, '2024-01-01', 'infinity';
SELECT * FROM show();
SELECT fresh();
INSERT INTO t SELECT 1, 'same', 1, timestamptz '2024-01-10', timestamptz '2024-01-20'
              UNION ALL SELECT 2 + inner_insert('same', '2024-01-01', '2024-01-10'), 'b', 2, '2024-01-01', 'infinity';
SELECT * FROM show();

-- a value type without a hash opclass (point): every load is checked in full
CREATE TABLE p (id int, at point, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('p', ARRAY['id']);
INSERT INTO p VALUES (1, '(1,1)', '2024-01-01', '2024-01-02'), (1, '(1,1)', '2024-01-02', 'infinity');
SELECT id, at, valid_from, valid_to FROM p;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA load_narrow CASCADE;
