-- Row identifiers (README "Row identifiers"): a TID names one row for good,
-- TID scans and TID range scans find rows by it under the reader's snapshot
SET timezone = 'UTC';
CREATE TABLE tid_t (id int, v int, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('tid_t', key => '{id}', partition_unit => 'day');
CREATE TABLE tid_ch (id int, v int, change_time timestamptz);
INSERT INTO tid_ch SELECT g, g, '2026-01-01' FROM generate_series(1, 600) g;
SELECT changes FROM zipper_lake.apply_changes('tid_t', 'tid_ch');
TRUNCATE tid_ch;
INSERT INTO tid_ch SELECT g, -g, '2026-01-02' FROM generate_series(1, 600, 7) g;
SELECT changes FROM zipper_lake.apply_changes('tid_t', 'tid_ch');

-- every sub-group owns its own TID blocks: a row sub-group one a page, a
-- columnar one one per 291 rows
SELECT format, count(*) AS subgroups,
       bool_and(first_tid_block >= 0) AS numbered
  FROM zipper_lake.subgroup WHERE storage_id = zipper_lake._storage_id('tid_t')
 GROUP BY format ORDER BY format;
CREATE VIEW tid_overlaps AS
SELECT count(*) AS overlaps
  FROM zipper_lake.subgroup a JOIN zipper_lake.subgroup b
    ON a.storage_id = b.storage_id AND a.subgroup_id < b.subgroup_id
   AND a.first_tid_block < b.first_tid_block + greatest(CASE b.format WHEN 'c' THEN (b.row_count + 290) / 291 ELSE b.blocks END, 1)
   AND b.first_tid_block < a.first_tid_block + greatest(CASE a.format WHEN 'c' THEN (a.row_count + 290) / 291 ELSE a.blocks END, 1)
 WHERE a.storage_id = zipper_lake._storage_id('tid_t');
SELECT * FROM tid_overlaps;

-- each row fetched by its TID is the row the scan showed with it: in the
-- current partition (rows) and in history (columnar)
CREATE TABLE tid_seen AS SELECT ctid AS tid, * FROM tid_t;
SELECT count(*) AS rows, count(DISTINCT tid) AS tids FROM tid_seen;
EXPLAIN (COSTS OFF) SELECT * FROM tid_t WHERE ctid = '(0,1)';
SELECT count(*) AS fetched_alike
  FROM tid_seen s, LATERAL (SELECT * FROM tid_t t WHERE t.ctid = s.tid) f
 WHERE (f.id, f.v, f.valid_from, f.valid_to) = (s.id, s.v, s.valid_from, s.valid_to);
SELECT count(*) AS by_array
  FROM tid_t WHERE ctid = ANY (ARRAY(SELECT tid FROM tid_seen WHERE id % 50 = 0));
-- a TID that names no row finds nothing: past every sub-group, past a page's rows
SELECT count(*) FROM tid_t WHERE ctid = '(4000000,1)';
SELECT count(*) FROM tid_t WHERE ctid = '(0,291)';

-- a version closed in this transaction is gone from its TID until rollback
CREATE TEMP TABLE tid_one AS SELECT tid FROM tid_seen WHERE id = 2 AND valid_to = 'infinity';
BEGIN;
TRUNCATE tid_ch;
INSERT INTO tid_ch VALUES (2, 222, '2026-01-03');
SELECT changes FROM zipper_lake.apply_changes('tid_t', 'tid_ch');
SELECT count(*) AS still_there FROM tid_t WHERE ctid = (SELECT tid FROM tid_one);
SELECT id, v, valid_to FROM tid_t WHERE ctid = (SELECT ctid FROM tid_t WHERE id = 2 AND v = 222);
ROLLBACK;
SELECT id, v, valid_to FROM tid_t WHERE ctid = (SELECT tid FROM tid_one);

-- TID range scans return exactly the rows of their range (one reads the
-- whole table, as a ZipperScan reading fewer columns does more cheaply)
SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM tid_t WHERE ctid >= '(1,0)' AND ctid < '(3,0)';
SELECT (SELECT count(*) FROM tid_t WHERE ctid >= '(1,0)' AND ctid < '(3,0)') AS ranged,
       (SELECT count(*) FROM tid_seen WHERE tid >= '(1,0)' AND tid < '(3,0)') AS expected;
RESET zipper_lake.enable_pruning;

-- VACUUM writes the current partition again (columnar, README "Lifecycle"):
-- its rows get new TIDs past every TID given before; the old ones name nothing
SELECT max(first_tid_block) AS before_vacuum
  FROM zipper_lake.subgroup WHERE storage_id = zipper_lake._storage_id('tid_t') \gset
VACUUM tid_t;
SELECT min(first_tid_block) > :before_vacuum AS new_tids
  FROM zipper_lake.subgroup
 WHERE storage_id = zipper_lake._storage_id('tid_t') AND partition_end = 'infinity';
SELECT * FROM tid_overlaps;
SELECT count(*) AS old_current_tids_found
  FROM tid_t WHERE ctid = ANY (ARRAY(SELECT tid FROM tid_seen WHERE valid_to = 'infinity'));
SELECT count(*) AS fetched_alike
  FROM (SELECT ctid AS tid, * FROM tid_t) s, LATERAL (SELECT * FROM tid_t t WHERE t.ctid = s.tid) f
 WHERE (f.id, f.v, f.valid_from, f.valid_to) = (s.id, s.v, s.valid_from, s.valid_to);

-- rows inserted by this transaction are found by the TIDs it reads
BEGIN;
INSERT INTO tid_t VALUES (1000, 1, '2026-01-05', 'infinity');
SELECT id, v FROM tid_t WHERE ctid = (SELECT ctid FROM tid_t WHERE id = 1000);
ROLLBACK;
DROP VIEW tid_overlaps;
DROP TABLE tid_t, tid_ch, tid_seen;
