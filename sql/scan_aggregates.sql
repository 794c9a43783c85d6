-- Aggregates in the scan (README "Aggregates in the scan"): count, sum,
-- min, max and avg of a zipper table's rows, computed by the
-- ZipperAggregate node from the rows its ZipperScan keeps, give exactly
-- what the executor's Agg node gives over the same scan: for columnar and
-- row history, NULLs, NaN, collations, empty answers, expressions over
-- aggregates, DISTINCT (in memory and spilled), parameters, rescans,
-- masks, rollbacks and parallel plans; grouped by columns of the table
-- (NULL keys, collations, HAVING, groups beyond work_mem), also through the
-- memo of bitwise keys in front of its hash tables. Queries it does
-- not take (grouping by expressions, DISTINCT with GROUP BY, FILTER, other
-- filters, other aggregates) keep the Agg node.
SET timezone = 'UTC';
\set VERBOSITY terse
-- chunks of 16 rows, so that bounds check some chunks row by row
SET zipper_lake.columnar_chunk_rows = 16;

CREATE TABLE agg_zl (id int, i int, n numeric, f float8, t text, tc text COLLATE "C", d date,
                     iv interval, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('agg_zl', ARRAY['id']);
CREATE TABLE agg_rows (LIKE agg_zl) USING zipper_lake;
SELECT zipper_lake.register('agg_rows', ARRAY['id'], history_format => 'rows');

-- 200 keys changed on six days, some deleted; NULLs, NaN and infinities
CREATE TABLE agg_ch AS
  SELECT k AS id,
         CASE WHEN (k + day) % 7 = 0 THEN NULL ELSE k * 10 + day END AS i,
         CASE WHEN (k + day) % 7 = 1 THEN NULL WHEN k = 18 AND day = 2 THEN 'NaN'::numeric
              ELSE (k * day) / 7.0 END AS n,
         CASE WHEN (k + day) % 7 = 2 THEN NULL WHEN k = 23 THEN '-Infinity'::float8 WHEN k = 29 AND day = 5 THEN 'NaN'::float8
              ELSE k * 1.5 - day END AS f,
         CASE WHEN (k + day) % 7 = 3 THEN NULL ELSE CASE WHEN k % 2 = 0 THEN 'b' ELSE 'B' END || k % 13 END AS t,
         CASE WHEN (k + day) % 7 = 4 THEN NULL ELSE CASE WHEN k % 2 = 0 THEN 'b' ELSE 'B' END || k % 13 END AS tc,
         CASE WHEN (k + day) % 7 = 5 THEN NULL ELSE date '2020-01-01' + k - day END AS d,
         make_interval(hours => k, mins => day) AS iv,
         timestamptz '2026-01-01' + day * interval '1 day' + k * interval '1 minute' AS change_time,
         CASE WHEN day > 0 AND (k + day) % 19 = 0 THEN 'D' ELSE 'U' END AS op,
         day
    FROM generate_series(1, 200) k, generate_series(0, 5) day
   WHERE day = 0 OR (k + day) % 3 <> 0;

CREATE FUNCTION agg_apply(first_day int, last_day int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR batch_day IN first_day .. last_day LOOP
    DROP TABLE IF EXISTS agg_batch;
    CREATE TEMP TABLE agg_batch AS SELECT * FROM agg_ch WHERE day = batch_day;
    ALTER TABLE agg_batch DROP COLUMN day;
    PERFORM zipper_lake.apply_changes('agg_zl', 'agg_batch');
    PERFORM zipper_lake.apply_changes('agg_rows', 'agg_batch');
  END LOOP;
END $$;
SELECT agg_apply(0, 5);
SELECT (SELECT count(*) FROM agg_zl) AS versions,
       (SELECT count(*) FROM ((TABLE agg_zl EXCEPT ALL TABLE agg_rows)
                              UNION ALL (TABLE agg_rows EXCEPT ALL TABLE agg_zl)) x) AS differences;

-- Which node aggregates a query (its plan), what it returns, and whether
-- the Agg node (zipper_lake.enable_scan_aggregates off) returns the same.
CREATE FUNCTION agg_check(query text, OUT node text, OUT result text, OUT same boolean)
LANGUAGE plpgsql AS $$
DECLARE
  line text;
  executor text;
BEGIN
  node := 'Agg';
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
    IF line LIKE '%ZipperAggregate%' THEN
      node := 'ZipperAggregate';
    END IF;
  END LOOP;
  EXECUTE format('SELECT string_agg(r::text, '' '') FROM (%s) r', query) INTO result;
  PERFORM set_config('zipper_lake.enable_scan_aggregates', 'off', true);
  EXECUTE format('SELECT string_agg(r::text, '' '') FROM (%s) r', query) INTO executor;
  PERFORM set_config('zipper_lake.enable_scan_aggregates', 'on', true);
  same := result IS NOT DISTINCT FROM executor;
END $$;

CREATE TABLE agg_queries (q int, query text);
INSERT INTO agg_queries VALUES
  -- as of a time: numbers
  (1, $q$SELECT count(*), count(n), sum(i), sum(n), avg(n), min(n), max(n), sum(f), min(f), max(f), avg(i), avg(f)
         FROM %1$s WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'$q$),
  -- text under two collations, dates, intervals
  (2, $q$SELECT min(t), max(t), min(tc), max(tc), count(t), min(d), max(d), sum(iv), avg(iv), max(valid_from)
         FROM %1$s WHERE valid_to > '2026-01-02 06:00' AND valid_from <= '2026-01-02 06:00'$q$),
  -- the changes of a day (ORed bounds), the current versions
  (3, $q$SELECT count(*), sum(n), min(valid_to), max(t)
         FROM %1$s WHERE (valid_from >= '2026-01-04' AND valid_from < '2026-01-05')
                      OR (valid_to >= '2026-01-04' AND valid_to < '2026-01-05')$q$),
  (4, $q$SELECT count(*), sum(i), max(tc) FROM %1$s WHERE valid_to = 'infinity'$q$),
  -- nothing kept: count 0, the others NULL
  (5, $q$SELECT count(*), count(i), sum(n), avg(f), min(t) FROM %1$s WHERE valid_from < '2000-01-01'$q$),
  -- expressions over aggregates, aggregates twice, constants
  (6, $q$SELECT sum(n) / count(*), count(*) + 1, max(i) - min(i), sum(i), sum(i), 42
         FROM %1$s WHERE valid_from <= '2026-01-05' AND valid_to > '2026-01-05'$q$),
  -- the read helpers
  (7, $q$SELECT count(*), sum(n), min(t) FROM zipper_lake.as_of(NULL::%1$s, '2026-01-04 18:00')$q$),
  (8, $q$SELECT count(*), max(i), max(f), sum(f) FROM zipper_lake.current(NULL::%1$s)$q$),
  -- no bounds: every row
  (9, $q$SELECT count(*), sum(i), min(valid_from) FROM %1$s$q$),
  -- arguments under binary coercions (text read as varchar, int as oid)
  (19, $q$SELECT min(t::varchar), max(tc::varchar), min(i::oid), max(i::oid), count(d::date)
          FROM %1$s WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'$q$),
  -- DISTINCT: the distinct inputs in the sort order (sum of floats depends
  -- on it), NULLs counted out, under the column's collation
  (20, $q$SELECT count(DISTINCT i), count(DISTINCT t), count(DISTINCT tc), sum(DISTINCT f), avg(DISTINCT n),
                min(DISTINCT t), max(DISTINCT tc), count(DISTINCT d), sum(DISTINCT iv), count(*)
         FROM %1$s WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'$q$),
  (21, $q$SELECT count(DISTINCT t), sum(DISTINCT n), avg(DISTINCT f), count(*) FROM %1$s WHERE valid_to = 'infinity'$q$),
  -- GROUP BY a column: every aggregate kind per group, a NULL group, the
  -- default collation's text
  (22, $q$SELECT t, count(*), count(i), sum(i), sum(n), avg(n), min(n), max(f), sum(f), avg(f), min(tc), max(d),
                sum(iv), avg(iv), avg(i)
         FROM %1$s WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00' GROUP BY t ORDER BY t$q$),
  -- two columns (one "C" text), NULLs in both, a column grouped but not shown
  (23, $q$SELECT tc, d IS NULL AS no_d, count(*), sum(n), max(t) FROM %1$s
         WHERE valid_from <= '2026-01-05' AND valid_to > '2026-01-05' GROUP BY tc, d ORDER BY tc, d$q$),
  (24, $q$SELECT count(*), max(i), min(valid_from) FROM %1$s WHERE valid_to > '2026-01-02' GROUP BY tc ORDER BY tc$q$),
  -- HAVING, in the node (also without GROUP BY: q11); the changes of a day
  (25, $q$SELECT tc, count(*), sum(n) FROM %1$s
         WHERE (valid_from >= '2026-01-04' AND valid_from < '2026-01-05')
            OR (valid_to >= '2026-01-04' AND valid_to < '2026-01-05')
         GROUP BY tc HAVING count(*) > 2 AND max(i) > 500 ORDER BY tc$q$),
  -- the current versions (the current partition's rows); nothing kept: no group
  (26, $q$SELECT t, count(*), sum(i), max(tc), upper(t) || '!' AS e, sum(n) / count(*) FROM %1$s
         WHERE valid_to = 'infinity' GROUP BY t ORDER BY t$q$),
  (27, $q$SELECT t, count(*) FROM %1$s WHERE valid_from < '2000-01-01' GROUP BY t$q$),
  -- grouped and rescanned with new bounds per outer row
  (28, $q$SELECT day, (SELECT string_agg(g.t || ':' || g.c, ',' ORDER BY g.t)
                       FROM (SELECT t, count(*) AS c FROM %1$s WHERE valid_from <= o.at AND valid_to > o.at
                             GROUP BY t) g)
         FROM (SELECT day, timestamptz '2026-01-01 12:00' + day * interval '1 day' AS at
                 FROM generate_series(0, 5) day) o$q$),
  -- the Agg node's: DISTINCT with GROUP BY
  (29, $q$SELECT t, count(DISTINCT i) FROM %1$s WHERE valid_to = 'infinity' GROUP BY t ORDER BY t$q$),
  -- the Agg node's: grouping, HAVING, DISTINCT of an expression, FILTER, ORDER BY in an
  -- aggregate, another filter, an expression argument, another aggregate
  (10, $q$SELECT (i %% 3) AS g, count(*) FROM %1$s WHERE valid_to = 'infinity' GROUP BY 1 ORDER BY 1$q$),
  (11, $q$SELECT count(*) FROM %1$s WHERE valid_to = 'infinity' HAVING count(*) > 0$q$),
  (12, $q$SELECT count(DISTINCT i %% 5) FROM %1$s WHERE valid_to = 'infinity'$q$),
  (13, $q$SELECT count(*) FILTER (WHERE i > 100) FROM %1$s WHERE valid_to = 'infinity'$q$),
  (14, $q$SELECT max(t ORDER BY t) FROM %1$s WHERE valid_to = 'infinity'$q$),
  (15, $q$SELECT count(*), sum(n) FROM %1$s WHERE valid_to = 'infinity' AND i > 100$q$),
  (16, $q$SELECT sum(i + 1) FROM %1$s WHERE valid_to = 'infinity'$q$),
  (17, $q$SELECT string_agg(t, ',' ORDER BY t), bool_and(i > 0) FROM %1$s WHERE valid_to = 'infinity'$q$),
  -- a subquery run once per outer row: the node is rescanned with new bounds
  (18, $q$SELECT day, (SELECT count(*) || '/' || coalesce(sum(n), 0) FROM %1$s
                         WHERE valid_from <= o.at AND valid_to > o.at)
         FROM (SELECT day, timestamptz '2026-01-01 12:00' + day * interval '1 day' AS at
                 FROM generate_series(-1, 6) day) o$q$);

SELECT q, tbl, (agg_check(format(query, tbl))).*
  FROM agg_queries, (VALUES ('agg_zl'), ('agg_rows')) t(tbl)
 ORDER BY q, tbl;
-- DISTINCT inputs beyond work_mem go to a sort (README "Bounded memory")
SET work_mem = '64kB';
SELECT tbl, c.node, c.same
  FROM (VALUES ('agg_zl'), ('agg_rows')) t(tbl),
       agg_check(format($q$SELECT count(DISTINCT i), sum(DISTINCT n), count(DISTINCT iv), sum(DISTINCT f)
                           FROM %1$s$q$, tbl)) c;
-- so do rows of groups beyond it: the hash table keeps the groups it
-- holds, the other groups' rows are sorted by key and aggregated one group
-- at a time; the same rows as the Agg node's (EXCEPT ALL both ways: none)
CREATE FUNCTION agg_spill_check(query text, OUT node text, OUT sorted boolean, OUT groups bigint,
                                OUT differences bigint)
LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  node := 'Agg';
  sorted := false;
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' || query LOOP
    IF line LIKE '%ZipperAggregate%' THEN
      node := 'ZipperAggregate';
    END IF;
    IF line LIKE '%Rows Sorted:%' THEN
      sorted := true;
    END IF;
  END LOOP;
  EXECUTE 'CREATE TEMP TABLE agg_spill_node AS ' || query;
  PERFORM set_config('zipper_lake.enable_scan_aggregates', 'off', true);
  EXECUTE 'CREATE TEMP TABLE agg_spill_executor AS ' || query;
  PERFORM set_config('zipper_lake.enable_scan_aggregates', 'on', true);
  SELECT count(*) INTO groups FROM agg_spill_node;
  SELECT count(*) INTO differences
    FROM ((TABLE agg_spill_node EXCEPT ALL TABLE agg_spill_executor)
          UNION ALL (TABLE agg_spill_executor EXCEPT ALL TABLE agg_spill_node)) x;
  DROP TABLE agg_spill_node, agg_spill_executor;
END $$;
SELECT tbl, c.*
  FROM (VALUES ('agg_zl'), ('agg_rows')) t(tbl),
       agg_spill_check(format($q$SELECT i, count(*) AS c, sum(n) AS sn, avg(n) AS an, min(t) AS mt, max(tc) AS mtc, sum(iv) AS siv, count(d) AS cd
                                 FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY i$q$, tbl)) c;
SELECT tbl, c.*
  FROM (VALUES ('agg_zl'), ('agg_rows')) t(tbl),
       agg_spill_check(format($q$SELECT t, d, count(*), sum(i), max(n) FROM %1$s
                                 WHERE valid_to > '2026-01-02' GROUP BY t, d HAVING count(*) < 5$q$, tbl)) c;
RESET work_mem;
SELECT tbl, c.*
  FROM (VALUES ('agg_zl'), ('agg_rows')) t(tbl),
       agg_spill_check(format($q$SELECT i, count(*), sum(n) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY i$q$, tbl)) c;

-- the plan: the ZipperScan below keeps its bounds and pruning; EXPLAIN
-- ANALYZE counts the rows the node took from it
EXPLAIN (COSTS OFF)
  SELECT count(*), sum(n) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*), sum(n) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00';
-- grouped: the groups it held in memory; ORDER BY sorts its groups above it
EXPLAIN (COSTS OFF)
  SELECT tc, count(*), sum(n) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'
   GROUP BY tc HAVING sum(i) > 10 ORDER BY tc;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT tc, count(*), sum(n) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'
   GROUP BY tc;
SET zipper_lake.enable_scan_aggregates = off;
EXPLAIN (COSTS OFF)
  SELECT tc, count(*) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00' GROUP BY tc;
RESET zipper_lake.enable_scan_aggregates;

-- a prepared statement's parameter, in custom and generic plans
PREPARE agg_at(timestamptz) AS
  SELECT count(*), sum(n), max(t) FROM agg_zl WHERE valid_from <= $1 AND valid_to > $1;
EXECUTE agg_at('2026-01-02 12:00');
EXECUTE agg_at('2026-01-05 12:00');
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE agg_at('2026-01-02 12:00');
EXECUTE agg_at('2026-01-02 12:00');
EXECUTE agg_at('2026-01-05 12:00');
RESET plan_cache_mode;

-- a late batch rewrites history (masks), then is rolled back: the node
-- sees what the scan sees, before, inside and after
CREATE TABLE agg_late AS
  SELECT k AS id, k AS i, 1000.5 AS n, 0.25::float8 AS f, 'late' AS t, 'late' AS tc,
         date '2000-01-01' AS d, interval '1 day' AS iv,
         timestamptz '2026-01-02 23:00' AS change_time, 'U' AS op
    FROM generate_series(1, 200, 9) k;
SELECT count(*), sum(n), max(t) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00';
BEGIN;
SELECT changes, late FROM zipper_lake.apply_changes('agg_zl', 'agg_late');
SELECT sum(masked_rows) > 0 AS masked FROM zipper_lake.inspect('agg_zl');
SELECT q, (agg_check(format(query, 'agg_zl'))).* FROM agg_queries WHERE q IN (1, 2, 3, 18, 22, 25) ORDER BY q;
ROLLBACK;
SELECT count(*), sum(n), max(t) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00';

-- a parallel plan: every participant aggregates the sub-groups it takes,
-- the Finalize Aggregate combines their states (numeric's serialized)
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF)
  SELECT count(*), sum(n), avg(i), min(t), max(tc) FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00';
SELECT (agg_check(format($q$SELECT count(*), sum(n), avg(i), avg(n), min(t), max(tc), sum(iv)
                              FROM agg_zl WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'$q$))).*;
-- grouped: no partial grouped node; the planner's parallel Agg, the same groups
SELECT c.node, c.same
  FROM agg_check($q$SELECT tc, count(*), sum(n), avg(i) FROM agg_zl
                    WHERE valid_from <= '2026-01-03 12:00' AND valid_to > '2026-01-03 12:00'
                    GROUP BY tc ORDER BY tc$q$) c;
-- a target that must run in the leader (pg_backend_pid() is parallel
-- restricted) keeps the node there, as it keeps an Agg node
SELECT pg_backend_pid() AS leader \gset
SET force_parallel_mode = on;
SELECT count(*), pg_backend_pid() = :leader AS in_leader FROM agg_zl WHERE valid_to = 'infinity';
RESET force_parallel_mode;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- the aggregate's EXECUTE privilege is checked, as the Agg node checks it
CREATE ROLE regress_zl_agg_reader;
GRANT SELECT ON agg_zl TO regress_zl_agg_reader;
BEGIN;
REVOKE EXECUTE ON FUNCTION pg_catalog.sum(numeric) FROM PUBLIC;
SET LOCAL ROLE regress_zl_agg_reader;
SELECT count(*) FROM agg_zl WHERE valid_to = 'infinity';
SELECT sum(n) FROM agg_zl WHERE valid_to = 'infinity';
ROLLBACK;
REVOKE SELECT ON agg_zl FROM regress_zl_agg_reader;
DROP ROLE regress_zl_agg_reader;

-- The memo in front of the node's hash tables (zl_aggregate_memo.c): a
-- single GROUP BY or DISTINCT column whose equality is bitwise (int2,
-- int4, int8, bool, date, timestamptz) finds a row's group, or a seen
-- value, in 1024 direct-mapped slots before the hash table.  The same rows
-- as the Agg node's (agg_spill_check: EXCEPT ALL both ways, none) with far
-- more keys than slots (keys sharing a slot, in interleaved rows), NULL
-- next to 0 and false, negative values, int8 keys alike in their low 32
-- bits, -0 next to 0 in a float8 key (no memo), groups beyond work_mem
-- (the frozen table's found in the memo, the others sorted), DISTINCT sets
-- beyond it, rescans with new bounds, columnar and row history.
CREATE TABLE memo_zl (id int, g int, g8 bigint, g2 smallint, b bool, d date, ts timestamptz,
                      f float8, n numeric, valid_from timestamptz NOT NULL,
                      valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('memo_zl', ARRAY['id']);
CREATE TABLE memo_rows (LIKE memo_zl) USING zipper_lake;
SELECT zipper_lake.register('memo_rows', ARRAY['id'], history_format => 'rows');

-- 6,000 keys changed on three days; about 5,000 values of g, 3,000 of
-- g8 (each twice: x and x + 2^32), 4,000 of g2, in scattered order
CREATE TABLE memo_ch AS
  SELECT k AS id,
         CASE WHEN (k + day) % 97 = 0 THEN NULL ELSE (k * 7919 + day) % 5003 - 2501 END AS g,
         CASE WHEN (k + day) % 89 = 0 THEN NULL
              ELSE ((k * 31 + day) % 3000 - 1500)::bigint + ((k % 2)::bigint << 32) END AS g8,
         CASE WHEN (k + day) % 83 = 0 THEN NULL ELSE ((k * 13 + day) % 4001 - 2000)::smallint END AS g2,
         CASE WHEN (k + day) % 5 = 0 THEN NULL ELSE (k + day) % 3 = 0 END AS b,
         CASE WHEN (k + day) % 79 = 0 THEN NULL
              ELSE date '2000-01-01' + ((k * 17 + day) % 4099 - 2049) END AS d,
         CASE WHEN (k + day) % 73 = 0 THEN NULL
              ELSE timestamptz '2000-01-01' + ((k * 11 + day) % 2999 - 1500) * interval '1 hour' END AS ts,
         CASE (k + day) % 4 WHEN 0 THEN '-0'::float8 WHEN 1 THEN '0'::float8 ELSE (k % 50) END AS f,
         (k * (day + 1)) / 7.0 AS n,
         timestamptz '2026-01-01' + day * interval '1 day' + (k % 600) * interval '1 minute' AS change_time,
         CASE WHEN day > 0 AND (k + day) % 19 = 0 THEN 'D' ELSE 'U' END AS op,
         day
    FROM generate_series(1, 6000) k, generate_series(0, 2) day
   WHERE day = 0 OR (k + day) % 3 <> 0;
DO $$
BEGIN
  FOR batch_day IN 0 .. 2 LOOP
    DROP TABLE IF EXISTS memo_batch;
    CREATE TEMP TABLE memo_batch AS SELECT * FROM memo_ch WHERE day = batch_day;
    ALTER TABLE memo_batch DROP COLUMN day;
    PERFORM zipper_lake.apply_changes('memo_zl', 'memo_batch');
    PERFORM zipper_lake.apply_changes('memo_rows', 'memo_batch');
  END LOOP;
END $$;
SELECT (SELECT count(*) FROM memo_zl) AS versions,
       (SELECT count(DISTINCT g) FROM memo_zl) AS g_values,
       (SELECT count(DISTINCT g8) FROM memo_zl) AS g8_values,
       (SELECT count(DISTINCT g8::int4) FROM memo_zl WHERE g8 BETWEEN -2147483648 AND 2147483647) AS g8_low_values;

CREATE TABLE memo_queries (q int, query text);
INSERT INTO memo_queries VALUES
  -- every row of the history (a bound, for a ZipperScan of row history),
  -- grouped by each column (f: no memo)
  (1, $q$SELECT g, count(*), sum(n), min(id), max(g2) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY g$q$),
  (2, $q$SELECT g8, count(*), sum(n), min(id) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY g8$q$),
  (3, $q$SELECT g2, count(*), sum(g), max(n) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY g2$q$),
  (4, $q$SELECT b, count(*), sum(n), min(g) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY b$q$),
  (5, $q$SELECT d, count(*), sum(n) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY d$q$),
  (6, $q$SELECT ts, count(*), max(n) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY ts$q$),
  (7, $q$SELECT f, count(*), sum(n) FROM %1$s WHERE valid_to > '2026-01-01' GROUP BY f$q$),
  -- the changes of a day (chunks checked row by row), HAVING
  (8, $q$SELECT g, count(*), sum(n) FROM %1$s
          WHERE valid_from >= '2026-01-02' AND valid_from < '2026-01-03' GROUP BY g$q$),
  (9, $q$SELECT g8, count(*) FROM %1$s WHERE valid_to = 'infinity' GROUP BY g8 HAVING count(*) > 1$q$),
  -- DISTINCT of each column
  (10, $q$SELECT count(DISTINCT g) AS g, sum(DISTINCT g) AS sg, count(DISTINCT g8) AS g8,
                 sum(DISTINCT g8) AS sg8, count(DISTINCT g2) AS g2, sum(DISTINCT g2) AS sg2,
                 count(DISTINCT b) AS b, count(DISTINCT d) AS d, min(DISTINCT d) AS md,
                 count(DISTINCT ts) AS ts, count(DISTINCT f) AS f, count(*) AS c FROM %1$s WHERE valid_to > '2026-01-01'$q$),
  (11, $q$SELECT count(DISTINCT g) AS g, sum(DISTINCT g8) AS sg8, count(*) AS c FROM %1$s
           WHERE valid_from >= '2026-01-02' AND valid_from < '2026-01-03'$q$),
  -- a subquery per outer row: the node is rescanned with new bounds, its
  -- table and memo emptied in between
  (12, $q$SELECT day, (SELECT string_agg(s.g || ':' || s.c, ',' ORDER BY s.g)
                       FROM (SELECT g, count(*) AS c FROM %1$s WHERE valid_from <= o.at AND valid_to > o.at
                             GROUP BY g) s) AS groups,
                (SELECT count(DISTINCT g8) FROM %1$s WHERE valid_from <= o.at AND valid_to > o.at) AS distinct_g8
         FROM (SELECT day, timestamptz '2026-01-01 12:00' + day * interval '1 day' AS at
                 FROM generate_series(0, 2) day) o$q$);

SELECT q, tbl, c.*
  FROM memo_queries, (VALUES ('memo_zl'), ('memo_rows')) t(tbl),
       agg_spill_check(format(query, tbl)) c
 ORDER BY q, tbl;
-- beyond work_mem: the frozen table's groups still found in the memo, the
-- rows of the others sorted; DISTINCT sets spilled to a sort
SET work_mem = '64kB';
SELECT q, tbl, c.*
  FROM memo_queries, (VALUES ('memo_zl'), ('memo_rows')) t(tbl),
       agg_spill_check(format(query, tbl)) c
 WHERE q IN (1, 2, 3, 5, 6, 8, 10, 11, 12)
 ORDER BY q, tbl;
RESET work_mem;

-- the groups of keys alike in their low 32 bits stay apart; NULL is not 0
SELECT g8 >> 32 AS high, count(*) AS groups, sum(c) AS rows
  FROM (SELECT g8, count(*) AS c FROM memo_zl GROUP BY g8) s
 GROUP BY 1 ORDER BY 1;
SELECT * FROM (SELECT g, count(*) FROM memo_zl GROUP BY g OFFSET 0) s
 WHERE g = 0 OR g IS NULL ORDER BY g;
SELECT b, count(*) FROM memo_zl GROUP BY b ORDER BY b;

