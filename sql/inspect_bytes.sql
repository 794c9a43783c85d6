-- inspect_bytes() (README "Monitoring and troubleshooting"): what a zipper
-- table's file and its catalog rows weigh, part by part.  Each part is
-- checked here against the catalog read directly (this test runs as a
-- superuser, who may).
SET timezone = 'UTC';

CREATE TABLE ib (id int, v text, valid_from timestamptz NOT NULL,
                 valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ib', key => ARRAY['id'], partition_unit => 'day');
CREATE TABLE ib_changes (id int, v text, change_time timestamptz, op text);
INSERT INTO ib_changes SELECT g, repeat('x', g % 50), '2024-01-01', 'u' FROM generate_series(1, 3000) g;
SELECT changes FROM zipper_lake.apply_changes('ib', 'ib_changes');
TRUNCATE ib_changes;
INSERT INTO ib_changes SELECT g, 'y', '2024-01-03', 'u' FROM generate_series(1, 3000, 3) g;
SELECT changes FROM zipper_lake.apply_changes('ib', 'ib_changes');
-- a late change splits closed versions: their sub-groups get masks
TRUNCATE ib_changes;
INSERT INTO ib_changes SELECT g, 'late', '2024-01-02', 'u' FROM generate_series(1, 3000, 6) g;
SELECT changes FROM zipper_lake.apply_changes('ib', 'ib_changes');
-- no-op changes (the same values again) go to the change record
TRUNCATE ib_changes;
INSERT INTO ib_changes SELECT g, 'y', '2024-01-04', 'u' FROM generate_series(4, 3000, 6) g;
SELECT changes, unchanged FROM zipper_lake.apply_changes('ib', 'ib_changes');

CREATE VIEW ib_bytes AS SELECT kind, part, bytes FROM zipper_lake.inspect_bytes('ib');
CREATE VIEW ib_storages AS
SELECT storage_id FROM zipper_lake.storage WHERE relid = 'ib'::regclass;

-- every part, in a fixed order
SELECT kind, part, bytes > 0 AS some FROM ib_bytes;

-- the file: sub-groups are inspect()'s blocks, the parts add up to the file
SELECT (SELECT bytes FROM ib_bytes WHERE part = 'sub-groups')
         = (SELECT sum(blocks) * 8192 FROM zipper_lake.inspect('ib')) AS subgroups_exact,
       (SELECT sum(bytes) FROM ib_bytes WHERE kind = 'table file')
         = pg_relation_size('ib') AS file_adds_up,
       (SELECT bytes FROM ib_bytes WHERE part = 'free extents')
         = (SELECT coalesce(sum(blocks), 0) * 8192 FROM zipper_lake.free_extent
             WHERE storage_id IN (SELECT storage_id FROM ib_storages)) AS free_exact;

-- the catalog: key directories apart from the rest of the sub-group rows,
-- masks, the change record
SELECT (SELECT bytes FROM ib_bytes WHERE part = 'key directories')
         = (SELECT sum(pg_column_size(key_directory)) FROM zipper_lake.subgroup
             WHERE storage_id IN (SELECT storage_id FROM ib_storages)) AS key_directories_exact,
       (SELECT bytes FROM ib_bytes WHERE part = 'sub-group rows') + (SELECT bytes FROM ib_bytes WHERE part = 'key directories')
         = (SELECT sum(pg_column_size(g.*)) FROM zipper_lake.subgroup g
             WHERE storage_id IN (SELECT storage_id FROM ib_storages)) AS subgroup_rows_exact,
       (SELECT bytes FROM ib_bytes WHERE part = 'masks')
         = (SELECT sum(pg_column_size(m.*)) FROM zipper_lake.mask m
             WHERE storage_id IN (SELECT storage_id FROM ib_storages)) AS masks_exact,
       (SELECT bytes FROM ib_bytes WHERE part = 'change record')
         = (SELECT sum(pg_column_size(r.*)) FROM zipper_lake.record_segment r WHERE tbl = 'ib'::regclass)
           + (SELECT sum(pg_column_size(h.*)) FROM zipper_lake.record_head h WHERE tbl = 'ib'::regclass)
         AS record_exact;

-- masks are compact (src/catalog/zl_maskcodec.c): a byte or two a masked
-- position, where an int[] took four; bytes that do not decode are reported
SELECT (SELECT sum(octet_length(positions)) FROM zipper_lake.mask
         WHERE storage_id IN (SELECT storage_id FROM ib_storages))
       < 2 * (SELECT sum(masked_rows) FROM zipper_lake.inspect('ib')) AS masks_compact;
BEGIN;
UPDATE zipper_lake.mask SET positions = '\xff'::bytea
 WHERE storage_id IN (SELECT storage_id FROM ib_storages);
DO $$
BEGIN
  PERFORM count(*) FROM ib;
EXCEPTION WHEN data_corrupted THEN
  RAISE NOTICE '%: %', SQLSTATE, regexp_replace(SQLERRM, '[0-9]+', 'N');
END $$;
ROLLBACK;

-- VACUUM compacts the masked current sub-groups: their blocks become free
-- extents, counted as such
VACUUM ib;
SELECT (SELECT bytes FROM ib_bytes WHERE part = 'free extents') > 0 AS some_free,
       (SELECT bytes FROM ib_bytes WHERE part = 'free extents')
         = (SELECT coalesce(sum(blocks), 0) * 8192 FROM zipper_lake.free_extent
             WHERE storage_id IN (SELECT storage_id FROM ib_storages)) AS free_exact,
       (SELECT sum(bytes) FROM ib_bytes WHERE kind = 'table file')
         = pg_relation_size('ib') AS file_adds_up;

-- the rows a transaction has not flushed yet are counted (inspect_bytes
-- flushes them first, as inspect() does)
BEGIN;
INSERT INTO ib VALUES (9001, 'new', '2024-01-05', 'infinity');
SELECT bytes AS pending_sg_bytes FROM ib_bytes WHERE part = 'sub-groups' \gset
SELECT :pending_sg_bytes = (SELECT sum(blocks) * 8192 FROM zipper_lake.inspect('ib')) AS subgroups_exact,
       (SELECT count(*) FROM zipper_lake.inspect('ib') WHERE row_count = 1) AS one_row_subgroup;
ROLLBACK;

-- an empty table: its file is its metapage
CREATE TABLE ib_empty (LIKE ib) USING zipper_lake;
SELECT zipper_lake.register('ib_empty', key => ARRAY['id']);
SELECT kind, part, bytes FROM zipper_lake.inspect_bytes('ib_empty');

-- not a zipper table
SELECT * FROM zipper_lake.inspect_bytes('ib_changes');
