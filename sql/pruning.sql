-- Pruned reads: as_of, current, changes and plain SQL on the period columns
-- return exactly what an unpruned scan returns, and EXPLAIN shows the pruning.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE TABLE hist (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('hist', ARRAY['id'], max_subgroups => 4);
CREATE TABLE hist_ch (id int, v int, change_time timestamptz, op text);
-- an independent reference: the same batches applied to a heap table by the
-- plain PL/pgSQL implementation of the change semantics (test/random)
SET client_min_messages = warning;
\set ECHO none
\i test/random/reference.sql
\set ECHO all
RESET client_min_messages;
CREATE TABLE hist_heap (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);

-- 30 days of changes for 40 keys: updates, deletes, resurrections, late data
DO $$
BEGIN
  FOR d IN 0..29 LOOP
    TRUNCATE hist_ch;
    INSERT INTO hist_ch
      SELECT k, (k * 7 + d * 3) % 5, '2026-03-01'::timestamptz + d * interval '1 day' + (k % 24) * interval '1 hour',
             CASE WHEN (k + d) % 11 = 0 THEN 'D' ELSE 'U' END
        FROM generate_series(1, 40) k WHERE (k + d) % 3 <> 0;
    -- a late change every few days
    IF d % 4 = 3 THEN
      INSERT INTO hist_ch VALUES (d, 99, '2026-03-01'::timestamptz + (d - 2) * interval '1 day' + interval '30 minutes', 'U');
    END IF;
    PERFORM zipper_lake.apply_changes('hist', 'hist_ch');
    PERFORM zl_ref.apply_changes('hist_heap', 'hist_ch', ARRAY['id']);
  END LOOP;
END $$;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM hist;
SELECT count(DISTINCT partition_end) AS partitions, count(DISTINCT file_group) AS file_groups,
       count(*) AS sub_groups, sum(masked_rows) > 0 AS has_masks
  FROM zipper_lake.inspect('hist');
SELECT count(*) FROM zipper_lake.verify('hist');

-- run a query with pruning on and off: same rows, every time
CREATE FUNCTION same_rows(query text, OUT same boolean, OUT n bigint) LANGUAGE plpgsql AS $$
DECLARE
  pruned text; unpruned text;
BEGIN
  EXECUTE format('SELECT count(*), coalesce(md5(string_agg(r::text, '','' ORDER BY r::text)), '''') FROM (%s) r', query)
    INTO n, pruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
  EXECUTE format('SELECT coalesce(md5(string_agg(r::text, '','' ORDER BY r::text)), '''') FROM (%s) r', query)
    INTO unpruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
  same := pruned = unpruned;
END $$;

-- and the same answer as the plain definition evaluated on the reference
SELECT count(*) AS versions,
       (SELECT count(*) FROM ((TABLE hist EXCEPT ALL TABLE hist_heap) UNION ALL
                              (TABLE hist_heap EXCEPT ALL TABLE hist)) d) AS differences
  FROM hist_heap;

-- the helpers
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::hist, '2026-03-10 12:00')$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::hist, '2026-03-01 00:00')$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::hist, '2026-02-01')$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::hist, now())$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.current(NULL::hist)$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.changes(NULL::hist, '2026-03-05', '2026-03-06')$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.changes(NULL::hist, '2026-03-29 12:00', 'infinity')$$);
SELECT count(*) AS mismatches FROM generate_series(0, 60) h,
  LATERAL (SELECT '2026-02-28'::timestamptz + h * interval '13 hours' AS t) x
 WHERE (SELECT count(*) FROM ((SELECT * FROM zipper_lake.as_of(NULL::hist, x.t)
                               EXCEPT ALL SELECT * FROM hist_heap WHERE valid_from <= x.t AND valid_to > x.t)
                              UNION ALL
                              (SELECT * FROM hist_heap WHERE valid_from <= x.t AND valid_to > x.t
                               EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::hist, x.t))) d) > 0;
