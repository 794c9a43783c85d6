-- The blocks of sub-groups that compaction deleted are written again once
-- no snapshot can see those sub-groups: a table whose current partition is
-- rewritten every day grows by its history only.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
-- the current partition stays in rows, and VACUUM moves no sub-groups off
-- the end of the file: either would move the sub-groups whose blocks these
-- checks count (current_columnar.sql, relocate.sql)
SET zipper_lake.columnar_current = off;
SET zipper_lake.relocate_min_blocks = 1000000;

CREATE TABLE churn (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
-- the row format's layout: columnar history is packed tighter (columnar.sql)
SELECT zipper_lake.register('churn', ARRAY['id'], history_format => 'rows');
CREATE TABLE churn_ch (id int, v int, change_time timestamptz);

-- every key changes every day, so each day compacts the previous day's
-- current sub-group away; one transaction per day
CREATE PROCEDURE churn_days(first_day int, last_day int, commit_each bool DEFAULT true)
LANGUAGE plpgsql AS $$
BEGIN
  FOR d IN first_day..last_day LOOP
    TRUNCATE churn_ch;
    INSERT INTO churn_ch SELECT k, d, '2026-01-01'::timestamptz + d * interval '1 day'
      FROM generate_series(1, 3000) k;
    PERFORM zipper_lake.apply_changes('churn', 'churn_ch');
    IF commit_each THEN
      COMMIT;
    END IF;
  END LOOP;
END $$;

CALL churn_days(0, 3);
SELECT pg_relation_size('churn') / 8192 AS blocks_before \gset
CALL churn_days(4, 11);

-- twelve days of versions, all there, and the layout is sound
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open, min(v), max(v) FROM churn;
SELECT * FROM zipper_lake.verify('churn');
SELECT count(*) AS current_sub_groups FROM zipper_lake.inspect('churn') WHERE partition_end = 'infinity';

-- the eight days wrote sixteen sub-groups (eight closed days of history,
-- eight current ones), yet the file grew by about half of that: each
-- current sub-group went into the blocks of one compacted two days before
SELECT (pg_relation_size('churn') / 8192 - :blocks_before) AS grown,
       (SELECT sum(blocks) FROM zipper_lake.inspect('churn')
         WHERE partition_end BETWEEN '2026-01-04' AND '2026-01-12') AS history_written
\gset
SELECT :grown <= :history_written + 1 AS grew_by_history_only,
       :grown > 0 AS history_still_appended;
-- some sub-groups lie before the point the file had reached after day 3
SELECT count(*) > 0 AS reused_blocks FROM zipper_lake.inspect('churn')
 WHERE first_block < :blocks_before AND partition_end >= '2026-01-05';

-- what a transaction frees waits for later transactions: three days in
-- one transaction compact sub-groups that this transaction itself wrote
BEGIN;
CALL churn_days(12, 14, false);
COMMIT;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open, min(v), max(v) FROM churn;
SELECT * FROM zipper_lake.verify('churn');

-- VACUUM VERBOSE tells the blocks apart
VACUUM (VERBOSE, PROCESS_TOAST false) churn;

-- a rolled-back writer gives the extents it took back
BEGIN;
CALL churn_days(15, 15, false);
ROLLBACK;
CALL churn_days(15, 16);
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open, min(v), max(v) FROM churn;
SELECT * FROM zipper_lake.verify('churn');

-- blocks appended by a transaction that aborted lie at the end of the
-- file, where VACUUM gives them back to the file system (unless told not to;
-- it may also move a sub-group down off the end: zl_relocate.c)
SELECT pg_relation_size('churn') / 8192 AS blocks_before \gset
BEGIN;
INSERT INTO churn SELECT 100000 + k, -1, '2027-01-01', 'infinity' FROM generate_series(1, 20000) k;
SELECT count(*) FROM churn WHERE v = -1;
ROLLBACK;
SELECT pg_relation_size('churn') / 8192 AS blocks_aborted \gset
SELECT :blocks_aborted > :blocks_before + 50 AS aborted_blocks_appended;
VACUUM (TRUNCATE false) churn;
SELECT pg_relation_size('churn') / 8192 = :blocks_aborted AS not_truncated;
VACUUM churn;
SELECT pg_relation_size('churn') / 8192 <= :blocks_before AS truncated;

-- in the middle of the file (a later write appended after them, too many
-- rows for any free extent), reclaim() makes them free extents, and a
-- later write goes into them instead of extending the file
BEGIN;
INSERT INTO churn SELECT 100000 + k, -1, '2027-01-01', 'infinity' FROM generate_series(1, 20000) k;
ROLLBACK;
INSERT INTO churn SELECT 200000 + k, -3, '2027-02-01', 'infinity' FROM generate_series(1, 20000) k;
VACUUM churn;
SELECT pg_relation_size('churn') / 8192 AS blocks_before \gset
SELECT zipper_lake.reclaim('churn') > 0 AS reclaimed_some;
SELECT zipper_lake.reclaim('churn') AS reclaimed_again;
INSERT INTO churn SELECT 100000 + k, -2, '2027-01-01', 'infinity' FROM generate_series(1, 20000) k;
SELECT pg_relation_size('churn') / 8192 = :blocks_before AS file_did_not_grow;
SELECT count(*), min(v) FROM churn WHERE v < 0;
SELECT * FROM zipper_lake.verify('churn');

-- free extents at the end of the file: deleting the last sub-group's rows
-- at their valid_from leaves no history and compacts it away; reclaim()
-- gives its extent up (a rollback gives it back) and VACUUM truncates it
CREATE TABLE churn_del (id int, v int, change_time timestamptz, op text);
INSERT INTO churn_del SELECT 200000 + k, NULL, '2027-02-01', 'D' FROM generate_series(1, 20000) k;
SELECT deleted FROM zipper_lake.apply_changes('churn', 'churn_del');
SELECT count(*) AS left_of_them FROM churn WHERE v = -3;
SELECT max(first_block + blocks) AS last_used FROM zipper_lake.inspect('churn') \gset
SELECT :blocks_before > :last_used + 50 AS free_extent_at_the_end;
BEGIN;
SELECT zipper_lake.reclaim('churn') > 0 AS reclaimed_tail;
ROLLBACK;
VACUUM churn;
SELECT pg_relation_size('churn') / 8192 = :blocks_before AS referenced_extent_kept;
SELECT zipper_lake.reclaim('churn') > 0 AS reclaimed_tail;
VACUUM churn;
SELECT pg_relation_size('churn') / 8192 = :last_used AS truncated_to_last_sub_group;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM churn;
SELECT * FROM zipper_lake.verify('churn');
DROP TABLE churn_del;

-- like heap, VACUUM does not take the table's exclusive lock for a tail
-- under 1000 blocks and a sixteenth of the file (nor says it truncated)
CREATE TABLE small_tail (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('small_tail', ARRAY['id']);
INSERT INTO small_tail SELECT k, 1, '2026-01-01', 'infinity' FROM generate_series(1, 20000) k;
BEGIN;
INSERT INTO small_tail SELECT k, 2, '2026-02-01', 'infinity' FROM generate_series(20001, 20100) k;
ROLLBACK;
SELECT pg_relation_size('small_tail') / 8192 AS blocks_before \gset
SELECT :blocks_before > (SELECT max(first_block + blocks) FROM zipper_lake.inspect('small_tail'))
  AS has_unreferenced_tail;
VACUUM (VERBOSE, PROCESS_TOAST false) small_tail;
SELECT pg_relation_size('small_tail') / 8192 = :blocks_before AS not_truncated;
-- so reclaim() records such a tail as a free extent: it stays reusable
SELECT zipper_lake.reclaim('small_tail') > 0 AS reclaimed;
SELECT count(*) AS free_extents FROM zipper_lake.free_extent
 WHERE storage_id = zipper_lake._storage_id('small_tail');
DROP TABLE small_tail;

-- a table that VACUUM must not truncate gets free extents at the end of its
-- file from reclaim() instead, and reuses them
CREATE TABLE keep (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake WITH (vacuum_truncate = false);
SELECT zipper_lake.register('keep', ARRAY['id']);
INSERT INTO keep SELECT k, 1, '2026-01-01', 'infinity' FROM generate_series(1, 1000) k;
BEGIN;
INSERT INTO keep SELECT k, 2, '2026-02-01', 'infinity' FROM generate_series(1001, 21000) k;
ROLLBACK;
SELECT pg_relation_size('keep') / 8192 AS blocks_before \gset
VACUUM keep;
SELECT pg_relation_size('keep') / 8192 = :blocks_before AS not_truncated;
SELECT zipper_lake.reclaim('keep') > 0 AS reclaimed_tail;
SELECT count(*) AS free_extents FROM zipper_lake.free_extent WHERE storage_id = zipper_lake._storage_id('keep');
INSERT INTO keep SELECT k, 3, '2026-02-01', 'infinity' FROM generate_series(1001, 21000) k;
SELECT pg_relation_size('keep') / 8192 = :blocks_before AS file_did_not_grow;
SELECT count(*), sum(v) FROM keep;
SELECT * FROM zipper_lake.verify('keep');
DROP TABLE keep;
-- owner only, like VACUUM
CREATE ROLE regress_zl_reclaimer;
GRANT SELECT, INSERT ON churn TO regress_zl_reclaimer;
SET ROLE regress_zl_reclaimer;
SELECT zipper_lake.reclaim('churn');
\echo :SQLSTATE
RESET ROLE;
DROP OWNED BY regress_zl_reclaimer;
DROP ROLE regress_zl_reclaimer;
SELECT zipper_lake.reclaim('churn_ch');
\echo :SQLSTATE

-- free extents that touch count as one: two current sub-groups written side
-- by side (two windows) and compacted together hold a sub-group of twice
-- their size
CREATE TABLE twin (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('twin', ARRAY['id']);
CREATE TABLE twin_ch (id int, v int, change_time timestamptz);
INSERT INTO twin SELECT k, 1, CASE WHEN k <= 2000 THEN timestamptz '2026-01-01' ELSE '2026-01-02' END, 'infinity'
  FROM generate_series(1, 4000) k;
SELECT min(first_block) AS day1_first FROM zipper_lake.inspect('twin') \gset
SELECT count(*) AS day1_sub_groups FROM zipper_lake.inspect('twin');
INSERT INTO twin_ch SELECT k, 2, '2026-01-03' FROM generate_series(1, 4000) k;
SELECT changes FROM zipper_lake.apply_changes('twin', 'twin_ch');
TRUNCATE twin_ch;
INSERT INTO twin_ch SELECT k, 3, '2026-01-04' FROM generate_series(1, 4000) k;
SELECT changes FROM zipper_lake.apply_changes('twin', 'twin_ch');
SELECT partition_end, row_count FROM zipper_lake.inspect('twin') WHERE first_block = :day1_first;
SELECT * FROM zipper_lake.verify('twin');

-- a table whose batches keep growing: each day's sub-groups are larger than
-- anything freed before, so they fill the free extents in parts instead
CREATE TABLE grow (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('grow', ARRAY['id'], history_format => 'rows');
CREATE TABLE grow_ch (id int, v int, change_time timestamptz);
CREATE PROCEDURE grow_days(days int) LANGUAGE plpgsql AS $$
BEGIN
  FOR d IN 0..days - 1 LOOP
    TRUNCATE grow_ch;
    INSERT INTO grow_ch SELECT k, d, '2026-01-01'::timestamptz + d * interval '1 day'
      FROM generate_series(1, (1500 * power(1.05, d))::int) k;
    PERFORM zipper_lake.apply_changes('grow', 'grow_ch');
    COMMIT;
  END LOOP;
END $$;
CALL grow_days(16);
SELECT (SELECT sum(blocks) FROM zipper_lake.free_extent
         WHERE storage_id = zipper_lake._storage_id('grow')) * 5
       < (SELECT sum(blocks) FROM zipper_lake.inspect('grow')) AS free_under_a_fifth;
SELECT * FROM zipper_lake.verify('grow');
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM grow;

-- dropping the table forgets its free extents (one more day frees one)
CALL churn_days(17, 17);
SELECT zipper_lake._storage_id('churn') AS churn_storage \gset
SELECT count(*) > 0 AS has_free_extents FROM zipper_lake.free_extent WHERE storage_id = :churn_storage;
DROP TABLE churn;
SELECT count(*) AS free_extents_left FROM zipper_lake.free_extent WHERE storage_id = :churn_storage;
