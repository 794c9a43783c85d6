-- Zipper parents (README "Scaling out"): a table partitioned BY HASH of its
-- key whose partitions are zipper tables, registered as a whole.  Every
-- call on the parent gives what one zipper table with the same data gives.
SET timezone = 'UTC';

CREATE TABLE zp_src (id int PRIMARY KEY, owner text, bal numeric);
SELECT zipper_lake.create_table('zp', 'zp_src', partitions => 3, max_subgroups => 4);
SELECT zipper_lake.create_table('zp_one', 'zp_src', max_subgroups => 4);
SELECT c.relname, c.relkind, a.amname, pg_get_expr(c.relpartbound, c.oid) AS bound
  FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam
 WHERE c.relname LIKE 'zp\_%' AND c.relname <> 'zp_src' AND c.relname NOT LIKE '%pkey'
 ORDER BY 1;
SELECT tbl, key, max_subgroups FROM zipper_lake.registration WHERE tbl::text ~ '^zp(_[0-9]|_one)?$' ORDER BY tbl::text;

-- the same calls on the parent and on one table: equal counts, equal rows
CREATE FUNCTION zp_same(OUT same boolean, OUT versions bigint) LANGUAGE sql AS $$
  SELECT NOT EXISTS ((SELECT * FROM zp EXCEPT ALL SELECT * FROM zp_one)
                     UNION ALL (SELECT * FROM zp_one EXCEPT ALL SELECT * FROM zp)),
         (SELECT count(*) FROM zp) $$;
CREATE FUNCTION zp_apply(call text, OUT same_counts boolean, OUT counts text) LANGUAGE plpgsql AS $$
DECLARE
  on_parent text;
  on_one text;
BEGIN
  EXECUTE format(call, '''zp''') INTO on_parent;
  EXECUTE format(call, '''zp_one''') INTO on_one;
  same_counts := on_parent = on_one;
  counts := on_parent;
END $$;

CREATE TABLE zp_ch (id int, owner text, bal numeric, change_time timestamptz, op text);
INSERT INTO zp_ch
  SELECT k % 40, 'o' || k, k, '2026-03-01'::timestamptz + k * interval '37 minutes',
         CASE WHEN k % 9 = 0 THEN 'D' ELSE 'U' END
    FROM generate_series(1, 300) k;
INSERT INTO zp_ch VALUES (NULL, NULL, NULL, '2026-03-03 00:00', 'T');   -- a truncate: every leaf
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zp_ch') r$$);
SELECT * FROM zp_same();
SELECT tableoid::regclass AS leaf, count(*) FROM zp GROUP BY 1 ORDER BY 1;

-- late changes, applied again (all unchanged), and partial ones
TRUNCATE zp_ch;
INSERT INTO zp_ch
  SELECT k, 'late' || k, -k, '2026-03-02'::timestamptz + k * interval '1 hour', 'U'
    FROM generate_series(1, 40, 3) k;
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zp_ch') r$$);
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zp_ch') r$$);
UPDATE zp_ch SET owner = NULL, change_time = change_time + interval '5 days';
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zp_ch', ignore_nulls => true) r$$);
SELECT * FROM zp_same();

-- a snapshot with deletes: keys missing from it end in every leaf, also in
-- a leaf the image has no row for
CREATE TABLE zp_img (id int, owner text, bal numeric);
INSERT INTO zp_img VALUES (1, 'img', 1), (4, 'img', 4);
SELECT (SELECT count(DISTINCT tableoid) FROM zp WHERE id IN (1, 4)) AS leaves_with_image_rows;
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_snapshot(%s, 'zp_img', '2026-03-10') r$$);
SELECT * FROM zp_same();
SELECT count(*) AS open_versions FROM zipper_lake.current(NULL::zp);
-- an empty image is refused as for one table, whole
TRUNCATE zp_img;
SELECT * FROM zipper_lake.apply_snapshot('zp', 'zp_img', '2026-03-11');
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_snapshot(%s, 'zp_img', '2026-03-11', allow_empty => true) r$$);

