-- VACUUM merges runs of small neighbouring history file groups (README
-- "Lifecycle"; src/write/zl_merge.c): in each end-date partition, file
-- groups next to each other, each less than half of 32,768 live rows and
-- together at most 32,768, become one file group covering their windows,
-- one sub-group of their live rows sorted by valid_from.  What the table
-- returns stays exactly the same: masked rows (deleted, superseded by late
-- changes) stay invisible, rolled-back applies leave nothing.
SET timezone = 'UTC';
CREATE SCHEMA merge;
SET search_path = merge, public;

-- each file group's window and its sub-groups
CREATE FUNCTION windows(tbl regclass) RETURNS TABLE (partition_end date, window_start date,
    window_end date, sub_groups bigint, row_count numeric)
LANGUAGE sql AS $$
  SELECT partition_end, window_start::date, coalesce(window_end::date, window_start::date + 1),
         count(*), sum(row_count)
    FROM zipper_lake.subgroup
   WHERE storage_id = zipper_lake._storage_id(tbl) AND partition_end <> 'infinity'
   GROUP BY 1, 2, 3 ORDER BY 1, 2
$$;
-- sub-groups a scan reads
CREATE FUNCTION read_sub_groups(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line ~ 'Sub-groups' THEN RETURN regexp_replace(line, '^\s*', ''); END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- 60 keys opened on 20 days of January (3 a day), then closed on 03-01 by
-- one batch per start day: 20 file groups of one base window each in
-- partition 03-01 (as 0.1 wrote them, and as late writes leave them)
CREATE TABLE m (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('m', ARRAY['id']);
-- history sub-groups whose first/last start is not their rows' least and
-- greatest valid_from (for a table without masked rows, one sub-group a file group)
CREATE FUNCTION starts_inexact() RETURNS bigint
LANGUAGE sql AS $$
  SELECT count(*) FROM zipper_lake.inspect('merge.m') i
    JOIN zipper_lake.subgroup s ON s.subgroup_id = i.sub_group,
         LATERAL (SELECT min(valid_from) AS lo, max(valid_from) AS hi FROM merge.m
                   WHERE valid_to < 'infinity' AND valid_to::date = i.partition_end
                     AND valid_from >= i.window_start
                     AND valid_from < coalesce(s.window_end, s.window_start + interval '1 day')) r
   WHERE i.partition_end <> 'infinity'
     AND (i.first_start IS DISTINCT FROM r.lo OR i.last_start IS DISTINCT FROM r.hi)
$$;
INSERT INTO m SELECT k, 0, '2026-01-01 06:00'::timestamptz + (k % 20) * interval '1 day'
                           + k * interval '1 minute', 'infinity'
  FROM generate_series(1, 60) k;
CREATE TABLE ch (id int, v int, change_time timestamptz, op text);
DO $$
BEGIN
  FOR d IN 0..19 LOOP
    DELETE FROM merge.ch;
    INSERT INTO merge.ch SELECT k, 1, '2026-03-01 12:00'::timestamptz + d * interval '1 minute', 'U'
      FROM generate_series(1, 60) k WHERE k % 20 = d;
    PERFORM zipper_lake.apply_changes('merge.m', 'merge.ch');
  END LOOP;
END $$;
-- a large file group (17,000 rows, more than half full) in the middle of
-- partition 03-01 ends a run; two more small ones after it
INSERT INTO m SELECT 1000 + k, 2, '2026-01-25 00:00'::timestamptz + k * interval '1 second',
                     '2026-03-01 18:00'
  FROM generate_series(1, 17000) k;
INSERT INTO m VALUES (100, 3, '2026-02-03 08:00', '2026-03-01 09:00');
INSERT INTO m VALUES (101, 3, '2026-02-05 08:00', '2026-03-01 09:00');
-- partition 03-02: keys closed there by deletes, one batch per start day
DO $$
BEGIN
  FOR d IN 0..4 LOOP
    DELETE FROM merge.ch;
    INSERT INTO merge.ch SELECT k, NULL, '2026-03-02 12:00'::timestamptz + d * interval '1 minute', 'D'
      FROM generate_series(1, 60) k WHERE k % 20 = d;
    PERFORM zipper_lake.apply_changes('merge.m', 'merge.ch');
  END LOOP;
END $$;
-- late changes: versions of keys 21 and 22 (ended 03-01) superseded inside
-- their history periods, which masks their rows in their file groups
-- and writes new pieces
DELETE FROM ch;
INSERT INTO ch VALUES (21, 7, '2026-02-10 00:00', 'U'), (22, 8, '2026-02-11 00:00', 'U');
SELECT changes, late FROM zipper_lake.apply_changes('m', 'ch');
-- a rolled-back apply leaves nothing visible
BEGIN;
DELETE FROM ch;
INSERT INTO ch SELECT k, 9, '2026-03-03 00:00', 'U' FROM generate_series(1, 60) k;
SELECT changes FROM zipper_lake.apply_changes('m', 'ch');
ROLLBACK;

SELECT * FROM windows('m');
SELECT sum(masked_rows) AS masked FROM zipper_lake.inspect('m');
SELECT * FROM zipper_lake.verify('m');

-- what the table returns before
CREATE TABLE before_all AS SELECT * FROM m;
CREATE TABLE before_as_of AS
  SELECT t, a.* FROM (VALUES (timestamptz '2026-01-10'), ('2026-02-10 12:00'), ('2026-03-01 10:00'),
                              ('2026-03-01 13:00'), ('2026-03-02 13:00')) t(t),
                     LATERAL zipper_lake.as_of(NULL::m, t) a;
CREATE TABLE before_changes AS SELECT * FROM zipper_lake.changes(NULL::m, '2026-03-01', '2026-03-02');
SELECT read_sub_groups($$SELECT count(*) FROM m WHERE valid_to >= '2026-03-01' AND valid_to < '2026-03-02'$$);
SELECT read_sub_groups($$SELECT count(*) FROM m WHERE valid_to >= '2026-03-01' AND valid_to < '2026-03-02'
                           AND valid_from >= '2026-01-03' AND valid_from < '2026-01-04'$$);

VACUUM m;

-- partition 03-01: the 20 one-window file groups (each 3 rows, late pieces
-- and masked rows included) are one file group of one sub-group from
-- 01-01 to 01-21; the large one stays, the two after it are one; partition
-- 03-02's five are one; masked rows are gone
SELECT * FROM windows('m');
SELECT sum(masked_rows) AS masked FROM zipper_lake.inspect('m');
SELECT * FROM zipper_lake.verify('m');
SELECT starts_inexact();
-- sub-groups are sorted by valid_from
SELECT count(*) AS unsorted FROM (
  SELECT valid_from < lag(valid_from) OVER (PARTITION BY (ctid::text::point)[0] ORDER BY ctid) AS back
    FROM m WHERE valid_to < 'infinity') s WHERE back;
SELECT read_sub_groups($$SELECT count(*) FROM m WHERE valid_to >= '2026-03-01' AND valid_to < '2026-03-02'$$);
-- pruning by first/last start: a day outside the merged sub-group's starts reads none of it
SELECT read_sub_groups($$SELECT count(*) FROM m WHERE valid_to >= '2026-03-01' AND valid_to < '2026-03-02'
                           AND valid_from >= '2026-02-20' AND valid_from < '2026-02-21'$$);

-- exactly what it returned before
SELECT (SELECT count(*) FROM m) AS rows,
       (SELECT count(*) FROM (SELECT * FROM m EXCEPT ALL SELECT * FROM before_all) x) AS added,
       (SELECT count(*) FROM (SELECT * FROM before_all EXCEPT ALL SELECT * FROM m) x) AS lost;
SELECT (SELECT count(*) FROM (
          SELECT t, a.* FROM (SELECT DISTINCT t FROM before_as_of) t, LATERAL zipper_lake.as_of(NULL::m, t) a
          EXCEPT ALL SELECT * FROM before_as_of) x) AS as_of_added,
       (SELECT count(*) FROM (
          SELECT * FROM before_as_of EXCEPT ALL
          SELECT t, a.* FROM (SELECT DISTINCT t FROM before_as_of) t, LATERAL zipper_lake.as_of(NULL::m, t) a) x)
         AS as_of_lost;
SELECT (SELECT count(*) FROM (SELECT * FROM zipper_lake.changes(NULL::m, '2026-03-01', '2026-03-02')
                              EXCEPT ALL SELECT * FROM before_changes) x) AS changes_added,
       (SELECT count(*) FROM (SELECT * FROM before_changes EXCEPT ALL
                              SELECT * FROM zipper_lake.changes(NULL::m, '2026-03-01', '2026-03-02')) x)
         AS changes_lost;
-- a key's history (key directories written afresh)
SELECT id, v, valid_from, valid_to FROM m WHERE id IN (21, 41) ORDER BY id, valid_from;

-- later writes: a late change ending 03-01 that started on 02-20, after
-- the small merged window [02-03, 02-12), opens a file group of its own;
-- the next VACUUM merges the two
DELETE FROM ch;
INSERT INTO ch VALUES (3, 5, '2026-02-20 00:00', 'U');
SELECT changes, late FROM zipper_lake.apply_changes('m', 'ch');
SELECT * FROM windows('m');
VACUUM m;
SELECT * FROM windows('m');
SELECT * FROM zipper_lake.verify('m');
SELECT id, v, valid_from, valid_to FROM m WHERE id = 3 ORDER BY valid_from;

-- history in rows: merged the same way
CREATE TABLE r (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('r', ARRAY['id'], history_format => 'rows');
INSERT INTO r VALUES (1, 'a', '2026-01-01', '2026-02-01'), (2, repeat('x', 5000), '2026-01-03', 'infinity');
INSERT INTO r VALUES (3, 'c', '2026-01-04', '2026-02-01');
INSERT INTO r VALUES (4, 'd', '2026-01-06', '2026-02-01');
SELECT * FROM windows('r');
CREATE TABLE r_before AS SELECT * FROM r;
VACUUM r;
SELECT * FROM windows('r');
SELECT format, count(*) FROM zipper_lake.inspect('r') GROUP BY 1 ORDER BY 1;
SELECT (SELECT count(*) FROM (SELECT * FROM r EXCEPT ALL SELECT * FROM r_before) x) AS added,
       (SELECT count(*) FROM (SELECT * FROM r_before EXCEPT ALL SELECT * FROM r) x) AS lost;
SELECT * FROM zipper_lake.verify('r');

DROP SCHEMA merge CASCADE;