SELECT count(*) AS mismatches FROM generate_series(0, 40) h,
  LATERAL (SELECT '2026-02-28'::timestamptz + h * interval '19 hours' AS a,
                  '2026-02-28'::timestamptz + h * interval '19 hours' + (h % 5) * interval '9 hours' AS b) x
 WHERE (SELECT count(*) FROM ((SELECT * FROM zipper_lake.changes(NULL::hist, x.a, x.b)
                               EXCEPT ALL SELECT * FROM hist_heap
                                WHERE (valid_from >= x.a AND valid_from < x.b)
                                   OR (valid_to >= x.a AND valid_to < x.b AND valid_to <> 'infinity'))
                              UNION ALL
                              (SELECT * FROM hist_heap
                                WHERE (valid_from >= x.a AND valid_from < x.b)
                                   OR (valid_to >= x.a AND valid_to < x.b AND valid_to <> 'infinity')
                               EXCEPT ALL SELECT * FROM zipper_lake.changes(NULL::hist, x.a, x.b))) d) > 0;

-- helpers in FROM are inlined into a pruned scan of the table; a volatile
-- or NULL time argument keeps the function
EXPLAIN (COSTS OFF) SELECT * FROM zipper_lake.as_of(NULL::hist, '2026-03-10 12:00');
EXPLAIN (COSTS OFF) SELECT * FROM zipper_lake.current(NULL::hist) c WHERE c.v = 2;
EXPLAIN (COSTS OFF) SELECT * FROM zipper_lake.changes(NULL::hist, '2026-03-05', '2026-03-06');
EXPLAIN (COSTS OFF) SELECT * FROM zipper_lake.as_of(NULL::hist, clock_timestamp());
-- inlined under an outer join, the bounds stay on the nullable side
SELECT * FROM same_rows($$SELECT g, c.v FROM generate_series(1, 45) g
                           LEFT JOIN zipper_lake.current(NULL::hist) c ON c.id = g$$);
SELECT * FROM same_rows($$SELECT g, a.v FROM generate_series(1, 45) g
                           LEFT JOIN zipper_lake.as_of(NULL::hist, '2026-03-07') a ON a.id = g AND a.v > 1$$);
-- a lateral time argument keeps the function, and gives the same rows
SELECT * FROM same_rows($$SELECT t, a.id, a.v FROM generate_series('2026-03-01'::timestamptz, '2026-03-31', '5 days') t,
                           LATERAL zipper_lake.as_of(NULL::hist, t) a$$);

-- the helpers compose with SQL: joins, aggregates, views
CREATE VIEW hist_now AS SELECT * FROM zipper_lake.current(NULL::hist);
SELECT count(*), sum(v) FROM hist_now;
SELECT count(*) FROM zipper_lake.as_of(NULL::hist, '2026-03-15') a
  JOIN zipper_lake.as_of(NULL::hist, '2026-03-16') b USING (id) WHERE a.v <> b.v;

-- every recognized predicate shape in plain SQL
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from <= '2026-03-10 12:00' AND valid_to > '2026-03-10 12:00'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE '2026-03-10 12:00' >= valid_from AND '2026-03-10 12:00' < valid_to$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_to = 'infinity'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from BETWEEN '2026-03-05' AND '2026-03-07'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_to BETWEEN '2026-03-05' AND '2026-03-07' AND v > 1$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from < '2026-03-03' AND valid_to >= '2026-03-20'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from <= now() AND valid_to > now()$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from > 'infinity'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from <= NULL$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE id = 7 AND valid_from = '2026-03-02 07:00'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_to < '2026-03-02'$$);
-- versions that began or ended on a day: one OR of a valid_from range and a valid_to range
SELECT * FROM same_rows($$SELECT * FROM hist WHERE (valid_from >= '2026-03-05' AND valid_from < '2026-03-06')
                                            OR (valid_to >= '2026-03-05' AND valid_to < '2026-03-06')$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from = '2026-03-05 05:00' OR valid_to <= '2026-03-02'$$);
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_from < '2026-03-02' OR v = 3$$);

