-- Columnar history (README "Storage formats"): history sub-groups are
-- written column by column, compressed, with min/max per chunk.  Every
-- type family round-trips: the same changes applied to a table whose
-- history stays in rows give the same rows, compared as values and as text.
SET timezone = 'UTC';
\set VERBOSITY terse
CREATE TYPE col_mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN col_posint AS int CHECK (VALUE > 0);
CREATE TYPE col_pair AS (a int, b text);
CREATE COLLATION col_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);

CREATE TABLE col_zl (
  id int, n numeric, f8 float8, f4 float4, i2 int2, i8 int8, b bool,
  t text, vc varchar(12), ch char(3), tc text COLLATE "C", tci text COLLATE col_ci,
  by bytea, j jsonb, arr int[], tarr text[], e col_mood, d col_posint, comp col_pair,
  u uuid, dt date, ts timestamp, tm time, tmtz timetz, iv interval, big text,
  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE col_rows (LIKE col_zl) USING zipper_lake;
SELECT zipper_lake.register('col_zl', ARRAY['id']);
-- chunks of 16 rows, so that every sub-group has several
SET zipper_lake.columnar_chunk_rows = 16;
SELECT zipper_lake.register('col_rows', ARRAY['id'], history_format => 'rows');

-- 300 keys changed on four days; each column is NULL for some rows, the
-- floats and numerics NaN for some, big is over 2 kB (TOASTed in rows)
CREATE TABLE col_ch AS
  SELECT k AS id,
         CASE WHEN (k + day) % 11 = 0 THEN NULL WHEN k % 17 = 0 THEN 'NaN'::numeric ELSE (k * day) / 7.0 END AS n,
         CASE WHEN (k + day) % 11 = 1 THEN NULL WHEN k % 19 = 0 THEN 'NaN'::float8 ELSE k * 1.5 + day END AS f8,
         CASE WHEN (k + day) % 11 = 2 THEN NULL WHEN k % 23 = 0 THEN '-Infinity'::float4 ELSE k / 3.0 END::float4 AS f4,
         CASE WHEN (k + day) % 11 = 3 THEN NULL ELSE (k % 300 - 150)::int2 END AS i2,
         CASE WHEN (k + day) % 11 = 4 THEN NULL ELSE k::int8 * 1000000007 * day END AS i8,
         CASE WHEN (k + day) % 11 = 5 THEN NULL ELSE (k + day) % 2 = 0 END AS b,
         CASE WHEN (k + day) % 11 = 6 THEN NULL ELSE 'text ' || (k % 7) END AS t,
         CASE WHEN (k + day) % 11 = 7 THEN NULL ELSE left(md5(k::text), 1 + k % 12) END::varchar(12) AS vc,
         CASE WHEN (k + day) % 11 = 8 THEN NULL ELSE chr(65 + k % 26) END::char(3) AS ch,
         CASE WHEN (k + day) % 11 = 9 THEN NULL ELSE chr(97 + k % 26) || 'Z' END AS tc,
         CASE WHEN (k + day) % 11 = 10 THEN NULL ELSE CASE WHEN k % 2 = 0 THEN 'Abc' ELSE 'aBC' END || k % 5 END AS tci,
         CASE WHEN (k + day) % 13 = 0 THEN NULL ELSE decode(md5(k::text), 'hex') END AS by,
         CASE WHEN (k + day) % 13 = 1 THEN NULL ELSE jsonb_build_object('k', k, 'day', day, 'tags', jsonb_build_array('a', k % 3)) END AS j,
         CASE WHEN (k + day) % 13 = 2 THEN NULL ELSE ARRAY[k, day, NULL] END AS arr,
         CASE WHEN (k + day) % 13 = 3 THEN NULL ELSE ARRAY['x' || k, NULL, 'y'] END AS tarr,
         CASE WHEN (k + day) % 13 = 4 THEN NULL ELSE (ARRAY['sad', 'ok', 'happy'])[1 + (k + day) % 3]::col_mood END AS e,
         CASE WHEN (k + day) % 13 = 5 THEN NULL ELSE k END::col_posint AS d,
         CASE WHEN (k + day) % 13 = 6 THEN NULL ELSE ROW(k, CASE WHEN k % 4 = 0 THEN NULL ELSE 'p' || k END)::col_pair END AS comp,
         CASE WHEN (k + day) % 13 = 7 THEN NULL ELSE md5(k::text)::uuid END AS u,
         CASE WHEN (k + day) % 13 = 8 THEN NULL WHEN k = 5 THEN 'infinity'::date ELSE date '2020-01-01' + k END AS dt,
         CASE WHEN (k + day) % 13 = 9 THEN NULL ELSE timestamp '2020-01-01 12:34:56.789' + k * interval '1 hour' END AS ts,
         CASE WHEN (k + day) % 13 = 10 THEN NULL ELSE time '00:00:01' + k * interval '1 minute' END AS tm,
         CASE WHEN (k + day) % 13 = 11 THEN NULL ELSE ('10:00:00+0' || k % 9)::timetz END AS tmtz,
         CASE WHEN (k + day) % 13 = 12 THEN NULL ELSE make_interval(months => k % 13, days => k % 30, secs => k) END AS iv,
         CASE WHEN k % 10 = 0 THEN (SELECT string_agg(md5((k * day + g)::text), '') FROM generate_series(1, 100) g)
              WHEN k % 10 = 1 THEN NULL ELSE 'short ' || k END AS big,
         timestamptz '2026-01-01' + day * interval '1 day' + k * interval '1 second' AS change_time, day
    FROM generate_series(1, 300) k, generate_series(0, 3) day
   WHERE day = 0 OR (k + day) % 3 <> 0;

CREATE FUNCTION col_apply(first_day int, last_day int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  batch_day int;
BEGIN
  FOR batch_day IN first_day .. last_day LOOP
    DROP TABLE IF EXISTS col_batch;
    CREATE TEMP TABLE col_batch AS SELECT * FROM col_ch WHERE day = batch_day;
    ALTER TABLE col_batch DROP COLUMN day;
    PERFORM zipper_lake.apply_changes('col_zl', 'col_batch');
    PERFORM zipper_lake.apply_changes('col_rows', 'col_batch');
  END LOOP;
END $$;

-- the two tables hold the same rows: as values, and as their text
CREATE FUNCTION col_differences(OUT as_values bigint, OUT as_text bigint, OUT rows_zl bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM ((TABLE col_zl EXCEPT ALL TABLE col_rows)
                                UNION ALL (TABLE col_rows EXCEPT ALL TABLE col_zl)) x),
         (SELECT count(*) FROM ((SELECT z::text FROM col_zl z EXCEPT ALL SELECT r::text FROM col_rows r)
                                UNION ALL (SELECT r::text FROM col_rows r EXCEPT ALL SELECT z::text FROM col_zl z)) x),
         (SELECT count(*) FROM col_zl)
$$;

SET client_min_messages = warning;
SELECT col_apply(0, 3);
SELECT * FROM col_differences();
SELECT format, count(*) AS sub_groups, sum(row_count) AS rows,
       bool_and(compressed_bytes < raw_bytes) AS compressed
  FROM zipper_lake.inspect('col_zl') GROUP BY format ORDER BY format;
SELECT format, count(*) FROM zipper_lake.inspect('col_rows') GROUP BY format;
SELECT * FROM zipper_lake.verify('col_zl');
-- as_of and changes read the columnar history like the rows
SELECT (SELECT count(*) FROM zipper_lake.as_of(NULL::col_zl, '2026-01-02 00:02')) AS as_of_rows,
       (SELECT count(*) FROM (SELECT * FROM zipper_lake.as_of(NULL::col_zl, '2026-01-02 00:02')
                              EXCEPT ALL SELECT * FROM zipper_lake.as_of(NULL::col_rows, '2026-01-02 00:02')) x) AS as_of_differences,
       (SELECT count(*) FROM (SELECT * FROM zipper_lake.changes(NULL::col_zl, '2026-01-02', '2026-01-03')
                              EXCEPT ALL SELECT * FROM zipper_lake.changes(NULL::col_rows, '2026-01-02', '2026-01-03')) x) AS changes_differences;
-- big values came back whole (3200 bytes), and they are not TOAST pointers
SELECT count(*), min(length(big)), max(length(big)) FROM col_zl WHERE length(big) > 2000 AND valid_to < 'infinity';
-- a key's history, through the key directories of columnar sub-groups too
SELECT id, n, t, e, valid_from, valid_to FROM col_zl WHERE id = 10 ORDER BY valid_from;

-- chunk skipping: predicates on every column type return exactly what a
-- scan without pruning returns; chunk_filter says the predicate became
-- one (not for jsonb containment, other collations than the column's,
-- bare booleans or IN lists)
CREATE FUNCTION col_skip_check(cond text, OUT matches bigint, OUT same boolean, OUT chunk_filter boolean)
LANGUAGE plpgsql AS $$
DECLARE
  pruned text;
  unpruned text;
  line text;
BEGIN
  chunk_filter := false;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) SELECT * FROM col_zl WHERE ' || cond LOOP
    chunk_filter := chunk_filter OR line LIKE '%Chunk Filter%';
  END LOOP;
  EXECUTE 'SELECT count(*), coalesce(sum(hashtext(z::text)), 0)::text FROM col_zl z WHERE ' || cond
    INTO matches, pruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
  EXECUTE 'SELECT coalesce(sum(hashtext(z::text)), 0)::text FROM col_zl z WHERE ' || cond INTO unpruned;
  PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
  same := pruned = unpruned;
END $$;
SELECT cond, s.* FROM unnest(ARRAY[
  'n > 20', 'n = ''NaN''', 'n < 1', 'f8 < 100', 'f8 = ''NaN''', 'f8 > 1e300', 'f4 >= 50', 'f4 = ''-Infinity''',
  'i2 < 0', 'i2 = 7', 'i8 > 100000000000', '200000000000 > i8', 'b', 'b = false', 'b IS NULL',
  't = ''text 3''', 't > ''text 5''', 'vc > ''c''', 'vc = ''c4ca''', 'ch = ''C''', 'tc < ''m''', 'tci = ''abc1''',
  'tci = ''ABC1'' COLLATE "C"', 'by > ''\x80''', 'j > ''{"k": 100}''', 'j @> ''{"day": 2}''',
  'arr = ARRAY[10, 1, NULL]', 'arr > ARRAY[250]', 'tarr < ARRAY[''x2'']', 'e = ''happy''', 'e > ''sad''',
  'd > 100', 'comp > ROW(100, ''p'')::col_pair', 'u < ''80000000-0000-0000-0000-000000000000''',
  'dt > ''2020-06-01''', 'dt = ''infinity''', 'ts < ''2020-01-05''', 'tm > ''03:00''', 'tmtz = ''10:00:00+03''',
  'iv > ''1 mon''', 'big IS NULL', 'big IS NOT NULL', 'big > ''m''', 'n IS NULL AND i2 > 0',
  'i8 BETWEEN 1000000007 AND 50000000000', 'id = 77', 'id IN (3, 5)', 'n > NULL::numeric']) cond,
  LATERAL col_skip_check(cond) s;
-- key probes read single rows of columnar chunks (README "Storage
-- formats"): many keys, several in one chunk, forward and backward, as a
-- scan without pruning reads them
SELECT (SELECT sum(hashtext(z::text)) FROM col_zl z WHERE id = ANY (ARRAY(SELECT generate_series(1, 300, 7))))
     = (SELECT sum(hashtext(z::text)) FROM col_zl z WHERE id + 0 = ANY (ARRAY(SELECT generate_series(1, 300, 7))))
       AS probes_read_the_same;
BEGIN;
DECLARE col_cur SCROLL CURSOR FOR SELECT id, n, t, valid_from FROM col_zl WHERE id IN (40, 41, 42) ORDER BY id, valid_from;
FETCH LAST FROM col_cur;
FETCH BACKWARD 3 FROM col_cur;
FETCH ABSOLUTE 2 FROM col_cur;
COMMIT;
BEGIN;
DECLARE col_raw SCROLL CURSOR FOR SELECT id, n, valid_from FROM col_zl WHERE id = 42;
FETCH LAST FROM col_raw;
FETCH PRIOR FROM col_raw;
FETCH FIRST FROM col_raw;
FETCH NEXT FROM col_raw;
COMMIT;
SELECT id, n, valid_from FROM col_zl WHERE id = 42 ORDER BY valid_from;

-- reading some columns only decodes those (the rest read as NULL inside
-- the scan): the same answers
SELECT (SELECT sum(hashtext(n::text || t)) FROM col_zl WHERE i2 > 0) AS few_columns,
       (SELECT sum(hashtext(z.n::text || z.t)) FROM col_zl z WHERE z.i2 > 0 AND z::text IS NOT NULL) AS whole_rows;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM col_zl WHERE i8 > 250000000000;
SELECT count(*) FROM col_zl WHERE i8 > 250000000000;

-- late changes: versions in the middle of history are split, which masks
-- columnar rows and writes new sub-groups; a rolled-back batch leaves
-- nothing behind
CREATE TABLE col_late AS
  SELECT id, n + 1 AS n, f8, f4, i2, i8, b, 'late' AS t, vc, ch, tc, tci, by, j, arr, tarr, e, d, comp, u, dt, ts, tm, tmtz, iv, big,
         change_time - interval '12 hours' AS change_time
    FROM col_ch WHERE day = 2 AND id % 4 = 0;
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('col_zl', 'col_late');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('col_rows', 'col_late');
SELECT * FROM col_differences();
SELECT sum(masked_rows) > 0 AS columnar_rows_masked FROM zipper_lake.inspect('col_zl') WHERE format = 'columnar';
BEGIN;
SELECT col_apply(0, 0);
ROLLBACK;
SELECT * FROM col_differences();
SELECT * FROM zipper_lake.verify('col_zl');

-- ANALYZE samples columnar blocks too
ANALYZE col_zl;
SELECT attname, null_frac > 0 AS has_nulls, n_distinct <> 0 AS has_distinct
  FROM pg_stats WHERE tablename = 'col_zl' AND attname IN ('n', 'big', 'j', 'valid_from') ORDER BY attname;
SELECT reltuples = (SELECT count(*) FROM col_zl) AS reltuples_exact FROM pg_class WHERE relname = 'col_zl';

-- lz4 instead of zstd (zipper_lake.columnar_compression) for what is
-- written from now on; chunks of either codec read alike
SET zipper_lake.columnar_compression = lz4;
CREATE TABLE col_lz4 (LIKE col_zl) USING zipper_lake;
SELECT zipper_lake.register('col_lz4', ARRAY['id']);
INSERT INTO col_lz4 SELECT * FROM col_zl WHERE valid_to < 'infinity' AND id <= 150;
RESET zipper_lake.columnar_compression;
CREATE TABLE col_zstd (LIKE col_zl) USING zipper_lake;
SELECT zipper_lake.register('col_zstd', ARRAY['id']);
INSERT INTO col_zstd SELECT * FROM col_zl WHERE valid_to < 'infinity' AND id <= 150;
-- the lz4 sub-groups of the first load are larger than zstd's of the same rows
SELECT (SELECT bool_and(l.compressed_bytes > z.compressed_bytes AND l.raw_bytes = z.raw_bytes)
          FROM zipper_lake.inspect('col_lz4') l
          JOIN zipper_lake.inspect('col_zstd') z USING (partition_end, first_start)) AS lz4_larger,
       (SELECT bool_and(compressed_bytes < raw_bytes) FROM zipper_lake.inspect('col_lz4')) AS compressed;
-- the second load writes zstd, packing the small lz4 sub-groups it meets
-- (README "Packing") after reading them
INSERT INTO col_lz4 SELECT * FROM col_zl WHERE valid_to < 'infinity' AND id > 150;
SELECT (SELECT count(*) FROM ((SELECT * FROM col_lz4 EXCEPT ALL SELECT * FROM col_zl WHERE valid_to < 'infinity')
                              UNION ALL (SELECT * FROM col_zl WHERE valid_to < 'infinity' EXCEPT ALL SELECT * FROM col_lz4)) x)
       AS differences;
SELECT * FROM zipper_lake.verify('col_lz4');
SET zipper_lake.columnar_compression = snappy;

-- a short text before an int8[]: values handed out by a key probe are
-- aligned for the array's 8-byte elements
CREATE TABLE col_align (id int, t text, a int8[], valid_from timestamptz NOT NULL,
                        valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('col_align', ARRAY['id']);
INSERT INTO col_align SELECT k, left('hello', 1 + k % 5), ARRAY[k, 222, 333]::int8[],
       '2026-01-01', '2026-01-02' FROM generate_series(1, 40) k;
SELECT a[2] + a[3] AS elements, t FROM col_align WHERE id = 7;
SELECT sum(a[1] + a[2] + a[3]) FROM col_align WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8, 9);

-- min/max remember the collation they were taken under: after ALTER ...
-- COLLATE (no rewrite) they are not used, so no chunk is skipped by an
-- order it was not sorted in (ICU puts 'a2' before 'B1', "C" after it)
CREATE TABLE col_coll (id int, t text COLLATE "und-x-icu", valid_from timestamptz NOT NULL,
                       valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('col_coll', ARRAY['id']);
INSERT INTO col_coll SELECT k, CASE WHEN k % 2 = 0 THEN 'a' ELSE 'B' END || k,
       '2026-01-01', '2026-01-02' FROM generate_series(1, 64) k;
SELECT count(*) FROM col_coll WHERE t > 'Z';
ALTER TABLE col_coll ALTER COLUMN t TYPE text COLLATE "C";
SELECT count(*) FROM col_coll WHERE t > 'Z';
SELECT * FROM zipper_lake.verify('col_coll');

-- columnar rows are no heap tuples: xmin and the like are refused; ctid
-- and tableoid are there
SELECT xmin FROM col_zl WHERE id = 1;
SELECT count(DISTINCT ctid) = count(*) AS distinct_ctids, count(DISTINCT tableoid) FROM col_zl;

-- the history format is an option: rows from now on, and back
SELECT zipper_lake.set_history_format('col_zl', 'rows');
CREATE TABLE col_day4 AS SELECT id, n, t, change_time + interval '1 day' AS change_time FROM col_ch WHERE day = 3;
SELECT changes FROM zipper_lake.apply_changes('col_zl', 'col_day4', missing_columns => 'keep');
SELECT format, count(*) > 0 AS present FROM zipper_lake.inspect('col_zl') WHERE partition_end <> 'infinity'
 GROUP BY format ORDER BY format;
SELECT zipper_lake.set_history_format('col_zl', 'columnar');
SELECT * FROM zipper_lake.verify('col_zl');
-- bad formats are refused
SELECT zipper_lake.set_history_format('col_zl', 'parquet');
SELECT zipper_lake.set_history_format('col_zl', NULL);
CREATE TABLE col_bad (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('col_bad', ARRAY['id'], history_format => 'orc');
SELECT count(*) FROM zipper_lake.registration WHERE tbl = 'col_bad'::regclass;

-- space: the columnar history of a table that changes every day reuses
-- the blocks of the current sub-groups it replaced
CREATE TABLE col_churn (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('col_churn', ARRAY['id']);
CREATE TABLE col_churn_ch (id int, v int, change_time timestamptz);
CREATE FUNCTION col_churn_days(first_day int, last_day int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR d IN first_day .. last_day LOOP
    TRUNCATE col_churn_ch;
    INSERT INTO col_churn_ch SELECT k, d, '2026-01-01'::timestamptz + d * interval '1 day' FROM generate_series(1, 3000) k;
    PERFORM zipper_lake.apply_changes('col_churn', 'col_churn_ch');
  END LOOP;
END $$;
SELECT col_churn_days(1, 3);
SELECT pg_relation_size('col_churn') / 8192 AS blocks_before \gset
-- the blocks days 1-3 freed are written again once no snapshot can see
-- them: wait out other sessions' snapshots (autovacuum's) first
DO $$
BEGIN
  FOR i IN 1..400 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
                           AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL);
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT col_churn_days(4, 11);
SELECT count(*) AS versions, count(DISTINCT v) AS days FROM col_churn;
SELECT count(*) > 0 AS history_in_reused_blocks FROM zipper_lake.inspect('col_churn')
 WHERE format = 'columnar' AND first_block < :blocks_before AND partition_end >= '2026-01-05';
SELECT * FROM zipper_lake.verify('col_churn');
