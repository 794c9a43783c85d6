-- The windows of history file groups (README "Storage"): a write opening
-- file groups in a history partition coalesces consecutive base windows
-- (history_group_span) no file group holds into one file group, until it
-- holds 32,768 rows; a later row whose valid_from falls in a file group's
-- window joins it; windows of one partition never overlap.
SET timezone = 'UTC';
CREATE SCHEMA history_windows;
SET search_path = history_windows, public;

-- the history sub-groups: file groups numbered in order of their windows
CREATE FUNCTION show(tbl regclass) RETURNS TABLE (partition_end date, file_group bigint,
    window_start text, first_start text, last_start text, row_count bigint)
LANGUAGE sql AS $$
  SELECT partition_end, dense_rank() OVER (ORDER BY partition_end, i.window_start),
         to_char(i.window_start, 'MM-DD'), to_char(first_start, 'MM-DD HH24:MI'),
         to_char(last_start, 'MM-DD HH24:MI'), row_count
    FROM zipper_lake.inspect(tbl) i WHERE partition_end <> 'infinity'
   ORDER BY partition_end, i.window_start, sub_group
$$;
-- each file group's window as the catalog stores it, and its sub-groups
CREATE FUNCTION windows(tbl regclass) RETURNS TABLE (partition_end date, window_start date,
    window_end date, file_groups bigint, sub_groups bigint, row_count numeric)
LANGUAGE sql AS $$
  SELECT partition_end, window_start::date, window_end::date,
         count(DISTINCT file_group), count(*), sum(row_count)
    FROM zipper_lake.subgroup
   WHERE storage_id = zipper_lake._storage_id(tbl) AND partition_end <> 'infinity'
   GROUP BY 1, 2, 3 ORDER BY 1, 2
$$;

-- 40 keys opened on 40 days, all ended by one batch on 03-01: one
-- sub-group in partition 03-01, whose window starts at the first start
CREATE TABLE hw (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('hw', ARRAY['id']);
INSERT INTO hw SELECT k, 0, '2026-01-01 06:00'::timestamptz + k * interval '1 day', 'infinity'
  FROM generate_series(1, 40) k;
CREATE TABLE ch (id int, v int, change_time timestamptz, op text);
INSERT INTO ch SELECT k, 1, '2026-03-01 12:00', 'U' FROM generate_series(1, 40) k;
SELECT changes, closed FROM zipper_lake.apply_changes('hw', 'ch');
SELECT * FROM show('hw');
SELECT * FROM windows('hw');

-- a version ending on 03-01 that started inside that window joins its file
-- group (a sub-group of its own); ones that started before and after the
-- window open a file group each, on either side: one file group may not
-- span the other's window
INSERT INTO hw VALUES (100, 2, '2026-01-20 08:00', '2026-03-01 06:00');
INSERT INTO hw VALUES (101, 2, '2025-12-20 08:00', '2026-03-01 06:00'),
                      (102, 2, '2026-02-25 08:00', '2026-03-01 06:00');
SELECT * FROM show('hw');
SELECT * FROM windows('hw');
SELECT * FROM zipper_lake.verify('hw');
SELECT count(*), sum(v), min(valid_from), max(valid_to) FILTER (WHERE valid_to < 'infinity')
  FROM hw;

-- verify() reports windows that overlap, and a window whose end is not a
-- base window's (catalog rows edited by hand, rolled back)
BEGIN;
UPDATE zipper_lake.subgroup SET window_end = '2026-01-05'
 WHERE storage_id = zipper_lake._storage_id('hw') AND window_start = '2025-12-20';
UPDATE zipper_lake.subgroup SET window_end = '2026-02-25 12:00'
 WHERE storage_id = zipper_lake._storage_id('hw') AND window_start = '2026-02-25';
SELECT check_name, count(*) FROM zipper_lake.verify('hw') GROUP BY 1 ORDER BY 1;
ROLLBACK;

-- rows placed at registration: 40,000 versions ending on 03-01, started
-- over 40 days (1,000 a day), make two file groups: the first takes 33
-- days (33,000 rows, the first count at or over 32,768), the second the
-- other 7; each is one sub-group per 65,535 rows at most
CREATE TABLE big (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
CREATE TABLE big_heap AS
SELECT k AS id, k % 7 AS v, '2026-01-01'::timestamptz + (k % 40) * interval '1 day' + k * interval '1 second' AS valid_from,
       '2026-03-01 12:00'::timestamptz AS valid_to
  FROM generate_series(1, 40000) k;
INSERT INTO big SELECT * FROM big_heap;
SELECT zipper_lake.register('big', ARRAY['id']);
SELECT * FROM windows('big');
SELECT * FROM zipper_lake.verify('big');
SELECT (SELECT count(*) FROM big) AS rows,
       (SELECT count(*) FROM (SELECT * FROM big EXCEPT ALL SELECT * FROM big_heap) d) AS not_loaded,
       (SELECT count(*) FROM (SELECT * FROM big_heap EXCEPT ALL SELECT * FROM big) d) AS missing;
-- a read of the versions that started before 01-04 keeps the wide
-- window's sub-group only, and of its 33 chunks of 1,024 rows (in start
-- order) reads the 3 that hold such starts
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT count(*) FROM big WHERE valid_from < '2026-01-04';
SELECT (SELECT count(*) FROM big WHERE valid_from < '2026-01-04') AS zipper,
       (SELECT count(*) FROM big_heap WHERE valid_from < '2026-01-04') AS heap;

RESET search_path;
DROP SCHEMA history_windows CASCADE;
