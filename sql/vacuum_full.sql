-- VACUUM FULL writes a zipper table again into a new file (README "DDL"):
-- every version it holds, placed by its registration, all columnar; masked
-- rows, deleted sub-groups and free space stay behind with the old file,
-- whose metadata goes.  The registration and the change record stay.
SET timezone = 'UTC';
CREATE TABLE vf (id int, name text, big text, amount numeric,
                 valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('vf', ARRAY['id'], late_horizon => '30 days');
-- wide values that stay TOASTed in the current partition's row sub-groups
INSERT INTO vf SELECT g, 'n' || g,
       CASE WHEN g % 500 = 0 THEN (SELECT string_agg(md5(g::text || i), '') FROM generate_series(1, 300) i) END,
       CASE WHEN g % 7 <> 0 THEN g END, '2026-01-01', 'infinity'
  FROM generate_series(1, 3000) g;
VACUUM vf;
CREATE TABLE vf_ch (id int, name text, big text, amount numeric, change_time timestamptz);
INSERT INTO vf_ch SELECT g, 'm' || g, NULL, g + 1, '2026-01-02' FROM generate_series(1, 3000, 3) g;
SELECT changes FROM zipper_lake.apply_changes('vf', 'vf_ch');
INSERT INTO vf SELECT g, 'late' || g, repeat(md5(g::text), 100), 0, '2026-01-03', 'infinity'
  FROM generate_series(5001, 5010) g;
SELECT format, partition_end = 'infinity' AS open, count(*) AS subgroups, sum(row_count) AS rows,
       sum(masked_rows) AS masked
  FROM zipper_lake.inspect('vf') GROUP BY 1, 2 ORDER BY 1, 2;
CREATE TABLE vf_ref AS SELECT * FROM vf;
CREATE TABLE vf_record AS SELECT * FROM zipper_lake._record_instants('vf');
SELECT zipper_lake._storage_id('vf') AS storage_before \gset

VACUUM FULL vf;
SELECT format, partition_end = 'infinity' AS open, count(*) AS subgroups, sum(row_count) AS rows,
       sum(masked_rows) AS masked
  FROM zipper_lake.inspect('vf') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS differences FROM (
  (SELECT * FROM vf EXCEPT ALL SELECT * FROM vf_ref) UNION ALL (SELECT * FROM vf_ref EXCEPT ALL SELECT * FROM vf)) d;
SELECT count(*) AS as_of_differences FROM (
  (SELECT * FROM zipper_lake.as_of(NULL::vf, '2026-01-01 12:00')
   EXCEPT ALL SELECT * FROM vf_ref WHERE valid_from <= '2026-01-01 12:00' AND valid_to > '2026-01-01 12:00')
  UNION ALL (SELECT * FROM vf_ref WHERE valid_from <= '2026-01-01 12:00' AND valid_to > '2026-01-01 12:00'
   EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::vf, '2026-01-01 12:00'))) d;
SELECT * FROM zipper_lake.verify('vf');
SELECT id, length(big) AS big, valid_to FROM vf WHERE id IN (1000, 5003) ORDER BY id, valid_from;
-- a new storage; the old one's metadata is gone, the registration and the record stay
SELECT zipper_lake._storage_id('vf') <> :storage_before AS new_storage,
       (SELECT count(*) FROM zipper_lake.storage WHERE relid = 'vf'::regclass) AS storages,
       (SELECT count(*) FROM zipper_lake.subgroup WHERE storage_id = :storage_before) AS old_subgroups,
       (SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'vf'::regclass) AS registrations;
SELECT count(*) AS record_differences FROM (
  (SELECT * FROM zipper_lake._record_instants('vf') EXCEPT ALL SELECT * FROM vf_record)
  UNION ALL (SELECT * FROM vf_record EXCEPT ALL SELECT * FROM zipper_lake._record_instants('vf'))) d;
-- changes go on: a late one folds into the history VACUUM FULL wrote
TRUNCATE vf_ch;
INSERT INTO vf_ch VALUES (4, 'late', NULL, 9, '2026-01-01 12:00'), (5, 'x', NULL, 5, '2026-01-04');
SELECT changes, closed, inserted, late FROM zipper_lake.apply_changes('vf', 'vf_ch');
SELECT id, name, valid_from, valid_to FROM vf WHERE id IN (4, 5) ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('vf');

-- ALTER TABLE forms that rewrite write the table again the same way: a
-- type change (columnar rows read by the columns they were written with),
-- a volatile default; a rolled-back one changes nothing
CREATE TABLE vf_ref2 AS SELECT * FROM vf;
SELECT zipper_lake._storage_id('vf') AS storage_before \gset
BEGIN;
ALTER TABLE vf ALTER COLUMN amount TYPE text;
ROLLBACK;
SELECT zipper_lake._storage_id('vf') = :storage_before AS same_storage,
       pg_typeof(amount) AS amount_type FROM vf LIMIT 1;
ALTER TABLE vf ALTER COLUMN amount TYPE float8;
ALTER TABLE vf ADD COLUMN stamp timestamptz DEFAULT clock_timestamp();
ALTER TABLE vf ADD COLUMN note text DEFAULT 'none';
SELECT count(*) AS differences FROM (
  (SELECT id, name, big, amount, valid_from, valid_to FROM vf
   EXCEPT ALL SELECT id, name, big, amount::float8, valid_from, valid_to FROM vf_ref2)
  UNION ALL (SELECT id, name, big, amount::float8, valid_from, valid_to FROM vf_ref2
   EXCEPT ALL SELECT id, name, big, amount, valid_from, valid_to FROM vf)) d;
