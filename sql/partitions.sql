-- Zipper tables as partitions and inheritance children are pruned like
-- tables queried directly: a ZipperScan per zipper member, with the same
-- rows as with pruning off.
SET timezone = 'UTC';

-- partitioned by a non-period column: two zipper partitions (one with its
-- columns in another order and a dropped column) and a heap partition
CREATE TABLE pt (id int, region text, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  PARTITION BY LIST (region);
CREATE TABLE pt_eu PARTITION OF pt FOR VALUES IN ('eu') USING zipper_lake;
CREATE TABLE pt_us (valid_to timestamptz NOT NULL, region text, dropped int, id int, v int,
                    valid_from timestamptz NOT NULL) USING zipper_lake;
ALTER TABLE pt_us DROP COLUMN dropped;
ALTER TABLE pt ATTACH PARTITION pt_us FOR VALUES IN ('us');
CREATE TABLE pt_ap PARTITION OF pt FOR VALUES IN ('ap');
SELECT zipper_lake.register('pt_eu', ARRAY['id'], max_subgroups => 4);
SELECT zipper_lake.register('pt_us', ARRAY['id'], max_subgroups => 4);

-- ten days of changes for 30 keys in each zipper partition
CREATE TABLE pt_ch (id int, region text, v int, change_time timestamptz, op text);
DO $$
BEGIN
  FOR d IN 0..9 LOOP
    TRUNCATE pt_ch;
    INSERT INTO pt_ch
      SELECT k, 'eu', (k * 7 + d * 3) % 5,
             '2026-03-01'::timestamptz + d * interval '1 day' + (k % 24) * interval '1 hour',
             CASE WHEN (k + d) % 11 = 0 THEN 'D' ELSE 'U' END
        FROM generate_series(1, 30) k WHERE (k + d) % 3 <> 0;
    PERFORM zipper_lake.apply_changes('pt_eu', 'pt_ch');
    UPDATE pt_ch SET region = 'us', v = v + 10;
    PERFORM zipper_lake.apply_changes('pt_us', 'pt_ch');
  END LOOP;
END $$;
INSERT INTO pt SELECT id, 'ap', v + 20, valid_from, valid_to FROM pt_eu;
SELECT region, count(*) AS versions, count(DISTINCT id) AS keys FROM pt GROUP BY region ORDER BY region;

-- run a query with pruning on and off: same rows, every time
CREATE FUNCTION pt_same_rows(query text, OUT same boolean, OUT n bigint) LANGUAGE plpgsql AS $$
DECLARE
  pruned text;
  unpruned text;
BEGIN
  EXECUTE format('SELECT count(*), coalesce(md5(string_agg(r::text, '','' ORDER BY r::text)), '''') FROM (%s) r', query)
    INTO n, pruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
  EXECUTE format('SELECT coalesce(md5(string_agg(r::text, '','' ORDER BY r::text)), '''') FROM (%s) r', query)
    INTO unpruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
  same := pruned = unpruned;
END $$;

-- each zipper partition gets its ZipperScan (bounds translated to its own
-- column numbers), the heap partition its sequential scan
EXPLAIN (COSTS OFF) SELECT * FROM pt WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05'$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_to = 'infinity'$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_from BETWEEN '2026-03-03' AND '2026-03-04 12:00' AND v > 1$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE (valid_from >= '2026-03-05' AND valid_from < '2026-03-06')
                                                OR (valid_to >= '2026-03-05' AND valid_to < '2026-03-06')$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_from <= now() AND valid_to > now()$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_to < '2026-03-01'$$);
-- the planner's partition pruning first, then the zipper table's own
EXPLAIN (COSTS OFF) SELECT * FROM pt WHERE region = 'us' AND valid_to = 'infinity';
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE region = 'us' AND valid_to = 'infinity'$$);
SELECT count(*), sum(v) FROM pt WHERE region = 'eu' AND valid_from <= '2026-03-07' AND valid_to > '2026-03-07';
SELECT count(*), sum(v) FROM pt_eu WHERE valid_from <= '2026-03-07' AND valid_to > '2026-03-07';

-- prepared statements: generic plans evaluate the bounds of every
-- partition's scan at run time, next to run-time partition pruning
SET plan_cache_mode = force_generic_plan;
PREPARE pt_at(timestamptz) AS SELECT count(*), sum(v) FROM pt WHERE valid_from <= $1 AND valid_to > $1;
EXPLAIN (COSTS OFF) EXECUTE pt_at('2026-03-05');
EXECUTE pt_at('2026-03-05');
EXECUTE pt_at('2026-03-09 12:00');
PREPARE pt_region_at(text, timestamptz) AS
  SELECT count(*), sum(v) FROM pt WHERE region = $1 AND valid_from <= $2 AND valid_to > $2;