-- prepared statements: generic plans evaluate parameters at run time
SET plan_cache_mode = force_generic_plan;
PREPARE at_time(timestamptz) AS SELECT count(*), sum(v) FROM hist WHERE valid_from <= $1 AND valid_to > $1;
EXECUTE at_time('2026-03-10 12:00');
SELECT count(*), sum(v) FROM hist_heap WHERE valid_from <= '2026-03-10 12:00' AND valid_to > '2026-03-10 12:00';
EXECUTE at_time('2026-03-25');
SELECT count(*), sum(v) FROM hist_heap WHERE valid_from <= '2026-03-25' AND valid_to > '2026-03-25';
EXPLAIN (COSTS OFF) EXECUTE at_time('2026-03-25');
RESET plan_cache_mode;

-- a lateral parameter changes the bounds on every rescan
SELECT t::date, (SELECT count(*) FROM hist WHERE valid_from <= t AND valid_to > t) AS zipper,
       (SELECT count(*) FROM hist_heap WHERE valid_from <= t AND valid_to > t) AS heap
  FROM generate_series('2026-03-02'::timestamptz, '2026-03-30', '7 days') t;

-- EXPLAIN shows the bounds and what was kept
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE valid_to = 'infinity';
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE valid_from <= '2026-03-03 12:00' AND valid_to > '2026-03-03 12:00';
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE valid_to >= '2026-03-10' AND valid_to < '2026-03-11' AND v = 3;
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE id = 7 AND valid_from = '2026-03-02 07:00';
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE ((valid_from >= '2026-03-05' AND valid_from < '2026-03-06')
                                          OR (valid_to >= '2026-03-05' AND valid_to < '2026-03-06')) AND v > 0;
-- an OR that is not of that shape stays a filter
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE valid_from < '2026-03-02' OR v = 3;
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) SELECT * FROM hist WHERE valid_to = 'infinity';
-- with ANALYZE it says where the sub-group list came from: above, the
-- backend's cache; a new connection reads the catalog
\c
EXPLAIN (COSTS OFF, ANALYZE, TIMING OFF, SUMMARY OFF) SELECT * FROM hist WHERE valid_to = 'infinity';
SET timezone = 'UTC';
\set SHOW_CONTEXT never
-- no period predicate: no bounds; with columnar history (README "Storage
-- formats") a ZipperScan still skips chunks by v, without pruning a plain
-- sequential scan
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE v = 3;
SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF) SELECT * FROM hist WHERE valid_to = 'infinity';
RESET zipper_lake.enable_pruning;

-- parallel sequential scans share out sub-groups among workers
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM hist WHERE v >= 0;
SELECT count(*), sum(v) FROM hist WHERE v >= 0;
RESET zipper_lake.enable_pruning;
SELECT count(*), sum(v) FROM hist_heap;
-- a parallel ZipperScan reading two columns and skipping chunks by v
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM hist WHERE v >= 0;
SELECT count(*), sum(v) FROM hist WHERE v >= 0;
-- and so does a parallel ZipperScan, the leader pruning for all (parallel.sql)
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM hist WHERE valid_from <= '2026-03-20' AND valid_to > '2026-03-20';
SELECT count(*), sum(v) FROM hist WHERE valid_from <= '2026-03-20' AND valid_to > '2026-03-20';
SELECT count(*), sum(v) FROM hist_heap WHERE valid_from <= '2026-03-20' AND valid_to > '2026-03-20';
SELECT * FROM same_rows($$SELECT * FROM hist WHERE valid_to >= '2026-03-10'$$);
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;