SELECT count(*), count(stamp) AS stamped, count(*) FILTER (WHERE note = 'none') AS noted,
       (SELECT count(*) FROM zipper_lake.storage WHERE relid = 'vf'::regclass) AS storages,
       (SELECT count(*) FROM zipper_lake.subgroup WHERE storage_id = :storage_before) AS old_subgroups
  FROM vf;
SELECT format, partition_end = 'infinity' AS open, sum(row_count) AS rows, sum(masked_rows) AS masked
  FROM zipper_lake.inspect('vf') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT * FROM zipper_lake.verify('vf');
SELECT count(*) AS as_of_rows FROM zipper_lake.as_of(NULL::vf, '2026-01-02 12:00');
TRUNCATE vf_ch;
ALTER TABLE vf_ch ALTER COLUMN amount TYPE float8;
INSERT INTO vf_ch VALUES (6, 'after', NULL, 6.5, '2026-01-05');
SELECT changes, closed, inserted FROM zipper_lake.apply_changes('vf', 'vf_ch', missing_columns => 'keep');
SELECT id, name, amount, valid_from, valid_to FROM vf WHERE id = 6 ORDER BY valid_from;
-- CLUSTER rewrites as VACUUM FULL does (rows keep their order by time,
-- not the index's); indexes are rebuilt; as_of, changes, key look-ups and
-- index scans answer as before, also after VACUUM FULL with indexes
CREATE INDEX vf_name ON vf (name);
CREATE UNIQUE INDEX vf_key ON vf (id, valid_from);
CREATE TABLE vf_ref3 AS SELECT * FROM vf;
CREATE FUNCTION vf_differences() RETURNS TABLE (what text, differences bigint) LANGUAGE sql AS $$
  SELECT 'rows', count(*) FROM ((SELECT * FROM vf EXCEPT ALL SELECT * FROM vf_ref3)
                                UNION ALL (SELECT * FROM vf_ref3 EXCEPT ALL SELECT * FROM vf)) d
  UNION ALL SELECT 'as_of', count(*) FROM (
    (SELECT * FROM zipper_lake.as_of(NULL::vf, '2026-01-02 12:00')
     EXCEPT ALL SELECT * FROM vf_ref3 WHERE valid_from <= '2026-01-02 12:00' AND valid_to > '2026-01-02 12:00')
    UNION ALL (SELECT * FROM vf_ref3 WHERE valid_from <= '2026-01-02 12:00' AND valid_to > '2026-01-02 12:00'
     EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::vf, '2026-01-02 12:00'))) d
  UNION ALL SELECT 'changes', count(*) FROM (
    (SELECT * FROM zipper_lake.changes(NULL::vf, '2026-01-01 06:00', '2026-01-02 06:00')
     EXCEPT ALL SELECT * FROM vf_ref3 WHERE (valid_from >= '2026-01-01 06:00' AND valid_from < '2026-01-02 06:00')
                                         OR (valid_to >= '2026-01-01 06:00' AND valid_to < '2026-01-02 06:00'))
    UNION ALL (SELECT * FROM vf_ref3 WHERE (valid_from >= '2026-01-01 06:00' AND valid_from < '2026-01-02 06:00')
                                        OR (valid_to >= '2026-01-01 06:00' AND valid_to < '2026-01-02 06:00')
     EXCEPT ALL SELECT * FROM zipper_lake.changes(NULL::vf, '2026-01-01 06:00', '2026-01-02 06:00'))) d
  UNION ALL SELECT 'key look-up', count(*) FROM ((SELECT * FROM vf WHERE id IN (4, 6, 2999) EXCEPT ALL
                                                  SELECT * FROM vf_ref3 WHERE id IN (4, 6, 2999))
    UNION ALL (SELECT * FROM vf_ref3 WHERE id IN (4, 6, 2999) EXCEPT ALL
               SELECT * FROM vf WHERE id IN (4, 6, 2999))) d
$$;
CLUSTER vf USING vf_name;
SELECT * FROM vf_differences();
SELECT * FROM zipper_lake.verify('vf');
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SELECT bt_index_check('vf_name', true), bt_index_check('vf_key', true);
SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
SELECT count(*), sum(id) FROM vf WHERE name = 'm1000';
RESET enable_seqscan; RESET zipper_lake.enable_pruning;
SELECT count(*), sum(id) FROM vf_ref3 WHERE name = 'm1000';
VACUUM FULL vf;
SELECT * FROM vf_differences();
SELECT bt_index_check('vf_name', true), bt_index_check('vf_key', true);
-- history written in rows (the 0.1 format) is not rewritten
CREATE TABLE vf_rows (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('vf_rows', ARRAY['id'], history_format => 'rows');
INSERT INTO vf_rows VALUES (1, '2026-01-01', 'infinity');
VACUUM FULL vf_rows;
SELECT count(*) FROM vf_rows;
DROP TABLE vf, vf_ch, vf_ref, vf_ref2, vf_ref3, vf_record, vf_rows;
DROP FUNCTION vf_differences();
SELECT count(*) AS orphan_storages FROM zipper_lake.storage s
 WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.relid);
