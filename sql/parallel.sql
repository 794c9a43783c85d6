-- Parallel ZipperScans (src/planner/README.md "ZipperScan", src/access/README.md
-- "The scan"): the leader prunes once and hands the sub-groups it keeps, with
-- their masks and the table's options, to the workers in shared memory;
-- workers claim them from a shared counter and read no catalog.  Parallel
-- and serial plans return the same rows — as of a time, a window's changes,
-- current rows, aggregates, key lookups — with masked rows, with the leader
-- taking part or not, inside a transaction that applied a batch and after it
-- rolled back.  A parallel plan costs each worker's start-up and gets workers
-- only for the pages pruning keeps.
SET timezone = 'UTC';
\set VERBOSITY terse

CREATE TABLE par_zl (id int, v int, note text, valid_from timestamptz NOT NULL,
                     valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('par_zl', ARRAY['id'], max_subgroups => 4);
CREATE TABLE par_rows (LIKE par_zl) USING zipper_lake;
SELECT zipper_lake.register('par_rows', ARRAY['id'], history_format => 'rows', max_subgroups => 4);
CREATE TABLE par_ch (id int, v int, note text, change_time timestamptz, op text);

-- 14 days of changes for 400 keys: updates, deletes, resurrections, and a
-- late change every few days (it masks rows written before)
CREATE FUNCTION par_apply(first_day int, last_day int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR d IN first_day .. last_day LOOP
    TRUNCATE par_ch;
    INSERT INTO par_ch
      SELECT k, (k * 7 + d * 3) % 50, repeat(chr(65 + (k + d) % 26), 1 + k % 20),
             '2026-03-01'::timestamptz + d * interval '1 day' + (k % 24) * interval '1 hour',
             CASE WHEN (k + d) % 11 = 0 THEN 'D' ELSE 'U' END
        FROM generate_series(1, 400) k WHERE (k + d) % 3 <> 0;
    IF d % 3 = 2 THEN
      INSERT INTO par_ch
        SELECT k, 999, 'late', '2026-03-01'::timestamptz + (d - 2) * interval '1 day' + interval '30 minutes', 'U'
          FROM generate_series(d, 400, 37) k;
    END IF;
    PERFORM zipper_lake.apply_changes('par_zl', 'par_ch');
    PERFORM zipper_lake.apply_changes('par_rows', 'par_ch');
  END LOOP;
END $$;
SELECT par_apply(0, 13);
ANALYZE par_zl, par_rows;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM par_zl;
SELECT count(*) AS sub_groups, sum(masked_rows) > 0 AS has_masks FROM zipper_lake.inspect('par_zl');
SELECT count(*) AS sub_groups, sum(masked_rows) > 0 AS has_masks FROM zipper_lake.inspect('par_rows');

-- The plan's shape (Parallel ZipperScan or not), the rows of a query in a
-- parallel and a serial plan (EXCEPT ALL both ways), and their number.
CREATE FUNCTION par_same(query text, OUT parallel_plan boolean, OUT n bigint,
                         OUT differences bigint) LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  parallel_plan := false;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    parallel_plan := parallel_plan OR line LIKE '%Parallel Custom Scan (ZipperScan)%';
  END LOOP;
  EXECUTE 'CREATE TEMP TABLE par_parallel AS ' || query;
  PERFORM set_config('max_parallel_workers_per_gather', '0', true);
  EXECUTE 'CREATE TEMP TABLE par_serial AS ' || query;
  PERFORM set_config('max_parallel_workers_per_gather', '2', true);
  SELECT count(*) INTO n FROM par_parallel;
  SELECT count(*) INTO differences
    FROM ((TABLE par_parallel EXCEPT ALL TABLE par_serial)
          UNION ALL (TABLE par_serial EXCEPT ALL TABLE par_parallel)) d;
  DROP TABLE par_parallel, par_serial;
END $$;

-- What EXPLAIN ANALYZE says of the sharing (where the leader's list came
-- from depends on the backend's cache: not shown), and the masked rows the
-- participants stepped over.
CREATE FUNCTION par_explain(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line ~ 'Metadata|Sub-groups|Rows Masked|ZipperScan' THEN
      RETURN NEXT regexp_replace(regexp_replace(line, '\(actual.*\)', ''),
                                 '(cache|catalog) \(leader\)', 'cache or catalog (leader)');
    END IF;
  END LOOP;
END $$;

-- parallel plans forced
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;

EXPLAIN (COSTS OFF) SELECT * FROM par_zl WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00';
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00'$$);
SELECT * FROM par_same($$SELECT * FROM par_rows WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00'$$);
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_from <= '2026-03-13 12:00' AND valid_to > '2026-03-13 12:00'$$);
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE (valid_from >= '2026-03-05' AND valid_from < '2026-03-06')
                                                   OR (valid_to >= '2026-03-05' AND valid_to < '2026-03-06')$$);
SELECT * FROM par_same($$SELECT * FROM par_rows WHERE valid_from >= '2026-03-05' AND valid_from < '2026-03-06'$$);
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_to = 'infinity'$$);
SELECT * FROM par_same($$SELECT id, v FROM par_zl WHERE valid_to > '2026-03-03' AND v = 999$$);
SELECT * FROM par_same($$SELECT count(*), sum(v), min(note), max(valid_from) FROM par_zl WHERE valid_from <= '2026-03-10' AND valid_to > '2026-03-10'$$);
SELECT * FROM par_same($$SELECT v, count(*), sum(id) FROM par_rows WHERE valid_to > '2026-03-08' GROUP BY v$$);
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE id IN (5, 77, 333) AND valid_to > '2026-03-02'$$);
SELECT * FROM par_same($$SELECT * FROM zipper_lake.as_of(NULL::par_zl, '2026-03-09 06:00')$$);
SELECT * FROM par_same($$SELECT * FROM zipper_lake.changes(NULL::par_rows, '2026-03-04', '2026-03-08')$$);

-- what the participants read: the sub-groups kept, every one once, and the
-- masked rows of the serial plan
SELECT * FROM par_explain($$SELECT * FROM par_rows WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00'$$);
SET max_parallel_workers_per_gather = 0;
SELECT * FROM par_explain($$SELECT * FROM par_rows WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00'$$);
SET max_parallel_workers_per_gather = 2;

-- the leader not taking part: workers return every row
SET parallel_leader_participation = off;
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_from <= '2026-03-06 12:00' AND valid_to > '2026-03-06 12:00'$$);
SELECT * FROM par_same($$SELECT * FROM par_rows WHERE valid_to > '2026-03-04'$$);
SELECT * FROM par_same($$SELECT count(*), sum(v) FROM par_zl WHERE valid_to = 'infinity'$$);
SELECT * FROM par_explain($$SELECT * FROM par_zl WHERE valid_to > '2026-03-04'$$);
RESET parallel_leader_participation;

-- a batch applied in the transaction (late changes mask more rows), and
-- rolled back: the same rows again
BEGIN;
SELECT par_apply(14, 15);
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_to > '2026-03-10'$$);
SELECT * FROM par_same($$SELECT * FROM par_rows WHERE valid_from <= '2026-03-14 12:00' AND valid_to > '2026-03-14 12:00'$$);
ROLLBACK;
SELECT * FROM par_same($$SELECT * FROM par_zl WHERE valid_to > '2026-03-10'$$);
SELECT * FROM par_same($$SELECT * FROM par_rows WHERE valid_from <= '2026-03-14 12:00' AND valid_to > '2026-03-14 12:00'$$);

-- a parallel ZipperScan on the outer side of a nested loop under the Gather
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT d, count(z.id) FROM generate_series(40, 42) d
  JOIN par_zl z ON z.v > d WHERE z.valid_to = 'infinity' GROUP BY d;
SELECT * FROM par_same($$SELECT d, count(z.id) FROM generate_series(40, 42) d
                         JOIN par_zl z ON z.v > d WHERE z.valid_to = 'infinity' GROUP BY d$$);
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;

-- Costs: a parallel ZipperScan starts at what its workers' start-up costs
-- (parallel_setup_cost per worker), and gets workers only for the pages
-- pruning keeps: none (a serial plan) when they are below
-- min_parallel_table_scan_size, though the table is above it.
CREATE FUNCTION par_startup(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN ' || query LOOP
    IF line LIKE '%Parallel Custom Scan (ZipperScan)%' THEN
      RETURN substring(line from 'cost=([0-9.]+)\.\.');
    END IF;
  END LOOP;
  RETURN 'serial';
END $$;
SET parallel_setup_cost = 100;
SET cpu_tuple_cost = 1;
SELECT par_startup($$SELECT * FROM par_rows WHERE valid_to > '2026-03-02'$$);
RESET cpu_tuple_cost;
SET parallel_setup_cost = 0;
SELECT relpages >= 16 AS table_above FROM pg_class WHERE relname = 'par_rows';
SET min_parallel_table_scan_size = '128kB';
SELECT par_startup($$SELECT * FROM par_rows WHERE valid_to > '2026-03-02'$$);
SELECT par_startup($$SELECT * FROM par_rows WHERE valid_from >= '2026-03-12 10:00' AND valid_from < '2026-03-12 11:00'$$);
RESET ALL;