-- timestamp and date period columns prune too
CREATE TABLE days_t (id int, v int, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('days_t', ARRAY['id']);
INSERT INTO days_t SELECT k, d, '2026-01-01'::date + d, '2026-01-01'::date + d + 1
  FROM generate_series(1, 5) k, generate_series(0, 9) d;
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::days_t, '2026-01-05 12:00')$$);
SELECT id, v, valid_from FROM zipper_lake.as_of(NULL::days_t, '2026-01-05') ORDER BY id;
SELECT * FROM same_rows($$SELECT * FROM days_t WHERE valid_from <= '2026-01-05' AND valid_to > '2026-01-05'$$);
EXPLAIN (COSTS OFF) SELECT * FROM days_t WHERE valid_to = '2026-01-03';
CREATE TABLE stamps_t (id int, v int, valid_from timestamp NOT NULL, valid_to timestamp NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('stamps_t', ARRAY['id']);
INSERT INTO stamps_t SELECT k, d, '2026-01-01'::timestamp + d * interval '1 day', '2026-01-01'::timestamp + (d + 1) * interval '1 day'
  FROM generate_series(1, 5) k, generate_series(0, 9) d;
SELECT * FROM same_rows($$SELECT * FROM stamps_t WHERE valid_from <= '2026-01-05' AND valid_to > '2026-01-05'$$);
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.changes(NULL::stamps_t, '2026-01-03', '2026-01-04')$$);

-- errors
SELECT * FROM zipper_lake.as_of(NULL::hist_heap, now());
\echo :SQLSTATE
SELECT * FROM zipper_lake.as_of(NULL::hist, NULL);
\echo :SQLSTATE
SELECT * FROM zipper_lake.as_of(1, now());
\echo :SQLSTATE

-- edges of the time arguments
SELECT count(*) FROM zipper_lake.as_of(NULL::hist, 'infinity');
SELECT count(*) FROM zipper_lake.changes(NULL::hist, '-infinity', '-infinity');
SELECT count(*) FROM zipper_lake.changes(NULL::hist, '2026-03-06', '2026-03-05');
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.changes(NULL::hist, '-infinity', '2026-03-03')$$);