EXPLAIN (COSTS OFF) EXECUTE pt_region_at('us', '2026-03-05');
EXECUTE pt_region_at('us', '2026-03-05');
SET zipper_lake.enable_pruning = off;
EXECUTE pt_at('2026-03-05');
EXECUTE pt_at('2026-03-09 12:00');
EXECUTE pt_region_at('us', '2026-03-05');
RESET zipper_lake.enable_pruning;
RESET plan_cache_mode;

-- a parameter of a correlated subquery changes every partition's bounds on
-- each rescan
SELECT t::date,
       (SELECT count(*) FROM pt WHERE valid_from <= t AND valid_to > t) AS pruned,
       (SELECT count(*) FROM pt_eu WHERE valid_from <= t AND valid_to > t) +
       (SELECT count(*) FROM pt_us WHERE valid_from <= t AND valid_to > t) +
       (SELECT count(*) FROM pt_ap WHERE valid_from <= t AND valid_to > t) AS sum_of_partitions
  FROM generate_series('2026-03-01 12:00'::timestamptz, '2026-03-11 12:00', '2 days') t;
SELECT * FROM pt_same_rows($$SELECT t, (SELECT count(*) FROM pt WHERE valid_from <= t AND valid_to > t)
                              FROM generate_series('2026-03-01 12:00'::timestamptz, '2026-03-11 12:00', '1 day') t$$);

-- Parallel Append: the zipper partitions' parallel ZipperScans share out
-- their kept sub-groups
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM pt WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
SELECT count(*), sum(v) FROM pt WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05'$$);
SELECT * FROM pt_same_rows($$SELECT * FROM pt WHERE valid_to >= '2026-03-08'$$);
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- a SCROLL cursor over the partitions: the Append and each ZipperScan go
-- backward (rows in partition order, each partition in its scan order)
BEGIN;
DECLARE pc SCROLL CURSOR FOR
  SELECT region, id, v FROM pt WHERE id <= 2 AND valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
FETCH ALL FROM pc;
FETCH BACKWARD ALL FROM pc;
FETCH ABSOLUTE 3 FROM pc;
FETCH BACKWARD 2 FROM pc;
FETCH LAST FROM pc;
FETCH PRIOR FROM pc;
COMMIT;

-- with pruning off, no ZipperScan is planned
SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF) SELECT * FROM pt WHERE valid_to = 'infinity';
RESET zipper_lake.enable_pruning;

-- inheritance: a heap parent with a zipper child (an extra column of its
-- own), and a zipper parent with a zipper child, whose own rows are a
-- member of the inheritance tree too
CREATE TABLE inh_parent (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);
CREATE TABLE inh_child (extra int) INHERITS (inh_parent) USING zipper_lake;
SELECT zipper_lake.register('inh_child', ARRAY['id']);
INSERT INTO inh_parent SELECT id, v, valid_from, valid_to FROM pt_eu;
INSERT INTO inh_child SELECT id, v + 10, valid_from, valid_to, 0 FROM pt_us;
EXPLAIN (COSTS OFF) SELECT * FROM inh_parent WHERE valid_to = 'infinity';
SELECT * FROM pt_same_rows($$SELECT * FROM inh_parent WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05'$$);
SELECT * FROM pt_same_rows($$SELECT * FROM inh_parent WHERE valid_to = 'infinity'$$);

CREATE TABLE zparent (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE zchild () INHERITS (zparent) USING zipper_lake;
SELECT zipper_lake.register('zparent', ARRAY['id']);
SELECT zipper_lake.register('zchild', ARRAY['id']);
INSERT INTO zparent SELECT id, v, valid_from, valid_to FROM pt_eu;
INSERT INTO zchild SELECT id, v, valid_from, valid_to FROM pt_us;
EXPLAIN (COSTS OFF) SELECT * FROM zparent WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
EXPLAIN (COSTS OFF) SELECT * FROM ONLY zparent WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05';
SELECT * FROM pt_same_rows($$SELECT * FROM zparent WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05'$$);
SELECT * FROM pt_same_rows($$SELECT * FROM ONLY zparent WHERE valid_from <= '2026-03-05' AND valid_to > '2026-03-05'$$);

-- the arms of a UNION ALL are members of an append relation too
EXPLAIN (COSTS OFF) SELECT id FROM pt_eu WHERE valid_to = 'infinity' UNION ALL SELECT id FROM zchild WHERE valid_to = 'infinity';
SELECT * FROM pt_same_rows($$SELECT id FROM pt_eu WHERE valid_to = 'infinity' UNION ALL SELECT id FROM zchild WHERE valid_to = 'infinity'$$);
