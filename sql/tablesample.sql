-- TABLESAMPLE (README "Sampling"): SYSTEM picks blocks, BERNOULLI
-- rows; a zipper table's blocks are its sub-groups' pages, a columnar
-- sub-group's block standing for its share of the rows.  A sample holds only
-- rows the query's snapshot sees: never a masked (replaced) version nor a
-- row of a rolled-back write; a transaction's own writes, yes.
SET timezone = 'UTC';
CREATE TABLE ts (id int, grp int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ts', ARRAY['id']);
-- day 1: 3000 keys; VACUUM writes their open versions columnar
INSERT INTO ts SELECT g, g % 7, 'v' || g, '2026-01-01', 'infinity' FROM generate_series(1, 3000) g;
VACUUM ts;
-- day 2: a third change (columnar history, masked current rows, new current rows)
CREATE TABLE ts_ch (id int, grp int, v text, change_time timestamptz);
INSERT INTO ts_ch SELECT g, g % 7, 'w' || g, '2026-01-02' FROM generate_series(1, 3000, 3) g;
SELECT changes, closed, inserted FROM zipper_lake.apply_changes('ts', 'ts_ch');
-- a rolled-back write leaves blocks that hold nothing visible
BEGIN;
INSERT INTO ts SELECT g, 0, 'gone', '2026-01-03', 'infinity' FROM generate_series(5001, 6000) g;
ROLLBACK;
SELECT format, partition_end IS NULL OR partition_end = 'infinity' AS current, count(*) AS subgroups,
       sum(masked_rows) > 0 AS masked
  FROM zipper_lake.inspect('ts') GROUP BY 1, 2 ORDER BY 1, 2;

-- the plan is PostgreSQL's Sample Scan, not the ZipperScan
EXPLAIN (COSTS OFF) SELECT * FROM ts TABLESAMPLE SYSTEM (10) WHERE valid_to = 'infinity';

-- 100 percent is the whole table, both methods: every visible row once
SELECT count(*) AS differences FROM (
  (SELECT * FROM ts TABLESAMPLE SYSTEM (100) EXCEPT ALL SELECT * FROM ts)
  UNION ALL (SELECT * FROM ts EXCEPT ALL SELECT * FROM ts TABLESAMPLE SYSTEM (100))) d;
SELECT count(*) AS differences FROM (
  (SELECT * FROM ts TABLESAMPLE BERNOULLI (100) EXCEPT ALL SELECT * FROM ts)
  UNION ALL (SELECT * FROM ts EXCEPT ALL SELECT * FROM ts TABLESAMPLE BERNOULLI (100))) d;
SELECT count(*) AS rows, count(*) FILTER (WHERE v = 'gone') AS rolled_back
  FROM ts TABLESAMPLE BERNOULLI (100);
-- 0 percent is nothing
SELECT count(*) FROM ts TABLESAMPLE SYSTEM (0);
SELECT count(*) FROM ts TABLESAMPLE BERNOULLI (0);

-- a part: rows of the table, each at most once, about the share asked, the
-- same rows again with the same seed
CREATE FUNCTION sample_part(sampling text)
RETURNS TABLE (share numeric, each_once boolean, not_in_table bigint, not_repeated bigint)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TEMP TABLE s1 AS SELECT * FROM ts TABLESAMPLE %s', sampling);
  EXECUTE format('CREATE TEMP TABLE s2 AS SELECT * FROM ts TABLESAMPLE %s', sampling);
  RETURN QUERY SELECT round(count(*) / 4000.0, 1),
       count(*) = count(DISTINCT (s1.id, s1.valid_from)),
       (SELECT count(*) FROM (SELECT * FROM s1 EXCEPT ALL SELECT * FROM ts) x),
       (SELECT count(*) FROM ((SELECT * FROM s1 EXCEPT ALL SELECT * FROM s2)
                              UNION ALL (SELECT * FROM s2 EXCEPT ALL SELECT * FROM s1)) x)
  FROM s1;
  DROP TABLE s1, s2;
END $$;
SELECT share BETWEEN 0.2 AND 0.4 AS about_30_percent, each_once, not_in_table, not_repeated
  FROM sample_part('BERNOULLI (30) REPEATABLE (7)');
SELECT share > 0 AND share < 1 AS a_part, each_once, not_in_table, not_repeated
  FROM sample_part('SYSTEM (50) REPEATABLE (3)');
-- a filter on top of the sample
SELECT count(*) AS differences FROM (
  (SELECT * FROM ts TABLESAMPLE SYSTEM (100) WHERE valid_to = 'infinity' AND grp = 3
   EXCEPT ALL SELECT * FROM ts WHERE valid_to = 'infinity' AND grp = 3)
  UNION ALL (SELECT * FROM ts WHERE valid_to = 'infinity' AND grp = 3
   EXCEPT ALL SELECT * FROM ts TABLESAMPLE SYSTEM (100) WHERE valid_to = 'infinity' AND grp = 3)) d;

-- a transaction samples its own writes, and its snapshot's rows only
BEGIN;
INSERT INTO ts SELECT g, 1, 'mine', '2026-01-04', 'infinity' FROM generate_series(7001, 7100) g;
SELECT count(*) FILTER (WHERE v = 'mine') AS own_rows, count(*) AS rows FROM ts TABLESAMPLE SYSTEM (100);
ROLLBACK;

-- a rescan (the inner side of a nested loop) samples again from the start
SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_material = off;
SELECT count(*) FROM (VALUES (1), (2)) v(n), LATERAL (SELECT * FROM ts TABLESAMPLE SYSTEM (100) REPEATABLE (1)) s;
RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_material;
SELECT * FROM zipper_lake.verify('ts');

-- narrow rows compress well: a columnar block may stand for more rows than
-- a block has offsets (2048); the method gets them in slices, every row
-- can be picked
CREATE TABLE ts_narrow (id int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ts_narrow', ARRAY['id']);
INSERT INTO ts_narrow SELECT g, '2026-01-01', 'infinity' FROM generate_series(1, 9000) g;
VACUUM ts_narrow;
SELECT format, row_count, row_count / blocks > 2048 AS over_2048_a_block FROM zipper_lake.inspect('ts_narrow');
SELECT (SELECT count(*) FROM ts_narrow TABLESAMPLE BERNOULLI (100)) AS bernoulli_all,
       (SELECT count(*) FROM ts_narrow TABLESAMPLE SYSTEM (100)) AS system_all,
       (SELECT count(*) FROM ts_narrow TABLESAMPLE BERNOULLI (50) REPEATABLE (1)) BETWEEN 4000 AND 5000
         AS bernoulli_about_half,
       (SELECT max(id) FROM ts_narrow TABLESAMPLE BERNOULLI (50) REPEATABLE (1)) > 8000 AS reaches_the_end;
DROP TABLE ts, ts_ch, ts_narrow;
DROP FUNCTION sample_part(text);