-- CDC events
CREATE TABLE zp_ev (event jsonb, pos bigint);
INSERT INTO zp_ev VALUES
  ('{"op": "c", "ts_ms": 1773400000000, "after": {"id": 1, "owner": "ev", "bal": 10}}', 1),
  ('{"op": "c", "ts_ms": 1773400000000, "after": {"id": 2, "owner": "ev", "bal": 20}}', 2),
  ('{"op": "u", "ts_ms": 1773400060000, "after": {"id": 1, "owner": "ev2", "bal": 11}}', 3),
  ('{"op": "d", "ts_ms": 1773400120000, "before": {"id": 2}}', 4),
  ('{"op": "t", "ts_ms": 1773400180000}', 5),
  ('{"op": "c", "ts_ms": 1773400240000, "after": {"id": 3, "owner": "ev", "bal": 30}}', 6);
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_events(%s, 'zp_ev', 'debezium', seq => 'pos') r$$);
SELECT * FROM zp_same();

-- reads: the helpers inline into a scan of the parent, one ZipperScan per
-- leaf; the function form (pruning off) reads each leaf
EXPLAIN (COSTS OFF) SELECT * FROM zipper_lake.as_of(NULL::zp, '2026-03-04');
CREATE FUNCTION zp_reads(OUT same boolean) LANGUAGE sql AS $$
  SELECT (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.as_of(NULL::zp, '2026-03-04') r)::text[]
           = (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.as_of(NULL::zp_one, '2026-03-04') r)::text[]
     AND (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.current(NULL::zp) r)::text[]
           = (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.current(NULL::zp_one) r)::text[]
     AND (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.changes(NULL::zp, '2026-03-02', '2026-03-05') r)::text[]
           = (SELECT array_agg(r ORDER BY r::text) FROM zipper_lake.changes(NULL::zp_one, '2026-03-02', '2026-03-05') r)::text[] $$;
SELECT * FROM zp_reads();
SET zipper_lake.enable_pruning = off;
SELECT * FROM zp_reads();
RESET zipper_lake.enable_pruning;
SELECT count(*) FROM zipper_lake.as_of(NULL::zp, '2026-03-04');
-- a Parallel Append of whole leaf scans: each runs in a parallel worker,
-- which reads the leaf's registration itself
BEGIN;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = '1GB';
SET LOCAL parallel_leader_participation = off;
SET LOCAL max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(bal) FROM zp WHERE valid_to = 'infinity';
SELECT count(*), sum(bal) FROM zp WHERE valid_to = 'infinity';
COMMIT;
SELECT count(*), sum(bal) FROM zp_one WHERE valid_to = 'infinity';
SELECT * FROM zipper_lake.verify('zp');
-- inspect() lists each leaf's sub-groups, inspect_bytes() adds the leaves up
SELECT leaf, count(*) > 0 AS has_sub_groups, sum(row_count - masked_rows) AS rows
  FROM zipper_lake.inspect('zp') GROUP BY leaf ORDER BY leaf::text;
SELECT (SELECT sum(bytes) FROM zipper_lake.inspect_bytes('zp') WHERE kind = 'table file')
       = (SELECT sum(pg_relation_size(l)) FROM unnest('{zp_0,zp_1,zp_2}'::regclass[]) l)
       AS file_bytes_add_up;
SELECT * FROM zipper_lake.inspect_record('zp');

-- the late horizon counts from the newest change of any leaf: key 1 moves
-- its leaf's newest on, a change of another leaf's key is then refused
-- because of it, on the parent as on one table
SELECT zipper_lake.set_late_horizon('zp', '1 day'), zipper_lake.set_late_horizon('zp_one', '1 day');
SELECT tbl, late_horizon FROM zipper_lake.registration WHERE tbl::text ~ '^zp(_[0-9]|_one)?$' ORDER BY tbl::text;
TRUNCATE zp_ch;
INSERT INTO zp_ch VALUES (1, 'far', 0, '2026-04-01', 'U');
SELECT * FROM zp_apply($$SELECT r::text FROM zipper_lake.apply_changes(%s, 'zp_ch') r$$);
UPDATE zp_ch SET id = (SELECT id FROM zp WHERE tableoid <> (SELECT tableoid FROM zp WHERE id = 1 LIMIT 1) LIMIT 1),
                 change_time = '2026-03-20';
SELECT * FROM zipper_lake.apply_changes('zp', 'zp_ch');
SELECT * FROM zipper_lake.apply_changes('zp_one', 'zp_ch');
SELECT zipper_lake.set_late_horizon('zp', NULL), zipper_lake.set_late_horizon('zp_one', NULL);

