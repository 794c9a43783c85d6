-- Inside a sub-group of many blocks, a bounded scan binary-searches the
-- block where valid_from >= its lower bound can begin and stops at the
-- first row past its upper bound (README, Pruning).  Every lookup is
-- compared with a heap table loaded from the same generator, at every
-- valid_from of the data, between rows, at block boundaries and beyond
-- both ends.
SET timezone = 'UTC';

-- 2600 keys, each a closed version (valid_from on 2026-03-01, valid_to on
-- 2026-03-02: one history sub-group) followed by an open one (valid_from
-- on 2026-03-02: one current sub-group).  valid_from repeats in runs of 4,
-- and keys 1001-1300 (history) and every tenth key (current) share one
-- valid_from, so equal starts fill several blocks in a row.
CREATE FUNCTION search_gen() RETURNS TABLE (id int, v int, note text, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql IMMUTABLE AS $$
  SELECT k, k % 13, md5(k::text), f, t
    FROM generate_series(1, 2600) k,
         LATERAL (SELECT '2026-03-01 00:00+00'::timestamptz
                           + CASE WHEN k BETWEEN 1001 AND 1300 THEN 2500 ELSE k / 4 * 10 END * interval '1 second' AS f,
                         '2026-03-02 00:00+00'::timestamptz
                           + CASE WHEN k % 10 = 0 THEN 43200 ELSE k * 37 % 1300 * 30 END * interval '1 second' AS t) x
  UNION ALL
  SELECT k, k % 7, md5((-k)::text), t, 'infinity'
    FROM generate_series(1, 2600) k,
         LATERAL (SELECT '2026-03-02 00:00+00'::timestamptz
                           + CASE WHEN k % 10 = 0 THEN 43200 ELSE k * 37 % 1300 * 30 END * interval '1 second' AS t) x
$$;

CREATE TABLE search_zl (id int, v int, note text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
-- history in rows: their blocks are what is searched (the columnar run
-- at the end searches chunks instead)
SELECT zipper_lake.register('search_zl', ARRAY['id'], history_format => 'rows');
INSERT INTO search_zl SELECT * FROM search_gen();
CREATE TABLE search_ref AS SELECT * FROM search_gen();
CREATE INDEX ON search_ref (valid_from);
CREATE INDEX ON search_ref (id, valid_from);
ANALYZE search_zl, search_ref;

-- one sub-group of at least 25 blocks in each partition
SELECT partition_end, first_start, last_start, row_count, blocks >= 25 AS many_blocks
  FROM zipper_lake.inspect('search_zl') ORDER BY partition_end;
SELECT count(*) FROM zipper_lake.verify('search_zl');

-- the blocks of both sub-groups, with their first and last valid_from;
-- runs of one valid_from go on from block to block
CREATE TABLE search_block AS
  SELECT (ctid::text::point)[0]::int AS block, min(valid_from) AS first_from, max(valid_from) AS last_from
    FROM search_zl GROUP BY 1;
SELECT count(*) AS blocks, count(*) FILTER (WHERE b.first_from = p.last_from) AS blocks_continuing_a_run
  FROM search_block b LEFT JOIN search_block p ON p.block = b.block - 1;
-- probe times: every valid_from, a microsecond before and after each, and
-- times before, between and after the sub-groups
CREATE TABLE search_probe AS
  SELECT DISTINCT valid_from + d AS t
    FROM search_ref, unnest(ARRAY[interval '0', interval '-1 microsecond', interval '1 microsecond']) d
  UNION
  SELECT unnest(ARRAY['2026-02-28 23:00+00', '2026-03-01 00:00+00', '2026-03-01 23:59:59.999999+00',
                      '2026-03-02 00:00+00', '2026-03-02 23:59:59.999999+00', '2026-03-03 00:00+00'])::timestamptz;
-- range probes: the block boundaries, and around them
CREATE TABLE search_edge AS
  SELECT DISTINCT t + d AS t
    FROM search_block, unnest(ARRAY[first_from, last_from]) t,
         unnest(ARRAY[interval '0', interval '-1 microsecond', interval '1 microsecond']) d
  UNION
  SELECT unnest(ARRAY['2026-02-28 23:00+00', '2026-03-03 00:00+00'])::timestamptz;
SELECT (SELECT count(*) FROM search_probe) AS probes, (SELECT count(*) FROM search_edge) AS edge_probes;

-- For each probe row p, the condition selects rows r of the zipper table
-- and of the reference; a probe matches when both give the same count,
-- sum of keys and sum of hashes of note (which tells every row from every
-- other).  The probe is an outer reference of a lateral subquery, so each
-- probe rescans with new bounds; zipper_scan says the condition became
-- the ZipperScan's bounds.
CREATE FUNCTION search_compare(probe_query text, cond text, tbl text DEFAULT 'search_zl',
    OUT probes bigint, OUT answer_rows bigint, OUT mismatches bigint, OUT zipper_scan boolean)
LANGUAGE plpgsql AS $$
DECLARE
  q text := 'SELECT p.*, a.* FROM (%s) p, LATERAL (SELECT count(*) AS n, sum(r.id) AS ids,'
            ' sum(hashtext(r.note)) AS notes FROM %I r WHERE %s) a';
  line text;
BEGIN
  zipper_scan := false;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || format(q, probe_query, tbl, cond) LOOP
    zipper_scan := zipper_scan OR line LIKE '%Zipper Bounds:%';
  END LOOP;
  EXECUTE format('WITH z AS MATERIALIZED (%s), h AS MATERIALIZED (%s)
                  SELECT (SELECT count(*) FROM z), (SELECT sum(n) FROM z),
                         (SELECT count(*) FROM ((TABLE z EXCEPT ALL TABLE h) UNION ALL (TABLE h EXCEPT ALL TABLE z)) d)',
                 format(q, probe_query, tbl, cond), format(q, probe_query, 'search_ref', cond))
    INTO probes, answer_rows, mismatches;
END $$;

-- point lookups by valid_from, and by key and valid_from
SELECT * FROM search_compare('SELECT t FROM search_probe', 'r.valid_from = p.t');
SELECT * FROM search_compare('SELECT id AS k, valid_from + d AS t FROM search_ref,
                                unnest(ARRAY[interval ''0'', interval ''-1 microsecond'', interval ''1 microsecond'']) d',
                             'r.id = p.k AND r.valid_from = p.t');
-- another key's valid_from: the key is checked after the search
SELECT * FROM search_compare('SELECT id % 2600 + 1 AS k, valid_from AS t FROM search_ref',
                             'r.id = p.k AND r.valid_from = p.t');
-- ranges from the block boundaries
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from >= p.t');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from > p.t');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from <= p.t');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from < p.t');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from BETWEEN p.t AND p.t + interval ''3 minutes''');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from > p.t AND r.valid_from < p.t + interval ''20 seconds''');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from BETWEEN p.t - interval ''5 minutes'' AND p.t');
SELECT * FROM search_compare('SELECT id AS k, t FROM search_edge, unnest(ARRAY[7, 1000, 1301]) id',
                             'r.id = p.k AND r.valid_from >= p.t');
