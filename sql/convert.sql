-- A heap SCD2 table becomes a zipper table (README "DDL"): ALTER TABLE ...
-- SET ACCESS METHOD zipper_lake rewrites its rows into zipper storage,
-- unplaced, as pg_restore loads them; register() then places them into
-- end-date partitions and file groups and checks them.  A zipper table's own
-- rewrites stay refused (access_method_errors.sql).
SET timezone = 'UTC';
CREATE TABLE acct_h (id int NOT NULL, name text, big text, amount numeric,
                     valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL,
                     PRIMARY KEY (id, valid_from));
-- three versions a key (the last open), a wide value TOASTed, NULLs
INSERT INTO acct_h
SELECT k, 'n' || k || '.' || v, CASE WHEN k % 100 = 0 THEN repeat(md5(k::text), 200) END,
       CASE WHEN k % 7 = 0 THEN NULL ELSE k * 10 + v END,
       timestamptz '2026-01-01' + (v * 3 + k % 3) * interval '1 day',
       CASE WHEN v = 2 THEN 'infinity' ELSE timestamptz '2026-01-01' + ((v + 1) * 3 + k % 3) * interval '1 day' END
  FROM generate_series(1, 2000) k, generate_series(0, 2) v;
CREATE TABLE acct_ref AS SELECT * FROM acct_h;

-- its primary key comes along (README "Indexes"): rebuilt on the rows
-- converted, and kept as register() places them
-- a rolled-back conversion leaves a heap table and no zipper storage
SELECT count(*) AS storages_before FROM zipper_lake.storage \gset
BEGIN;
ALTER TABLE acct_h SET ACCESS METHOD zipper_lake;
ROLLBACK;
SELECT amname, (SELECT count(*) FROM zipper_lake.storage) = :storages_before AS no_storage_left
  FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'acct_h'::regclass;

-- converted: every row there, unplaced until registered
ALTER TABLE acct_h SET ACCESS METHOD zipper_lake;
SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'acct_h'::regclass;
SELECT count(*) AS differences FROM (
  (SELECT * FROM acct_h EXCEPT ALL SELECT * FROM acct_ref)
  UNION ALL (SELECT * FROM acct_ref EXCEPT ALL SELECT * FROM acct_h)) d;
SELECT partition_end IS NULL AS unplaced, sum(row_count) FROM zipper_lake.inspect('acct_h') GROUP BY 1;
-- its storage is the table's (not the transient relation's of the rewrite)
SELECT relid = 'acct_h'::regclass AS storage_of_the_table FROM zipper_lake.storage
 WHERE storage_id = zipper_lake._storage_id('acct_h');

-- registered: placed, and history reads as it did on the heap table
SELECT zipper_lake.register('acct_h', ARRAY['id']);
SELECT partition_end IS NULL AS unplaced, partition_end = 'infinity' AS open,
       count(*) > 0 AS subgroups, sum(row_count) AS rows
  FROM zipper_lake.inspect('acct_h') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT * FROM zipper_lake.verify('acct_h');
SELECT count(*) AS differences FROM (
  (SELECT * FROM acct_h EXCEPT ALL SELECT * FROM acct_ref)
  UNION ALL (SELECT * FROM acct_ref EXCEPT ALL SELECT * FROM acct_h)) d;
SELECT count(*) AS as_of_differences FROM (
  (SELECT * FROM zipper_lake.as_of(NULL::acct_h, '2026-01-05 12:00')
   EXCEPT ALL SELECT * FROM acct_ref WHERE valid_from <= '2026-01-05 12:00' AND valid_to > '2026-01-05 12:00')
  UNION ALL
  (SELECT * FROM acct_ref WHERE valid_from <= '2026-01-05 12:00' AND valid_to > '2026-01-05 12:00'
   EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::acct_h, '2026-01-05 12:00'))) d;
SELECT count(*) AS changes_differences FROM (
  (SELECT * FROM zipper_lake.changes(NULL::acct_h, '2026-01-04', '2026-01-05')
   EXCEPT ALL SELECT * FROM acct_ref WHERE (valid_from >= '2026-01-04' AND valid_from < '2026-01-05')
                                         OR (valid_to >= '2026-01-04' AND valid_to < '2026-01-05'))
  UNION ALL
  (SELECT * FROM acct_ref WHERE (valid_from >= '2026-01-04' AND valid_from < '2026-01-05')
                             OR (valid_to >= '2026-01-04' AND valid_to < '2026-01-05')
   EXCEPT ALL SELECT * FROM zipper_lake.changes(NULL::acct_h, '2026-01-04', '2026-01-05'))) d;
SELECT id, name, length(big) AS big, valid_from, valid_to FROM acct_h WHERE id = 1700 ORDER BY valid_from;
SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF) SELECT * FROM acct_h WHERE id = 1700;
SELECT count(*), sum(amount) FROM acct_h WHERE id BETWEEN 100 AND 299;
RESET enable_seqscan; RESET zipper_lake.enable_pruning;
SELECT count(*), sum(amount) FROM acct_ref WHERE id BETWEEN 100 AND 299;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SELECT bt_index_check('acct_h_pkey', true);
-- and it takes changes as any zipper table
CREATE TABLE acct_ch (id int, name text, big text, amount numeric, change_time timestamptz);
INSERT INTO acct_ch VALUES (1700, 'renamed', NULL, 1, '2026-01-20'), (9999, 'new', NULL, 2, '2026-01-20');
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('acct_h', 'acct_ch');
SELECT id, name, valid_from, valid_to FROM acct_h WHERE id IN (1700, 9999) AND valid_to >= '2026-01-20' ORDER BY id, valid_from;

-- overlapping versions: registering fails naming the key and changes
-- nothing; back to heap, fixed there, converted again
CREATE TABLE ovl (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);
INSERT INTO ovl VALUES (1, 1, '2026-01-01', '2026-01-10'), (1, 2, '2026-01-05', 'infinity'),
                       (2, 1, '2026-01-01', 'infinity');
ALTER TABLE ovl SET ACCESS METHOD zipper_lake;
\set VERBOSITY default
SELECT zipper_lake.register('ovl', ARRAY['id']);
\set VERBOSITY terse
SELECT count(*) AS registrations FROM zipper_lake.registration WHERE tbl = 'ovl'::regclass;
SELECT count(*) AS rows FROM ovl;
ALTER TABLE ovl SET ACCESS METHOD heap;
UPDATE ovl SET valid_to = '2026-01-05' WHERE id = 1 AND v = 1;
ALTER TABLE ovl SET ACCESS METHOD zipper_lake;
SELECT zipper_lake.register('ovl', ARRAY['id']);
SELECT id, v, valid_from, valid_to FROM ovl ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('ovl');

-- a row-level AFTER trigger cannot come along (triggers.sql)
DROP TABLE acct_h, acct_ref, acct_ch, ovl;
-- and their metadata went with them
SELECT count(*) AS orphan_storages FROM zipper_lake.storage s
 WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.relid);