-- lifecycle: every leaf, and the parent keeps the cut for leaves to come
SELECT zipper_lake.drop_history('zp', '2026-03-02 12:00') AS parent,
       zipper_lake.drop_history('zp_one', '2026-03-02 12:00') AS one;
SELECT tbl, history_cut FROM zipper_lake.registration WHERE tbl::text ~ '^zp(_[0-9]|_one)?$' ORDER BY tbl::text;
-- ... so a leaf alone takes none
SELECT zipper_lake.set_late_horizon('zp_0', '1 day');
SELECT zipper_lake.drop_history('zp_1', '2026-03-03');
CREATE TABLE zp_erase (id int);
INSERT INTO zp_erase VALUES (1), (2), (5);
SELECT zipper_lake.erase('zp', 'zp_erase') AS parent, zipper_lake.erase('zp_one', 'zp_erase') AS one;
SELECT * FROM zp_same();
SELECT zipper_lake.reclaim('zp');

-- privileges are the parent's, as for INSERT into a partitioned table
CREATE ROLE zp_writer;
GRANT SELECT, INSERT, UPDATE ON zp TO zp_writer;
GRANT SELECT ON zp_ch TO zp_writer;
CREATE ROLE zp_reader;
GRANT SELECT ON zp_ch TO zp_reader;
TRUNCATE zp_ch;
INSERT INTO zp_ch VALUES (7, 'writer', 7, '2026-04-02', 'U');
SET ROLE zp_writer;
SELECT * FROM zipper_lake.apply_changes('zp', 'zp_ch');
SELECT zipper_lake.set_retention('zp', '10 years');
SET ROLE zp_reader;
SELECT * FROM zipper_lake.apply_changes('zp', 'zp_ch');
SELECT count(*) FROM zipper_lake.current(NULL::zp);
RESET ROLE;