-- where clocks go back over midnight a local date begins twice (Havana,
-- 2023-11-05 01:00 CDT -> 00:00 CST): pruning still finds every row
CREATE TABLE havana (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('havana', ARRAY['id'], time_zone => 'America/Havana');
-- (each generator loads the zipper table and its heap reference alike)
CREATE TABLE havana_heap (LIKE havana);
WITH g AS (VALUES (1, 1, '2023-11-04 12:00+00'::timestamptz, '2023-11-05 04:30+00'::timestamptz),
                  (1, 2, '2023-11-05 04:30+00', 'infinity')),
     z AS (INSERT INTO havana SELECT * FROM g)
INSERT INTO havana_heap SELECT * FROM g;
SELECT * FROM same_rows($$SELECT * FROM zipper_lake.as_of(NULL::havana, '2023-11-05 04:45+00')$$);
SELECT v FROM zipper_lake.as_of(NULL::havana, '2023-11-05 04:45+00');
SELECT * FROM same_rows($$SELECT * FROM havana WHERE valid_to = '2023-11-05 04:30+00'$$);

-- a lateral reference inside a subquery over a zipper table
CREATE TABLE outer_t (x int);
INSERT INTO outer_t VALUES (1), (2);
SELECT * FROM same_rows($$SELECT o.x, q.y, q.id FROM outer_t o
                           LEFT JOIN LATERAL (SELECT o.x AS y, h.id FROM hist h
                                               WHERE h.valid_from > '2026-03-29' AND h.id < 4) q ON true$$);
SELECT o.x, q.y FROM outer_t o
  LEFT JOIN LATERAL (SELECT o.x AS y FROM hist h WHERE h.valid_from > '2026-03-29' AND h.id < 4) q ON true
 ORDER BY 1, 2;

-- rollover applies within one big flush too (65536 rows make a sub-group)
CREATE TABLE big (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('big', ARRAY['id'], max_subgroups => 2);
INSERT INTO big SELECT g, '2026-03-01 00:00', 'infinity' FROM generate_series(1, 140000) g;
SELECT dense_rank() OVER (ORDER BY file_group) AS file_group, row_count FROM zipper_lake.inspect('big');

-- the open end of a date table does not depend on the session's time zone
SET timezone = 'Asia/Shanghai';
CREATE TABLE dated_end (id int, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('dated_end', ARRAY['id'], open_end => '9999-12-31');
INSERT INTO dated_end VALUES (1, '2026-01-01', '9999-12-31');
SET timezone = 'UTC';
INSERT INTO dated_end VALUES (2, '2026-01-01', '9999-12-31');
SELECT partition_end, row_count FROM zipper_lake.inspect('dated_end');
SELECT count(*) FROM dated_end WHERE valid_to = '9999-12-31';
SELECT count(*) FROM zipper_lake.current(NULL::dated_end);

-- a NULL time is an error, whether the helper is inlined or not
PREPARE at_null(timestamptz) AS SELECT count(*) FROM zipper_lake.as_of(NULL::hist, $1);
EXECUTE at_null(NULL);
\echo :SQLSTATE
EXECUTE at_null('2026-03-10');
SELECT count(*) FROM zipper_lake.changes(NULL::hist, nullif(now(), now()), now());
\echo :SQLSTATE

-- verify finds several open versions of a timestamp table in any session time zone
-- (loads refuse them: a lost mask row stands for a damaged catalog)
CREATE TABLE stamped_open (id int, v int, valid_from timestamp NOT NULL, valid_to timestamp NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('stamped_open', ARRAY['id'], open_end => '9999-12-31');
INSERT INTO stamped_open SELECT g, 0, '2026-01-01', '9999-12-31' FROM generate_series(1, 4) g;
CREATE TABLE stamped_change (id int, v int, change_time timestamp);
INSERT INTO stamped_change VALUES (1, 1, '2026-02-01');
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('stamped_open', 'stamped_change');
SELECT check_name FROM zipper_lake.verify('stamped_open');
DELETE FROM zipper_lake.mask m USING zipper_lake.storage s
 WHERE m.storage_id = s.storage_id AND s.relid = 'stamped_open'::regclass;
SELECT DISTINCT check_name FROM zipper_lake.verify('stamped_open') ORDER BY 1;
SET timezone = 'Asia/Shanghai';
SELECT DISTINCT check_name FROM zipper_lake.verify('stamped_open') ORDER BY 1;
SET timezone = 'UTC';

-- a selective read loads the catalog rows of the sub-groups it can need,
-- not the whole history's (EXPLAIN VERBOSE: Sub-groups Loaded)
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM hist WHERE id = 7 AND valid_from = '2026-03-02 07:00';
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM hist WHERE valid_to >= '2026-03-10' AND valid_to < '2026-03-11';
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM hist WHERE valid_to = 'infinity';
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM hist WHERE valid_from = '2026-03-05 05:00' OR valid_to <= '2026-03-02';
SET zipper_lake.enable_pruning = off;
EXPLAIN (COSTS OFF, VERBOSE) SELECT id FROM hist WHERE valid_to >= '2026-03-10' AND valid_to < '2026-03-11';
RESET zipper_lake.enable_pruning;

-- so every comparison at every partition edge must still find what a heap
-- finds: month partitions in a zone with daylight saving time, and day
-- partitions where a local date begins twice
CREATE FUNCTION count_of(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE query INTO n;
  RETURN n;
END $$;
CREATE TABLE berlin_months (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('berlin_months', ARRAY['id'], partition_unit => 'month',
                            time_zone => 'Europe/Berlin', max_subgroups => 2);
CREATE TABLE berlin_months_heap (LIKE berlin_months);
-- versions that end, and versions that begin, just before, at and just after each month's start
WITH g AS (SELECT row_number() OVER (), 0, e - interval '3 days', e
             FROM generate_series('2026-01-01 00:00+01'::timestamptz, '2026-07-01 00:00+02', '1 month') m,
                  unnest(ARRAY[m - interval '1 microsecond', m, m + interval '1 microsecond']) e
           UNION ALL
           SELECT 100 + row_number() OVER (), 1, b, b + interval '2 days'
             FROM generate_series('2026-01-01 00:00+01'::timestamptz, '2026-07-01 00:00+02', '1 month') m,
                  unnest(ARRAY[m - interval '1 microsecond', m, m + interval '1 microsecond']) b
           UNION ALL
           SELECT 999, 2, '2025-12-20 00:00+01', 'infinity'),
     z AS (INSERT INTO berlin_months SELECT * FROM g)
INSERT INTO berlin_months_heap SELECT * FROM g;
WITH g AS (SELECT 2, k, t, t + interval '1 hour'
             FROM generate_series(0, 40) k, LATERAL (SELECT '2023-11-04 20:00-04'::timestamptz + k * interval '1 hour' AS t) x),
     z AS (INSERT INTO havana SELECT * FROM g)
INSERT INTO havana_heap SELECT * FROM g;
SELECT (SELECT count(*) FROM ((TABLE berlin_months EXCEPT ALL TABLE berlin_months_heap) UNION ALL
                              (TABLE berlin_months_heap EXCEPT ALL TABLE berlin_months)) d) AS berlin_differences,
       (SELECT count(*) FROM ((TABLE havana EXCEPT ALL TABLE havana_heap) UNION ALL
                              (TABLE havana_heap EXCEPT ALL TABLE havana)) d) AS havana_differences;
SELECT tbl, count(*) AS comparisons,
       count(*) FILTER (WHERE count_of(format('SELECT count(*) FROM %I WHERE %s', tbl, cond)) <>
                              count_of(format('SELECT count(*) FROM %I_heap WHERE %s', tbl, cond))) AS mismatches
  FROM (SELECT 'berlin_months' AS tbl, t
          FROM generate_series('2026-01-01 00:00+01'::timestamptz, '2026-07-01 00:00+02', '1 month') m,
               unnest(ARRAY[m - interval '1 microsecond', m, m + interval '1 microsecond']) t
        UNION ALL
        SELECT 'havana', t
          FROM generate_series('2023-11-04 23:00-04'::timestamptz, '2023-11-06 01:00-05', '30 minutes') t) times,
       LATERAL (SELECT format('%I %s %L', col, op, t) AS cond
                  FROM unnest(ARRAY['valid_to', 'valid_from']) col, unnest(ARRAY['<', '<=', '=', '>=', '>']) op
                UNION ALL
                SELECT format('valid_from <= %1$L AND valid_to > %1$L', t)
                UNION ALL
                SELECT format('(valid_from >= %1$L AND valid_from < %2$L) OR (valid_to >= %1$L AND valid_to < %2$L)',
                              t, t + interval '1 day')) c
 GROUP BY tbl ORDER BY tbl;
SELECT count(DISTINCT partition_end) AS berlin_months_partitions FROM zipper_lake.inspect('berlin_months');

-- a date bound past timestamps' range (year 294277 on) lies past every
-- version and short of infinity: each comparison counts what it counts on
-- a heap copy (open versions end at infinity, past it)
CREATE TABLE far_dates (id int, v int, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('far_dates', ARRAY['id']);
INSERT INTO far_dates VALUES (1, 1, '2024-01-01', '2024-01-05'), (1, 2, '2024-01-05', 'infinity'),
                             (2, 1, '2024-01-02', 'infinity');
CREATE TABLE far_dates_heap AS SELECT * FROM far_dates;
CREATE FUNCTION far_count(t text, c text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %I WHERE %s', t, c) INTO n;
  RETURN n;
END $$;
SELECT c AS clause, far_count('far_dates', c) AS zipper, far_count('far_dates_heap', c) AS heap
  FROM unnest(ARRAY['valid_to < ''300000-01-01''::date', 'valid_to <= ''300000-01-01''::date',
                    'valid_to > ''300000-01-01''::date', 'valid_to = ''300000-01-01''::date',
                    'valid_from > ''5874897-12-31''::date', 'valid_from <= ''5874897-12-31''::date',
                    'valid_to BETWEEN ''2024-01-03''::date AND ''294277-01-01''::date']) c;
DROP FUNCTION far_count(text, text);
