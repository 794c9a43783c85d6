-- apply_changes finds the open versions of a chunk of 1024 keys or more
-- through a merged key index of the current partition, kept per backend
-- (README "Features and how they work", "Key access"); smaller chunks probe
-- each sub-group's key directory.  The same batches go into ki_dir under
-- work_mem = 64kB (chunks of a few dozen keys: directories only) and, from
-- a new session, into ki_idx (chunks of the whole batch): the first
-- matches the batch in the directories' stored form, then the index is
-- built over the sub-groups there are, sub-groups written since are probed
-- through their directories until enough of them make it build again,
-- sub-groups compacted away or written by a rolled-back batch are passed
-- over.  Both tables must end the same.
SET timezone = 'UTC';
CREATE TABLE ki_dir (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
CREATE TABLE ki_idx (LIKE ki_dir) USING zipper_lake;
SELECT zipper_lake.register('ki_dir', ARRAY['id'], current_group_span => '1 hour');
SELECT zipper_lake.register('ki_idx', ARRAY['id'], current_group_span => '1 hour');
-- batch 0: 3000 keys opened over 20 hours (20 current sub-groups);
-- batches 1-12: 1500 to 2900 keys each, a day apart, spread over 20 hours:
-- updates, no-ops (v unchanged), deletes, re-opened and new keys
CREATE TABLE ki_batches AS
SELECT 0 AS b, k AS id, k % 10 AS v,
       timestamptz '2026-01-01' + (k % 20) * interval '1 hour' AS change_time, 'I' AS op
  FROM generate_series(1, 3000) k
UNION ALL
SELECT b, k AS id, CASE WHEN k % 5 = 0 THEN NULL ELSE (k * b) % 10 END,
       timestamptz '2026-01-01' + b * interval '1 day' + (k % 20) * interval '1 hour'
         + (k % 7) * interval '1 minute',
       CASE WHEN k % 17 = b THEN 'D' ELSE 'U' END
  FROM generate_series(1, 12) b, generate_series(1, 3600) k
 WHERE (k + b) % 3 <> 0 OR k > 3000 - 40 * b;
SELECT b, count(*) FROM ki_batches GROUP BY b HAVING count(*) < 1024;
CREATE TABLE ki_counts (tbl text, b int, changes bigint, inserted bigint, closed bigint,
                        deleted bigint, unchanged bigint, late bigint);
CREATE FUNCTION ki_apply(tbl text, first int, last int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first .. last LOOP
        EXECUTE format('CREATE TEMP TABLE ki_batch AS SELECT id, v, change_time, op FROM ki_batches WHERE b = %s', i);
        -- null values stand for "no change": the key's open value
        EXECUTE format('UPDATE ki_batch c SET v = z.v FROM %I z
                         WHERE c.v IS NULL AND z.id = c.id AND z.valid_to = ''infinity''', tbl);
        EXECUTE format('INSERT INTO ki_counts SELECT %L, %s, * FROM zipper_lake.apply_changes(%L, ''ki_batch'', op => ''op'')',
                       tbl, i, tbl);
        DROP TABLE ki_batch;
    END LOOP;
END $$;
SET work_mem = '64kB';
SELECT ki_apply('ki_dir', 0, 12);
RESET work_mem;
SELECT ki_apply('ki_idx', 0, 0);
\c
SET timezone = 'UTC';
-- a new backend: the first batch matches its keys in the directories'
-- stored form (no index yet, nothing decoded), the next builds the index
CREATE TEMP TABLE ki_batch AS SELECT id, v, change_time, op FROM ki_batches WHERE b = 1;
UPDATE ki_batch c SET v = z.v FROM ki_idx z WHERE c.v IS NULL AND z.id = c.id AND z.valid_to = 'infinity';
SET client_min_messages = debug1;
INSERT INTO ki_counts SELECT 'ki_idx', 1, * FROM zipper_lake.apply_changes('ki_idx', 'ki_batch', op => 'op');
RESET client_min_messages;
DROP TABLE ki_batch;
SELECT ki_apply('ki_idx', 2, 3);
-- a batch rolled back: its sub-groups never become visible
BEGIN;
SELECT ki_apply('ki_idx', 4, 4);
ROLLBACK;
DELETE FROM ki_counts WHERE tbl = 'ki_idx' AND b = 4;
SELECT ki_apply('ki_idx', 4, 9);
-- the index is due to be built again but no longer fits key_cache_memory:
-- every sub-group is probed through its own directory (a failed rebuild
-- once left the dropped index's map behind, and its sub-groups unread)
SET zipper_lake.key_cache_memory = '64kB';
SELECT ki_apply('ki_idx', 10, 12);
RESET zipper_lake.key_cache_memory;
-- the same counts, the same versions, healthy
SELECT b, changes, inserted, closed, deleted, unchanged, late FROM ki_counts WHERE tbl = 'ki_dir'
EXCEPT SELECT b, changes, inserted, closed, deleted, unchanged, late FROM ki_counts WHERE tbl = 'ki_idx';
SELECT sum(changes) AS changes, sum(inserted) AS inserted, sum(closed) AS closed,
       sum(deleted) AS deleted, sum(unchanged) AS unchanged
  FROM ki_counts WHERE tbl = 'ki_idx';
SELECT count(*) AS dir_not_idx FROM (TABLE ki_dir EXCEPT ALL TABLE ki_idx) d;
SELECT count(*) AS idx_not_dir FROM (TABLE ki_idx EXCEPT ALL TABLE ki_dir) d;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM ki_idx;
-- the open versions are those the batches leave: one a key not deleted last
SELECT count(*) AS wrong_open FROM (
  SELECT id, bool_or(op = 'D' AND change_time = last) AS gone
    FROM (SELECT *, max(change_time) OVER (PARTITION BY id) AS last FROM ki_batches) x
   GROUP BY id) e
  FULL JOIN (SELECT id, valid_from FROM ki_idx WHERE valid_to = 'infinity') z USING (id)
 WHERE (NOT e.gone) IS DISTINCT FROM (z.id IS NOT NULL);
SELECT count(*) AS current_subgroups FROM zipper_lake.inspect('ki_idx') WHERE partition_end = 'infinity';
SELECT * FROM zipper_lake.verify('ki_idx');
-- keys whose hashes collide: the index names the rows of both keys for
-- either one, and apply takes the key a row names for the one the index
-- was probed for only after comparing them; each row goes to its own key
CREATE TABLE ki_hash (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ki_hash', ARRAY['id']);
SELECT hashint4(4119) = hashint4(209697) AS collide, hashint4(5754) = hashint4(197615) AS collide;
CREATE TABLE ki_hash_batch AS
SELECT k AS id, 0 AS v, timestamptz '2026-01-01' AS change_time
  FROM (SELECT generate_series(1, 1100) UNION ALL VALUES (4119), (5754), (197615), (209697)) s(k);
SELECT * FROM zipper_lake.apply_changes('ki_hash', 'ki_hash_batch');
-- 1103 keys, from a new backend (its stored directory names the rows),
-- then again (the index covers the sub-group): both colliding keys of one
-- pair, one of the other
\c
SET timezone = 'UTC';
DELETE FROM ki_hash_batch WHERE id = 197615;
UPDATE ki_hash_batch SET v = id, change_time = '2026-01-02';
SELECT * FROM zipper_lake.apply_changes('ki_hash', 'ki_hash_batch');
UPDATE ki_hash_batch SET v = id + 1, change_time = '2026-01-03';
SELECT * FROM zipper_lake.apply_changes('ki_hash', 'ki_hash_batch');
SELECT id, v, valid_from, valid_to FROM ki_hash WHERE id IN (4119, 5754, 197615, 209697)
 ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('ki_hash');
-- index hits are put in (sub-group, position) order by a radix sort of
-- their 64-bit number, passing over the bytes all hits share: three
-- current sub-groups of 800 rows make hits differ in three bytes (sub-group,
-- and the two of positions up to ~1,900), an odd number of passes
CREATE TABLE ki_three (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ki_three', ARRAY['id'], current_group_span => '1 hour');
INSERT INTO ki_three
SELECT k, 0, timestamptz '2026-01-01' + (k % 3) * interval '1 hour', 'infinity'
  FROM generate_series(1, 2400) k;
CREATE TABLE ki_three_batch AS
SELECT k AS id, k AS v, timestamptz '2026-01-02' AS change_time FROM generate_series(1, 2400) k;
CREATE TABLE ki_three_again AS
SELECT id, v, valid_from AS change_time FROM ki_three;
\c
SET timezone = 'UTC';
-- the backend's first look goes to the stored directories: the inserts
-- applied again (all unchanged) take it, so that the batch goes through
-- the index
SELECT changes, unchanged FROM zipper_lake.apply_changes('ki_three', 'ki_three_again');
SELECT * FROM zipper_lake.apply_changes('ki_three', 'ki_three_batch');
SELECT count(*) AS versions,
       count(*) FILTER (WHERE valid_to = 'infinity' AND v = id) AS opened,
       count(*) FILTER (WHERE valid_to = '2026-01-02' AND v = 0) AS closed
  FROM ki_three;
SELECT * FROM zipper_lake.verify('ki_three');
DROP TABLE ki_dir, ki_idx, ki_batches, ki_counts, ki_hash, ki_hash_batch, ki_three, ki_three_batch,
  ki_three_again;
DROP FUNCTION ki_apply(text, int, int);