-- with bounds on valid_to too, rows of one valid_from are not all kept:
-- the scan must not stop at the first one that fails
SELECT * FROM search_compare('SELECT t FROM search_edge',
                             'r.valid_from BETWEEN p.t AND p.t + interval ''2 minutes'' AND r.valid_to < ''2026-03-02 05:00''');
SELECT * FROM search_compare('SELECT t FROM search_probe', 'r.valid_from = p.t AND r.valid_to >= ''2026-03-02 06:00''');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from <= p.t AND r.valid_to > p.t + interval ''1 day''');
-- an OR of the two columns: rows before the valid_from range qualify by
-- valid_to, so no search skips them
SELECT * FROM search_compare('SELECT t FROM search_edge',
                             '(r.valid_from >= p.t AND r.valid_from < p.t + interval ''3 minutes'')
                              OR (r.valid_to >= ''2026-03-02 01:00'' AND r.valid_to < ''2026-03-02 01:30'')');

-- a point lookup reads the pages of its binary search (5 of 30), the
-- pages holding its rows, the one after them, and the metapage (whose
-- change counter tells whether the backend's list of sub-groups is still
-- current, README "Key access"; read again for the masks of the sub-groups
-- a key probe reads): far fewer than the sub-group.  The blocks
-- read come from the table's statistics counters of the running
-- transaction; the lookup runs twice and the second run is counted, after
-- the first has cached the metapage's storage id.
CREATE FUNCTION search_pages(t timestamptz, with_key boolean, OUT pages bigint, OUT answer_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
  q text := format('SELECT count(*) FROM search_zl WHERE %s valid_from = %L',
                   CASE WHEN with_key THEN 'id = 1200 AND' ELSE '' END, t);
  before bigint;
BEGIN
  EXECUTE q INTO answer_rows;
  before := pg_stat_get_xact_blocks_fetched('search_zl'::regclass);
  EXECUTE q INTO answer_rows;
  pages := pg_stat_get_xact_blocks_fetched('search_zl'::regclass) - before;
END $$;
-- (pages_read is exact: a search that stops a step early or late reads
-- one page more here and there; reading whole sub-groups, about 15000)
SELECT count(*) AS lookups, sum(s.answer_rows) AS answer_rows, sum(s.pages) AS pages_read,
       count(*) FILTER (WHERE s.pages > 7 + (SELECT count(*) FROM search_block b
                                              WHERE e.t BETWEEN b.first_from AND b.last_from)) AS too_many_pages
  FROM search_edge e, unnest(ARRAY[false, true]) with_key, LATERAL search_pages(e.t, with_key) s;
-- the first and last valid_from of the history sub-group, one inside it,
-- the longest run of one valid_from, and a time between two rows
SELECT t, s.* FROM unnest(ARRAY['2026-03-01 00:00:00+00', '2026-03-01 01:48:20+00', '2026-03-01 01:00:00+00',
                                '2026-03-01 00:41:40+00', '2026-03-01 01:00:05+00']::timestamptz[]) t,
                   LATERAL search_pages(t, false) s;
EXPLAIN (COSTS OFF) SELECT count(*) FROM search_zl WHERE id = 1200 AND valid_from = '2026-03-01 00:41:40+00';

-- The same data with columnar history (README "Storage formats") in
-- chunks of 100 rows: a bounded scan skips the chunks whose valid_from and
-- valid_to ranges miss its bounds and stops at the first chunk past them.
-- Every comparison again, against the same reference.
SET zipper_lake.columnar_chunk_rows = 100;
CREATE TABLE search_zc (LIKE search_zl) USING zipper_lake;
SELECT zipper_lake.register('search_zc', ARRAY['id']);
INSERT INTO search_zc SELECT * FROM search_gen();
RESET zipper_lake.columnar_chunk_rows;
SELECT partition_end, format, row_count FROM zipper_lake.inspect('search_zc') ORDER BY partition_end;
SELECT count(*) FROM zipper_lake.verify('search_zc');
SELECT * FROM search_compare('SELECT t FROM search_probe', 'r.valid_from = p.t', 'search_zc');
SELECT * FROM search_compare('SELECT id AS k, valid_from + d AS t FROM search_ref,
                                unnest(ARRAY[interval ''0'', interval ''-1 microsecond'', interval ''1 microsecond'']) d',
                             'r.id = p.k AND r.valid_from = p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from >= p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from > p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from <= p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from < p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from BETWEEN p.t AND p.t + interval ''3 minutes''', 'search_zc');
SELECT * FROM search_compare('SELECT id AS k, t FROM search_edge, unnest(ARRAY[7, 1000, 1301]) id',
                             'r.id = p.k AND r.valid_from >= p.t', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge',
                             'r.valid_from BETWEEN p.t AND p.t + interval ''2 minutes'' AND r.valid_to < ''2026-03-02 05:00''', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge', 'r.valid_from <= p.t AND r.valid_to > p.t + interval ''1 day''', 'search_zc');
SELECT * FROM search_compare('SELECT t FROM search_edge',
                             '(r.valid_from >= p.t AND r.valid_from < p.t + interval ''3 minutes'')
                              OR (r.valid_to >= ''2026-03-02 01:00'' AND r.valid_to < ''2026-03-02 01:30'')', 'search_zc');
-- a lookup of the longest run of one valid_from (301 rows) reads the 4
-- chunks holding it, skips the 9 before by their min/max and stops at
-- the next (EXPLAIN ANALYZE counts it as skipped) of 26
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  SELECT count(*) FROM search_zc WHERE valid_from = '2026-03-01 00:41:40+00' AND valid_to < 'infinity';
