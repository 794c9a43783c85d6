-- VACUUM moves sub-groups off the end of a mostly free file and, at its
-- next run, gives the end back (README "Lifecycle", src/lifecycle/zl_relocate.c).
SET timezone = 'UTC';

CREATE TABLE rl (id int, pad text, valid_from timestamptz NOT NULL,
                 valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('rl', key => ARRAY['id'], history_format => 'rows');
-- two history partitions written one after the other: Jan 5's low in the
-- file, Jan 20's above it; then the open versions
INSERT INTO rl SELECT g, md5(g::text) || md5((g + 1)::text), '2024-01-01', '2024-01-05'
  FROM generate_series(1, 25000) g;
INSERT INTO rl SELECT g, md5(g::text) || md5((g + 2)::text), '2024-01-05', '2024-01-20'
  FROM generate_series(1, 20000) g;
INSERT INTO rl SELECT g, 'open', '2024-01-20', 'infinity' FROM generate_series(1, 200) g;
CREATE TABLE rl_before AS SELECT * FROM rl;

-- dropping Jan 5 frees the bottom of the file, more than Jan 20 takes
SELECT zipper_lake.drop_history('rl', '2024-01-06');
CREATE VIEW rl_file AS
SELECT pg_relation_size('rl') / 8192 AS file_blocks,
       (SELECT sum(blocks) FROM zipper_lake.inspect('rl')) AS subgroup_blocks,
       (SELECT min(first_block) FROM zipper_lake.inspect('rl') WHERE partition_end = '2024-01-20') AS jan20_starts_at,
       (SELECT bytes / 8192 FROM zipper_lake.inspect_bytes('rl') WHERE part = 'free extents') AS free_blocks;
SELECT file_blocks > 2 * subgroup_blocks AS mostly_free, jan20_starts_at > subgroup_blocks AS jan20_high,
       free_blocks > 0 AS has_free FROM rl_file;
SELECT file_blocks AS file_before, subgroup_blocks AS subgroups_before,
       jan20_starts_at AS jan20_before FROM rl_file \gset

-- the first VACUUM moves Jan 20's sub-groups down into the free blocks:
-- same rows, same layout rules, the file not shorter yet (the old blocks
-- stay until no snapshot can see them)
VACUUM rl;
SELECT jan20_starts_at < :jan20_before AS jan20_moved_down,
       subgroup_blocks <= :subgroups_before AS no_larger,
       file_blocks = :file_before AS file_kept FROM rl_file;
SELECT count(*) AS jan20_subgroups, sum(row_count) AS jan20_rows
  FROM zipper_lake.inspect('rl') WHERE partition_end = '2024-01-20';
SELECT count(*) AS missing FROM (SELECT * FROM rl_before WHERE valid_to > '2024-01-06'
                                 EXCEPT ALL SELECT * FROM rl) d;
SELECT count(*) AS extra FROM (SELECT * FROM rl EXCEPT ALL
                               SELECT * FROM rl_before WHERE valid_to > '2024-01-06') d;
SELECT * FROM zipper_lake.verify('rl');

-- the second gives the end of the file back
VACUUM rl;
SELECT file_blocks < :file_before / 2 AS file_shrunk,
       file_blocks - subgroup_blocks <= 2 AS nearly_packed FROM rl_file;
SELECT count(*) AS rows_now FROM rl;
SELECT * FROM zipper_lake.verify('rl');
-- reads prune and find keys as before
SELECT count(*) FROM rl WHERE valid_from <= '2024-01-10' AND valid_to > '2024-01-10';
SELECT id, valid_from, valid_to FROM rl WHERE id = 777 ORDER BY valid_from;

-- a further VACUUM has nothing to move
SELECT file_blocks AS file_packed FROM rl_file \gset
VACUUM rl;
SELECT file_blocks = :file_packed AS unchanged FROM rl_file;

-- writes after the moves go on normally
CREATE TABLE rl_ch (id int, pad text, change_time timestamptz);
INSERT INTO rl_ch SELECT g, 'new', '2024-02-01' FROM generate_series(1, 300) g;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('rl', 'rl_ch');
SELECT count(*) FROM rl WHERE valid_to = 'infinity';
SELECT * FROM zipper_lake.verify('rl');

-- a small table is left alone: no moves for a few free blocks
CREATE TABLE rl_small (LIKE rl) USING zipper_lake;
SELECT zipper_lake.register('rl_small', key => ARRAY['id'], history_format => 'rows');
INSERT INTO rl_small SELECT g, 'x', '2024-01-01', '2024-01-05' FROM generate_series(1, 500) g;
INSERT INTO rl_small SELECT g, 'y', '2024-01-05', '2024-01-20' FROM generate_series(1, 500) g;
SELECT zipper_lake.drop_history('rl_small', '2024-01-06');
SELECT min(first_block) AS small_starts_at FROM zipper_lake.inspect('rl_small') \gset
VACUUM rl_small;
SELECT min(first_block) = :small_starts_at AS not_moved FROM zipper_lake.inspect('rl_small');

-- a columnar sub-group larger than any free extent below it moves in pieces
-- that fit them: free space fragmented into holes between sub-groups that
-- stay (one of history holding half a full file group at least: one with
-- fewer rows VACUUM would merge again)
SET zipper_lake.relocate_min_blocks = 1;
CREATE TABLE rc (id int, pad text, valid_from timestamptz NOT NULL,
                 valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('rc', key => ARRAY['id']);
DO $$
BEGIN
  FOR d IN 1..8 LOOP
    -- a partition ending in January (dropped below), then one ending in March (stays)
    INSERT INTO rc SELECT g, md5(g::text) || md5((g + d)::text), '2024-01-01',
                          timestamptz '2024-01-01' + d * interval '1 day'
      FROM generate_series(d * 10000, d * 10000 + 4999) g;
    INSERT INTO rc SELECT g, 'stays', '2024-02-01', timestamptz '2024-03-01' + d * interval '1 day'
      FROM generate_series(d * 10000 + 6000, d * 10000 + 6099) g;
  END LOOP;
END $$;
INSERT INTO rc SELECT g, md5(g::text) || md5((g + 99)::text), '2024-02-01', '2024-04-01'
  FROM generate_series(100000, 116999) g;
CREATE TABLE rc_before AS SELECT * FROM rc WHERE valid_to > '2024-01-20';
SELECT zipper_lake.drop_history('rc', '2024-01-20');
CREATE VIEW rc_file AS
SELECT pg_relation_size('rc') / 8192 AS file_blocks,
       (SELECT count(*) FROM zipper_lake.inspect('rc') WHERE partition_end = '2024-04-01') AS april_subgroups,
       (SELECT max(blocks) FROM zipper_lake.inspect('rc') WHERE partition_end = '2024-04-01') AS april_blocks,
       (SELECT max(blocks) FROM zipper_lake.free_extent WHERE storage_id = zipper_lake._storage_id('rc')) AS largest_hole;
SELECT april_subgroups, april_blocks > largest_hole AS larger_than_any_hole FROM rc_file;
SELECT file_blocks AS rc_file_before FROM rc_file \gset
VACUUM rc;
SELECT april_subgroups > 1 AS moved_in_pieces,
       (SELECT sum(row_count) FROM zipper_lake.inspect('rc') WHERE partition_end = '2024-04-01') AS april_rows
  FROM rc_file;
SELECT count(*) AS differences FROM (
  (SELECT * FROM rc EXCEPT ALL SELECT * FROM rc_before)
  UNION ALL (SELECT * FROM rc_before EXCEPT ALL SELECT * FROM rc)) d;
SELECT * FROM zipper_lake.verify('rc');
VACUUM rc;
SELECT file_blocks < :rc_file_before AS file_shrunk FROM rc_file;
-- the pieces keep April's rows in valid_from order: pruning and keys as before
SELECT count(*) FROM rc WHERE valid_to >= '2024-04-01' AND valid_from >= '2024-02-01';
SELECT id, valid_to FROM rc WHERE id = 107777;
RESET zipper_lake.relocate_min_blocks;

-- a table whose every version was erased: its whole file is spare, there is
-- no sub-group to move: VACUUM's worker moves nothing (it crashed here)
CREATE TABLE rz (id int, name text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('rz', key => ARRAY['id']);
CREATE TABLE rz_ch (id int, name text, change_time timestamptz);
INSERT INTO rz_ch SELECT k, 'n' || k, '2026-03-01 16:00+00' FROM generate_series(1, 2000) k;
SELECT changes FROM zipper_lake.apply_changes('rz', 'rz_ch');
CREATE TABLE rz_keys AS SELECT id FROM rz_ch;
SELECT zipper_lake.erase('rz', 'rz_keys');
SET zipper_lake.relocate_min_blocks = 1;
VACUUM rz;
VACUUM rz;
RESET zipper_lake.relocate_min_blocks;
SELECT count(*) AS versions, (SELECT count(*) FROM zipper_lake.inspect('rz')) AS sub_groups FROM rz;
SELECT * FROM zipper_lake.verify('rz');
DROP TABLE rz, rz_ch, rz_keys;