-- partitions created or attached later are registered as the parent is
-- (history cut included); a heap partition, or one registered otherwise, is
-- refused; on a parent with a gap a key no partition takes is an error
CREATE TABLE zq (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY HASH (id);
CREATE TABLE zq_0 PARTITION OF zq FOR VALUES WITH (MODULUS 4, REMAINDER 0) USING zipper_lake;
SELECT zipper_lake.register('zq', ARRAY['id'], late_horizon => '30 days');
SELECT zipper_lake.drop_history('zq', '2026-01-01');
CREATE TABLE zq_1 PARTITION OF zq FOR VALUES WITH (MODULUS 4, REMAINDER 1) USING zipper_lake;
CREATE TABLE zq_2 PARTITION OF zq FOR VALUES WITH (MODULUS 4, REMAINDER 2);
CREATE TABLE zq_other (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zq_other', ARRAY['id']);
ALTER TABLE zq ATTACH PARTITION zq_other FOR VALUES WITH (MODULUS 4, REMAINDER 2);
CREATE TABLE zq_2 (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
ALTER TABLE zq ATTACH PARTITION zq_2 FOR VALUES WITH (MODULUS 4, REMAINDER 2);
SELECT tbl, late_horizon, history_cut FROM zipper_lake.registration WHERE tbl::text ~ '^zq(_[0-9]|_other)?$' ORDER BY tbl::text;
CREATE TABLE zq_ch (id int, v text, change_time timestamptz);
INSERT INTO zq_ch SELECT k, 'v' || k, '2026-02-01' FROM generate_series(1, 20) k;
SELECT * FROM zipper_lake.apply_changes('zq', 'zq_ch');
SELECT count(*) FROM zq;
CREATE TABLE zq_3 PARTITION OF zq FOR VALUES WITH (MODULUS 4, REMAINDER 3) USING zipper_lake;
SELECT * FROM zipper_lake.apply_changes('zq', 'zq_ch');
SELECT tableoid::regclass AS leaf, count(*) FROM zq GROUP BY 1 ORDER BY 1;
-- the cut the parent kept holds in the new leaf too
UPDATE zq_ch SET change_time = '2025-12-31';
SELECT * FROM zipper_lake.apply_changes('zq', 'zq_ch');
-- a detached partition stays a zipper table of its own, its options its own
ALTER TABLE zq DETACH PARTITION zq_2;
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'zq_2'::regclass;
SELECT zipper_lake.set_late_horizon('zq_2', NULL);
-- nor may a foreign partition, or a leaf registered the same way but for
-- the history cut, take its place
CREATE FOREIGN DATA WRAPPER zq_other_fdw;   -- not postgres_fdw: no shard (sql/zipper_shards.sql)
CREATE SERVER zq_remote FOREIGN DATA WRAPPER zq_other_fdw;
CREATE FOREIGN TABLE zq_f PARTITION OF zq FOR VALUES WITH (MODULUS 4, REMAINDER 2) SERVER zq_remote;
CREATE TABLE zq_cut (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zq_cut', ARRAY['id'], late_horizon => '30 days');
ALTER TABLE zq ATTACH PARTITION zq_cut FOR VALUES WITH (MODULUS 4, REMAINDER 2);
DROP TABLE zq_cut;
DROP SERVER zq_remote;
DROP FOREIGN DATA WRAPPER zq_other_fdw;

-- what cannot be a zipper parent
CREATE TABLE zr (id int, region text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY LIST (region);
SELECT zipper_lake.register('zr', ARRAY['id']);
CREATE TABLE zs (id int, region text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY HASH (region);
SELECT zipper_lake.register('zs', ARRAY['id']);
CREATE TABLE zt (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY HASH (id);
CREATE TABLE zt_0 PARTITION OF zt FOR VALUES WITH (MODULUS 1, REMAINDER 0);
SELECT zipper_lake.register('zt', ARRAY['id']);
SELECT count(*) FROM zipper_lake.registration WHERE tbl::text IN ('zr', 'zs', 'zt', 'zt_0');
SELECT zipper_lake.create_table('zp_bad', 'zp_src', partitions => 0);

-- a leaf created later takes its siblings' table-wide instants: a
-- snapshot with deletes applied before it existed deletes its keys too
CREATE TABLE zu (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY HASH (id);
CREATE TABLE zu_0 PARTITION OF zu FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING zipper_lake;
SELECT zipper_lake.register('zu', ARRAY['id']);
CREATE TABLE zu_one (LIKE zu) USING zipper_lake;
SELECT zipper_lake.register('zu_one', ARRAY['id']);
CREATE TABLE zu_img AS
  SELECT k AS id, 'img' AS v FROM generate_series(1, 40) k WHERE satisfies_hash_partition('zu'::regclass, 2, 0, k);
SELECT (SELECT changes FROM zipper_lake.apply_snapshot('zu', 'zu_img', '2026-05-10'))
     = (SELECT changes FROM zipper_lake.apply_snapshot('zu_one', 'zu_img', '2026-05-10')) AS same_counts;
CREATE TABLE zu_1 PARTITION OF zu FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING zipper_lake;
CREATE TABLE zu_ch AS
  SELECT k AS id, 'late' AS v, '2026-05-01'::timestamptz AS change_time
    FROM generate_series(1, 40) k WHERE NOT satisfies_hash_partition('zu'::regclass, 2, 0, k);
SELECT (SELECT r::text FROM zipper_lake.apply_changes('zu', 'zu_ch') r)
     = (SELECT r::text FROM zipper_lake.apply_changes('zu_one', 'zu_ch') r) AS same_counts;
SELECT NOT EXISTS ((SELECT * FROM zu EXCEPT ALL SELECT * FROM zu_one)
                   UNION ALL (SELECT * FROM zu_one EXCEPT ALL SELECT * FROM zu)) AS same,
       (SELECT count(*) FROM zu_1 WHERE valid_to = '2026-05-10') AS ended_by_the_snapshot;
DROP TABLE zu, zu_one, zu_img, zu_ch;

-- dropping the parent forgets its registration and its leaves' (the
-- detached zq_2 keeps its own)
DROP TABLE zp, zq;
SELECT tbl FROM zipper_lake.registration WHERE tbl::text ~ '^z[pq]_?[0-9]?$';
DROP TABLE zp_one, zq_2, zr, zs, zt, zp_src, zp_ch, zp_img, zp_ev, zp_erase, zq_ch;
DROP FUNCTION zp_same, zp_apply, zp_reads;
REVOKE ALL ON SCHEMA public FROM zp_writer, zp_reader;
DROP ROLE zp_writer;
DROP ROLE zp_reader;
