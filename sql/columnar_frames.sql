-- Columnar chunk columns in frames (README "Storage formats"): a zstd chunk
-- column of 2 kB or more and more than 256 rows is cut into independent
-- frames, its head (null bitmap, dictionary, PACKED header) and every 256
-- rows' values, so a key probe decompresses the head and its row's frame.  Probes read the
-- rows a scan reads and a table whose history stays in rows holds: the
-- first and last row of every frame, NULLs there, wide values, every
-- encoding (PACKED, DELTA, DICT, PLAIN fixed and variable length).
SET timezone = 'UTC';
\set VERBOSITY terse
CREATE TABLE fr_zl (
  id int,
  p int8,           -- PACKED (17 bits), NULL at the first row of each frame
  q int8,           -- PACKED without NULLs: its head (16 bytes) is stored as it is
  rnd int8,         -- PACKED, random values and NULLs: not compressed
  h int8,           -- PLAIN pass-by-value, random: not compressed
  d int8,           -- DELTA (sorted, 2-byte varints), NULL at some rows
  c text,           -- DICT (200 long values: the dictionary fills the head)
  w text,           -- PLAIN varlena, wide now and then, NULL at the last row of each frame
  f float8,         -- PLAIN pass-by-value (every bit used)
  b bool,           -- PLAIN of one byte
  n numeric,        -- PLAIN varlena, short
  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE fr_rows (LIKE fr_zl) USING zipper_lake;
SELECT zipper_lake.register('fr_zl', ARRAY['id']);
SELECT zipper_lake.register('fr_rows', ARRAY['id'], history_format => 'rows');

-- 3000 keys on three days, key k changing at second k of the day, so a
-- day's history holds the keys in order: key k at row k - 1, rows 0, 256,
-- 512 and 768 of a chunk of 1,024 starting its frames
CREATE TABLE fr_ch AS
  SELECT k AS id,
         CASE WHEN k % 256 = 1 THEN NULL ELSE (k % 50) * 2000 + day END AS p,
         (k % 60) * 2000 + day AS q,
         CASE WHEN k % 256 = 1 OR hashtext(k::text) % 5 = 0 THEN NULL
              ELSE abs(hashtextextended(k::text, 7 + day)) % 1000003 END AS rnd,
         hashtextextended(k::text, day) AS h,
         CASE WHEN k % 128 = 64 OR k % 256 = 2 THEN NULL ELSE k::int8 * 8000 + day END AS d,
         CASE WHEN k % 11 = 0 THEN NULL
              ELSE 'category of a fair length, number ' || ((k + day) % 200) END AS c,
         CASE WHEN k % 256 = 0 THEN NULL
              WHEN k % 97 = 0 THEN repeat(md5((k * day)::text), 100)
              ELSE 'value ' || k || ' ' || md5((k + day)::text) END AS w,
         sin(k + day) * 1e6 AS f,
         CASE WHEN k % 5 = 0 THEN NULL ELSE (k + day) % 3 = 0 END AS b,
         round((k * day) / 7.0, 2) AS n,
         timestamptz '2026-01-01' + day * interval '1 day' + k * interval '1 second' AS change_time,
         day
    FROM generate_series(1, 3000) k, generate_series(0, 2) day;

-- each day's changes of every keys_every-th key, into each of tables
CREATE FUNCTION fr_apply(first_day int, last_day int, tables text[] DEFAULT '{fr_zl,fr_rows}',
                         keys_every int DEFAULT 1) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  batch_day int;
  tbl text;
BEGIN
  FOR batch_day IN first_day .. last_day LOOP
    DROP TABLE IF EXISTS fr_batch;
    CREATE TEMP TABLE fr_batch AS SELECT * FROM fr_ch WHERE day = batch_day AND id % keys_every = 0;
    ALTER TABLE fr_batch DROP COLUMN day;
    FOREACH tbl IN ARRAY tables LOOP
      PERFORM zipper_lake.apply_changes(tbl::regclass, 'fr_batch');
    END LOOP;
  END LOOP;
END $$;
SET client_min_messages = warning;
SELECT fr_apply(0, 2);
-- two days of history in columnar sub-groups of 3000 rows each
SELECT format, count(*) AS sub_groups, sum(row_count) AS rows
  FROM zipper_lake.inspect('fr_zl') WHERE partition_end <> 'infinity' GROUP BY format;
SELECT * FROM zipper_lake.verify('fr_zl');

-- a scan reads what the rows table holds
SELECT count(*) AS scan_differences
  FROM ((SELECT z::text FROM fr_zl z EXCEPT ALL SELECT r::text FROM fr_rows r)
        UNION ALL (SELECT r::text FROM fr_rows r EXCEPT ALL SELECT z::text FROM fr_zl z)) x;

-- each key around the frames' and chunks' first and last rows, probed on
-- its own: the history of the key, as the rows table has it
CREATE TABLE fr_keys AS
  SELECT unnest(ARRAY[1, 2, 3, 255, 256, 257, 258, 511, 512, 513, 514, 767, 768, 769, 770,
                      1023, 1024, 1025, 1026, 1279, 1280, 1281, 1282, 2048, 2049, 2050,
                      2304, 2305, 2306, 2910, 2999, 3000]) AS id;
CREATE FUNCTION fr_probe_differences(key int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM ((SELECT z::text FROM fr_zl z WHERE id = key
                         EXCEPT ALL SELECT r::text FROM fr_rows r WHERE id = key)
                        UNION ALL (SELECT r::text FROM fr_rows r WHERE id = key
                                   EXCEPT ALL SELECT z::text FROM fr_zl z WHERE id = key)) x
$$;
SELECT count(*) AS keys, sum(fr_probe_differences(id)) AS differences,
       sum((SELECT count(*) FROM fr_zl z WHERE z.id = k.id)) AS versions
  FROM fr_keys k;
-- the probe plan reads them
EXPLAIN (COSTS OFF) SELECT * FROM fr_zl WHERE id = 256;
-- a key's history in full: NULLs at a frame's first row (p, rnd) and last (w)
SELECT id, p, q, rnd, h, d, left(c, 20) AS c, left(w, 12) AS w, length(w) AS w_len, round(f::numeric, 3) AS f, b, n,
       valid_from, valid_to
  FROM fr_zl WHERE id = 257 ORDER BY valid_from;
SELECT id, p, q, rnd, h, d, left(c, 20) AS c, left(w, 12) AS w, length(w) AS w_len, b, n, valid_from
  FROM fr_zl WHERE id = 256 ORDER BY valid_from;
-- a wide value (3,200 bytes) in the last frame of a chunk, day 0's and day 1's
SELECT id, length(w) AS w_len, md5(w) = md5(repeat(md5((id * (valid_from::date - '2026-01-01'))::text), 100))
       AS that_days_value, valid_from
  FROM fr_zl WHERE id = 2910 AND valid_from < '2026-01-02 01:00' ORDER BY valid_from;

-- all of them in one probe (ascending, so a walk goes on within a frame
-- and jumps to the next), and by a scan
SELECT (SELECT sum(hashtext(z::text)) FROM fr_zl z WHERE id = ANY (ARRAY(SELECT id FROM fr_keys)))
     = (SELECT sum(hashtext(z::text)) FROM fr_zl z WHERE id + 0 = ANY (ARRAY(SELECT id FROM fr_keys)))
       AS probes_read_the_same,
       (SELECT sum(hashtext(z::text)) FROM fr_zl z WHERE id = ANY (ARRAY(SELECT id FROM fr_keys)))
     = (SELECT sum(hashtext(r::text)) FROM fr_rows r WHERE id = ANY (ARRAY(SELECT id FROM fr_keys)))
       AS as_the_rows_table;
-- every key, several in a frame
SELECT (SELECT sum(hashtext(z::text)) FROM fr_zl z WHERE id = ANY (ARRAY(SELECT generate_series(1, 3000, 3))))
     = (SELECT sum(hashtext(r::text)) FROM fr_rows r WHERE id = ANY (ARRAY(SELECT generate_series(1, 3000, 3))))
       AS every_third_key;
-- backward: a cursor read back over rows of different frames
BEGIN;
DECLARE fr_cur SCROLL CURSOR FOR
  SELECT id, p, rnd, d, length(w) AS w_len, b, valid_from FROM fr_zl
   WHERE id IN (255, 256, 257, 1024, 1025) ORDER BY id, valid_from;
FETCH LAST FROM fr_cur;
FETCH BACKWARD 4 FROM fr_cur;
FETCH ABSOLUTE 1 FROM fr_cur;
COMMIT;
-- point lookups (key and time) on a frame's first and last rows
SELECT id, p, q, rnd, h, d, left(w, 12) AS w, n FROM fr_zl
 WHERE id IN (256, 257, 768, 769) AND valid_from <= '2026-01-02 00:10' AND valid_to > '2026-01-02 00:10'
 ORDER BY id;

-- lz4 cuts chunk columns into frames of 64 rows, from 512 raw bytes
-- (zipper_lake.columnar_compression for history; a columnar current
-- partition is always lz4): days 0 and 1, VACUUM writing the open versions
-- columnar, then every third key of day 2 (keys 129, 321, 1089 on a frame's
-- first row), whose apply reads the stored versions of its keys frame by
-- frame; a rows table takes the same batches
SET zipper_lake.columnar_compression = lz4;
CREATE TABLE fr_lz4 (LIKE fr_zl) USING zipper_lake;
CREATE TABLE fr_lz4_rows (LIKE fr_zl) USING zipper_lake;
SELECT zipper_lake.register('fr_lz4', ARRAY['id']);
SELECT zipper_lake.register('fr_lz4_rows', ARRAY['id'], history_format => 'rows');
SELECT fr_apply(0, 1, '{fr_lz4,fr_lz4_rows}');
VACUUM fr_lz4;
SELECT partition_end = 'infinity' AS current, format, count(*) AS sub_groups, sum(row_count) AS rows
  FROM zipper_lake.inspect('fr_lz4') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT fr_apply(2, 2, '{fr_lz4,fr_lz4_rows}', keys_every => 3);
RESET zipper_lake.columnar_compression;
SELECT count(*) AS scan_differences
  FROM ((SELECT z::text FROM fr_lz4 z EXCEPT ALL SELECT r::text FROM fr_lz4_rows r)
        UNION ALL (SELECT r::text FROM fr_lz4_rows r EXCEPT ALL SELECT z::text FROM fr_lz4 z)) x;
SELECT (SELECT sum(hashtext(z::text)) FROM fr_lz4 z WHERE id = ANY (ARRAY(SELECT generate_series(1, 3000, 2))))
     = (SELECT sum(hashtext(r::text)) FROM fr_lz4_rows r WHERE id = ANY (ARRAY(SELECT generate_series(1, 3000, 2))))
       AS every_other_key,
       (SELECT sum(hashtext(z::text)) FROM fr_lz4 z WHERE id = ANY (ARRAY(SELECT id FROM fr_keys)))
     = (SELECT sum(hashtext(r::text)) FROM fr_lz4_rows r WHERE id = ANY (ARRAY(SELECT id FROM fr_keys)))
       AS frame_edges;
-- each key around the first and last rows of lz4's frames, probed on its own
SELECT count(*) AS keys,
       sum((SELECT count(*) FROM ((SELECT z::text FROM fr_lz4 z WHERE z.id = k.id
                                   EXCEPT ALL SELECT r::text FROM fr_lz4_rows r WHERE r.id = k.id)
                                  UNION ALL (SELECT r::text FROM fr_lz4_rows r WHERE r.id = k.id
                                             EXCEPT ALL SELECT z::text FROM fr_lz4 z WHERE z.id = k.id)) x))
         AS differences,
       sum((SELECT count(*) FROM fr_lz4 z WHERE z.id = k.id)) AS versions
  FROM unnest(ARRAY[1, 63, 64, 65, 66, 127, 128, 129, 130, 192, 193, 320, 321, 960, 961,
                    1024, 1025, 1088, 1089, 2048, 2049, 2112, 2113, 3000]) AS k(id);
SELECT * FROM zipper_lake.verify('fr_lz4');

DROP TABLE fr_zl, fr_rows, fr_ch, fr_keys, fr_lz4, fr_lz4_rows;
DROP FUNCTION fr_apply(int, int, text[], int);
