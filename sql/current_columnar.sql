-- A columnar current partition (README "Storage formats"): where history is
-- columnar and zipper_lake.columnar_current is on, VACUUM writes the current
-- partition's row sub-groups (fresh writes) again as columnar ones.  Every
-- reader and writer of open versions then meets columnar rows: queries,
-- apply_changes, apply_snapshot (with deletes), late changes, INSERT, erase,
-- compaction, rollback.  A heap table kept by hand is the reference,
-- compared with EXCEPT both ways.
SET timezone = 'UTC';
\set VERBOSITY terse
CREATE TABLE cc (id int, grp int, v text, n numeric, big text,
  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('cc', ARRAY['id']);
CREATE TABLE cc_ref (LIKE cc);

-- the image of a day, and the changes of a batch (one per key, op U or D)
CREATE TABLE cc_img (id int PRIMARY KEY, grp int, v text, n numeric, big text);
CREATE TABLE cc_ch (id int, grp int, v text, n numeric, big text, change_time timestamptz, op text);

-- the reference: a snapshot with deletes, changes at one time after each key's open start
CREATE FUNCTION ref_snapshot(t timestamptz) RETURNS void LANGUAGE sql AS $$
  UPDATE cc_ref r SET valid_to = t
   WHERE r.valid_to = 'infinity' AND NOT EXISTS (
     SELECT FROM cc_img i WHERE i.id = r.id AND (i.grp, i.v, i.n, i.big) IS NOT DISTINCT FROM (r.grp, r.v, r.n, r.big));
  INSERT INTO cc_ref SELECT i.*, t, 'infinity' FROM cc_img i
   WHERE NOT EXISTS (SELECT FROM cc_ref r WHERE r.id = i.id AND r.valid_to = 'infinity');
$$;
CREATE FUNCTION ref_apply() RETURNS void LANGUAGE sql AS $$
  UPDATE cc_ref r SET valid_to = c.change_time FROM cc_ch c
   WHERE r.id = c.id AND r.valid_to = 'infinity' AND
     (c.op = 'D' OR (c.grp, c.v, c.n, c.big) IS DISTINCT FROM (r.grp, r.v, r.n, r.big));
  INSERT INTO cc_ref SELECT c.id, c.grp, c.v, c.n, c.big, c.change_time, 'infinity' FROM cc_ch c
   WHERE c.op = 'U' AND NOT EXISTS (SELECT FROM cc_ref r WHERE r.id = c.id AND r.valid_to = 'infinity');
$$;
-- rows in one table and not the other, both ways: none when they agree
CREATE FUNCTION cc_diff() RETURNS TABLE (side text, id int, v text, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql AS $$
  (SELECT 'zipper only', id, v, valid_from, valid_to FROM
    (SELECT * FROM cc EXCEPT ALL SELECT * FROM cc_ref) d)
  UNION ALL
  (SELECT 'heap only', id, v, valid_from, valid_to FROM
    (SELECT * FROM cc_ref EXCEPT ALL SELECT * FROM cc) d)
  ORDER BY 1, 2, 4;
$$;
-- the current partition's sub-groups by format
CREATE VIEW cc_current AS
  SELECT format, count(*) AS subgroups, sum(row_count) AS row_count, sum(masked_rows) AS masked_rows
  FROM zipper_lake.inspect('cc') WHERE partition_end = 'infinity' GROUP BY format ORDER BY format;

-- day 1: 3,000 keys; every 500th holds a value too big for a page (TOASTed in rows)
INSERT INTO cc_img SELECT k, k % 7, 'v' || k, k / 3.0,
    CASE WHEN k % 500 = 0 THEN (SELECT string_agg(md5(k::text || i), '') FROM generate_series(1, 300) i) END
  FROM generate_series(1, 3000) k;
SELECT * FROM zipper_lake.apply_snapshot('cc', 'cc_img', '2026-01-01');
SELECT ref_snapshot('2026-01-01');
-- day 2: a tenth change, a tenth go
UPDATE cc_img SET v = v || 'b', n = n + 1 WHERE id % 10 = 1;
DELETE FROM cc_img WHERE id % 10 = 2;
SELECT * FROM zipper_lake.apply_snapshot('cc', 'cc_img', '2026-01-02');
SELECT ref_snapshot('2026-01-02');
SELECT * FROM cc_diff();
SELECT * FROM cc_current;

-- what queries answer before VACUUM
CREATE TABLE q_current AS SELECT * FROM zipper_lake.current(NULL::cc);
CREATE TABLE q_as_of AS SELECT * FROM zipper_lake.as_of(NULL::cc, '2026-01-01 12:00');
CREATE TABLE q_changes AS SELECT * FROM zipper_lake.changes(NULL::cc, '2026-01-02', '2026-01-03');
CREATE TABLE q_open AS SELECT * FROM cc WHERE valid_to = 'infinity' AND grp = 3 AND v LIKE 'v1%';
CREATE TABLE q_agg AS
  SELECT grp, count(*) AS c, sum(n) AS s, count(DISTINCT v) AS dv, min(v) AS lo, max(length(big)) AS big
  FROM cc WHERE valid_to = 'infinity' GROUP BY grp;
CREATE TABLE q_total AS
  SELECT count(*) AS c, sum(n) AS s, count(DISTINCT grp) AS dg FROM cc WHERE valid_to = 'infinity';

-- with zipper_lake.columnar_current off, VACUUM compacts the masked rows
-- and the current partition stays in rows ...
SET zipper_lake.columnar_current = off;
VACUUM cc;
SELECT * FROM cc_current;
-- ... by default (on) it writes it columnar
RESET zipper_lake.columnar_current;
VACUUM cc;
SELECT * FROM cc_current;
SELECT * FROM zipper_lake.verify('cc');

-- every query answers the same (and the big values read back whole)
SELECT count(*) AS differences FROM (
  (SELECT * FROM q_current EXCEPT ALL SELECT * FROM zipper_lake.current(NULL::cc))
  UNION ALL (SELECT * FROM zipper_lake.current(NULL::cc) EXCEPT ALL SELECT * FROM q_current)) d;
SELECT count(*) AS differences FROM (
  (SELECT * FROM q_as_of EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::cc, '2026-01-01 12:00'))
  UNION ALL (SELECT * FROM zipper_lake.as_of(NULL::cc, '2026-01-01 12:00') EXCEPT ALL SELECT * FROM q_as_of)) d;
SELECT count(*) AS differences FROM (
  (SELECT * FROM q_changes EXCEPT ALL SELECT * FROM zipper_lake.changes(NULL::cc, '2026-01-02', '2026-01-03'))
  UNION ALL (SELECT * FROM zipper_lake.changes(NULL::cc, '2026-01-02', '2026-01-03') EXCEPT ALL SELECT * FROM q_changes)) d;
SELECT count(*) AS differences FROM (
  (SELECT * FROM q_open EXCEPT ALL SELECT * FROM cc WHERE valid_to = 'infinity' AND grp = 3 AND v LIKE 'v1%')
  UNION ALL (SELECT * FROM cc WHERE valid_to = 'infinity' AND grp = 3 AND v LIKE 'v1%' EXCEPT ALL SELECT * FROM q_open)) d;
SELECT count(*) AS differences FROM (
  (SELECT * FROM q_agg EXCEPT ALL
   SELECT grp, count(*), sum(n), count(DISTINCT v), min(v), max(length(big)) FROM cc WHERE valid_to = 'infinity' GROUP BY grp)
  UNION ALL
  (SELECT grp, count(*), sum(n), count(DISTINCT v), min(v), max(length(big)) FROM cc WHERE valid_to = 'infinity' GROUP BY grp
   EXCEPT ALL SELECT * FROM q_agg)) d;
SELECT q.*, t.* FROM q_total q,
  (SELECT count(*) AS c, sum(n) AS s, count(DISTINCT grp) AS dg FROM cc WHERE valid_to = 'infinity') t;
SELECT * FROM cc_diff();
-- one key, through its key directory
SELECT id, v, length(big), valid_from FROM cc WHERE id = 1500 AND valid_to = 'infinity';
-- every open version has a TID of its own; ANALYZE samples columnar rows
SELECT count(DISTINCT ctid) = count(*) AS distinct_tids FROM cc WHERE valid_to = 'infinity';
ANALYZE cc;
SELECT reltuples > 0 AS sampled FROM pg_class WHERE oid = 'cc'::regclass;

-- day 3 against the columnar base: apply_changes of upserts (some unchanged) and deletes
INSERT INTO cc_ch SELECT id, grp, CASE WHEN id % 3 = 0 THEN v ELSE v || 'c' END, n, big, '2026-01-03', 'U'
  FROM cc_img WHERE id % 10 = 3;
INSERT INTO cc_ch SELECT id, grp, v, n, big, '2026-01-03', 'D' FROM cc_img WHERE id % 10 = 4;
INSERT INTO cc_ch VALUES (5000, 1, 'new', 1, NULL, '2026-01-03', 'U');
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
SELECT ref_apply();
SELECT * FROM cc_diff();
-- the closed open versions are masked in the columnar sub-groups; the new ones in rows
SELECT * FROM cc_current;
SELECT * FROM zipper_lake.verify('cc');

-- a rolled back apply leaves nothing behind
BEGIN;
UPDATE cc_ch SET change_time = '2026-01-04', v = v || 'x';
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
ROLLBACK;
SELECT * FROM cc_diff();

-- VACUUM again: the base, more than an eighth masked, and the row delta are
-- written columnar
VACUUM cc;
SELECT * FROM cc_current;
SELECT * FROM cc_diff();

-- day 4: apply_snapshot with deletes reads every open version of the columnar base
UPDATE cc_img SET v = v || 'd' WHERE id % 10 = 5;
DELETE FROM cc_img WHERE id % 10 = 6;
UPDATE cc_img i SET v = c.v FROM cc_ch c WHERE c.id = i.id AND c.op = 'U';  -- day 3's changes
DELETE FROM cc_img WHERE id % 10 = 4;
INSERT INTO cc_img VALUES (5000, 1, 'new', 1, NULL), (5001, 2, 'newer', 2, NULL);
SELECT * FROM zipper_lake.apply_snapshot('cc', 'cc_img', '2026-01-04');
SELECT ref_snapshot('2026-01-04');
SELECT * FROM cc_diff();
SELECT * FROM zipper_lake.verify('cc');

-- a change of more than half the keys compacts the columnar sub-groups it
-- masks (in the writer, into rows)
VACUUM cc;
SELECT * FROM cc_current;
TRUNCATE cc_ch;
INSERT INTO cc_ch SELECT id, grp, v || 'e', n, big, '2026-01-05', 'U' FROM cc_img WHERE id % 10 <> 0;
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
SELECT ref_apply();
SELECT * FROM cc_current;
SELECT * FROM cc_diff();
VACUUM cc;
SELECT * FROM cc_current;

-- a late change, before the start of a key's open version: its history
-- splits, the open version (read from the columnar base) stays
TRUNCATE cc_ch;
INSERT INTO cc_ch VALUES (11, 4, 'late', 0, NULL, '2026-01-01 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
UPDATE cc_ref SET valid_to = '2026-01-01 12:00' WHERE id = 11 AND valid_from = '2026-01-01';
INSERT INTO cc_ref VALUES (11, 4, 'late', 0, NULL, '2026-01-01 12:00', '2026-01-02');
-- and a change at a time before the table's newest, after the key's open start
TRUNCATE cc_ch;
INSERT INTO cc_ch VALUES (10, 3, 'mid', 0, NULL, '2026-01-04 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
SELECT ref_apply();
SELECT * FROM cc_diff();
SELECT id, v, valid_from, valid_to FROM cc WHERE id IN (10, 11) ORDER BY id, valid_from;

-- INSERT loads versions beside the columnar base
INSERT INTO cc VALUES (6000, 1, 'loaded', 6, NULL, '2026-01-02', '2026-01-03'),
                      (6000, 1, 'loaded again', 6, NULL, '2026-01-03', 'infinity');
INSERT INTO cc_ref VALUES (6000, 1, 'loaded', 6, NULL, '2026-01-02', '2026-01-03'),
                          (6000, 1, 'loaded again', 6, NULL, '2026-01-03', 'infinity');
SELECT * FROM cc_diff();

-- erase of keys whose open versions are columnar (one with a big value)
VACUUM cc;
SELECT * FROM cc_current;
CREATE TABLE cc_gone (id int);
INSERT INTO cc_gone VALUES (500), (1500), (17), (6000);
SELECT zipper_lake.erase('cc', 'cc_gone');
DELETE FROM cc_ref WHERE id IN (SELECT id FROM cc_gone);
SELECT * FROM cc_diff();
SELECT * FROM zipper_lake.verify('cc');

-- and the keys erased start again from absent
TRUNCATE cc_ch;
INSERT INTO cc_ch VALUES (17, 3, 'back', 0, NULL, '2026-01-06', 'U');
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
SELECT ref_apply();
-- (erase wrote the sub-groups it rewrote in rows.)  In each window, the
-- row sub-groups take in the newest columnar ones no larger than what they
-- gathered: one columnar sub-group a window here
SELECT window_start, format, row_count, masked_rows FROM zipper_lake.inspect('cc')
  WHERE partition_end = 'infinity' ORDER BY window_start, sub_group;
VACUUM cc;
SELECT window_start, format, row_count, masked_rows FROM zipper_lake.inspect('cc')
  WHERE partition_end = 'infinity' ORDER BY window_start, sub_group;
SELECT * FROM cc_diff();
SELECT * FROM zipper_lake.verify('cc');

-- a delta beside a columnar sub-group no larger, in the same window: one
-- columnar sub-group of both; a delta beside a larger one: two
TRUNCATE cc_ch;
INSERT INTO cc_ch VALUES (21, 3, 'sixth', 0, NULL, '2026-01-06 06:00', 'U'),
                         (23, 3, 'fifth', 0, NULL, '2026-01-05 06:00', 'U');
SELECT * FROM zipper_lake.apply_changes('cc', 'cc_ch');
SELECT ref_apply();
VACUUM cc;
SELECT window_start, format, row_count, masked_rows FROM zipper_lake.inspect('cc')
  WHERE partition_end = 'infinity' AND window_start >= '2026-01-05' ORDER BY window_start, sub_group;
SELECT * FROM cc_diff();
SELECT * FROM zipper_lake.verify('cc');

-- a table whose history is in rows keeps its current partition in rows
CREATE TABLE cr (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('cr', ARRAY['id'], history_format => 'rows');
INSERT INTO cr SELECT k, 'v', '2026-01-01', 'infinity' FROM generate_series(1, 100) k;
VACUUM cr;
SELECT format, count(*) FROM zipper_lake.inspect('cr') GROUP BY format;
