-- Packing small history sub-groups (README "Storage formats", "Packing"):
-- many small batches ending versions on one day leave a few sub-groups
-- per window of that day's partition, not one per batch, and the table
-- holds exactly what one batch of the same changes gives.
SET timezone = 'UTC';
CREATE SCHEMA packing;
SET search_path = packing, public;

-- 240 keys open since one of 4 days (4 windows of the 1-day span)
CREATE TABLE start_rows (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);
INSERT INTO start_rows
SELECT k, 0, '2024-01-01'::timestamptz + (k % 4) * interval '1 day' + interval '1 hour', 'infinity'
  FROM generate_series(1, 240) k;

-- 16 batches on 2024-02-01, 30 keys each: updates, deletes, and from the
-- 5th batch on late changes inside the earlier batches' times, which end
-- again versions the earlier batches stored (their rows get masked)
CREATE TABLE ch (id int, v int, change_time timestamptz, op text, batch int);
INSERT INTO ch
SELECT k, b, '2024-02-01'::timestamptz + b * interval '20 minutes'
             - CASE WHEN b >= 5 AND k % 3 = 0 THEN interval '50 minutes' ELSE interval '0' END
             + (k % 7) * interval '1 second',
       CASE WHEN (k + b) % 11 = 0 THEN 'D' ELSE 'U' END, b
  FROM generate_series(1, 16) b,
       LATERAL (SELECT ((b * 37 + i * 8) % 240) + 1 AS k FROM generate_series(1, 30) i) keys;
SELECT count(*) AS changes, count(DISTINCT (id, batch)) = count(*) AS one_change_a_key_a_batch FROM ch;

CREATE FUNCTION apply_in_batches(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR b IN 1..16 LOOP
    DROP TABLE IF EXISTS one_batch;
    CREATE TEMP TABLE one_batch AS SELECT id, v, change_time, op FROM ch WHERE batch = b;
    PERFORM zipper_lake.apply_changes(tbl, 'one_batch');
  END LOOP;
END $$;

-- each history format, applied in 16 batches and in one
CREATE TABLE zc (LIKE start_rows) USING zipper_lake;
SELECT zipper_lake.register('zc', ARRAY['id']);
CREATE TABLE zr (LIKE start_rows) USING zipper_lake;
SELECT zipper_lake.register('zr', ARRAY['id'], history_format => 'rows');
CREATE TABLE zc_once (LIKE start_rows) USING zipper_lake;
SELECT zipper_lake.register('zc_once', ARRAY['id']);
INSERT INTO zc SELECT * FROM start_rows;
INSERT INTO zr SELECT * FROM start_rows;
INSERT INTO zc_once SELECT * FROM start_rows;
SELECT apply_in_batches('zc');
SELECT apply_in_batches('zr');
CREATE TABLE all_changes AS SELECT id, v, change_time, op FROM ch;
SELECT changes, inserted, closed, deleted FROM zipper_lake.apply_changes('zc_once', 'all_changes');

-- the same versions whatever the batching and the format
SELECT (SELECT count(*) FROM (TABLE zc EXCEPT ALL TABLE zc_once) d) AS only_batched,
       (SELECT count(*) FROM (TABLE zc_once EXCEPT ALL TABLE zc) d) AS only_once,
       (SELECT count(*) FROM (TABLE zr EXCEPT ALL TABLE zc_once) d) AS only_rows_format,
       (SELECT count(*) FROM (TABLE zc_once EXCEPT ALL TABLE zr) d) AS missing_in_rows_format,
       (SELECT count(*) FROM zc) AS versions;
SELECT * FROM zipper_lake.verify('zc');
SELECT * FROM zipper_lake.verify('zr');

-- the day's partition: every window written by up to 16 batches holds at
-- most log2(16) + 1 small sub-groups (one a batch without packing)
SELECT t, format, count(DISTINCT window_start) AS windows, count(*) AS subgroups,
       max(per_window) AS most_in_a_window, max(per_window) <= 5 AS packed, sum(masked_rows) AS masked
  FROM (SELECT 'zc' AS t, * FROM zipper_lake.inspect('zc') UNION ALL
        SELECT 'zr', * FROM zipper_lake.inspect('zr')) i,
       LATERAL (SELECT count(*) AS per_window FROM zipper_lake.inspect(i.t::regclass) j
                 WHERE j.partition_end = i.partition_end AND j.window_start = i.window_start) w
 WHERE partition_end = '2024-02-01'
 GROUP BY t, format ORDER BY t;
-- loads pack too: two INSERTs of versions ending on one day, one window
CREATE TABLE zl (LIKE start_rows) USING zipper_lake;
SELECT zipper_lake.register('zl', ARRAY['id']);
INSERT INTO zl SELECT k, 1, '2024-03-01 01:00', '2024-03-02 01:00' FROM generate_series(1, 10) k;
INSERT INTO zl SELECT k, 1, '2024-03-01 02:00', '2024-03-02 02:00' FROM generate_series(11, 20) k;
SELECT partition_end, window_start, row_count, first_start, last_start FROM zipper_lake.inspect('zl');
-- a smaller write leaves a bigger sub-group alone (binary-counter policy)
INSERT INTO zl SELECT k, 1, '2024-03-01 03:00', '2024-03-02 03:00' FROM generate_series(21, 25) k;
SELECT partition_end, window_start, row_count, first_start, last_start FROM zipper_lake.inspect('zl') ORDER BY sub_group;
SELECT * FROM zipper_lake.verify('zl');
SELECT count(*) AS versions FROM zl;
-- a sub-group whose stream fits in one page is stored uncompressed (it
-- takes the page either way); one that needs more pages is compressed
CREATE TABLE zb (id int, note text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zb', ARRAY['id']);
INSERT INTO zb SELECT k, md5(k::text), '2024-03-01 01:00'::timestamptz + k * interval '1 second', '2024-03-02 01:00'
  FROM generate_series(1, 150) k;
INSERT INTO zb SELECT k, md5(k::text), '2024-03-03 01:00'::timestamptz + k * interval '1 second', '2024-03-04 01:00'
  FROM generate_series(1001, 2000) k;
SELECT partition_end, row_count, blocks, raw_bytes > 4000 AS compressible,
       raw_bytes > 8192 AS over_a_page, compressed_bytes < raw_bytes AS compressed
  FROM zipper_lake.inspect('zb') ORDER BY partition_end;
SELECT count(*), count(DISTINCT note), bool_and(note = md5(id::text)) FROM zb;

-- a CHECK constraint whose function writes makes a flush happen while
-- apply_changes has still to mask the rows it replaced: nothing is packed
-- before they are masked (the replaced version must not come back)
CREATE TABLE audit (id int);
CREATE FUNCTION audited(id int) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO packing.audit VALUES (id); RETURN true; END $$;
CREATE TABLE zk (id int CHECK (packing.audited(id)), v int,
                 valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zk', ARRAY['id']);
INSERT INTO zk VALUES (1, 0, '2024-04-01 01:00', 'infinity');
CREATE TABLE ch_on_time (id int, v int, change_time timestamptz);
INSERT INTO ch_on_time VALUES (1, 1, '2024-04-01 10:00');
CREATE TABLE ch_late (id int, v int, change_time timestamptz);
INSERT INTO ch_late VALUES (1, 2, '2024-04-01 05:00');
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('zk', 'ch_on_time');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('zk', 'ch_late');
SELECT id, v, valid_from, valid_to FROM zk ORDER BY valid_from;
SELECT * FROM zipper_lake.verify('zk');

-- columnar history after the table switched to history in rows: packing
-- leaves sub-groups of the other format alone, and a columnar sub-group
-- written again in rows (erase rewrites it) has its wide values toasted
CREATE TABLE zw (id int, note text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('zw', ARRAY['id']);
INSERT INTO zw SELECT 1, string_agg(md5(g::text), ''), '2024-05-01 01:00'::timestamptz,
                      '2024-05-02 01:00'::timestamptz
  FROM generate_series(1, 400) g
  UNION ALL SELECT 3, 'erased', '2024-05-01 03:00', '2024-05-02 03:00';
SELECT zipper_lake.set_history_format('zw', 'rows');
INSERT INTO zw VALUES (2, 'short', '2024-05-01 02:00', '2024-05-02 02:00');
SELECT format, row_count FROM zipper_lake.inspect('zw') ORDER BY sub_group;
CREATE TABLE erased_keys (id int);
INSERT INTO erased_keys VALUES (3);
SELECT zipper_lake.erase('zw', 'erased_keys');
SELECT format, row_count FROM zipper_lake.inspect('zw') ORDER BY sub_group;
SELECT id, length(note), md5(note) = md5((SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g)) AS same
  FROM zw WHERE id = 1 UNION ALL SELECT id, length(note), true FROM zw WHERE id = 2 ORDER BY 1;
SELECT * FROM zipper_lake.verify('zw');

-- rows of row sub-groups written again keep their TOAST pointers: erasing
-- one key rewrites the sub-group, and the other key's wide value is not
-- stored a second time (nor its first copy left to nobody)
CREATE TABLE zt (id int, pad bytea, doc text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
ALTER TABLE zt ALTER COLUMN pad SET STORAGE MAIN;
SELECT zipper_lake.register('zt', ARRAY['id'], history_format => 'rows');
INSERT INTO zt
SELECT k, (SELECT string_agg(sha256(int4send(k * 1000 + g)), '') FROM generate_series(1, 96) g),
       (SELECT string_agg(md5((k * 10000 + g)::text), '') FROM generate_series(1, 3200) g),
       '2024-06-01 01:00'::timestamptz + k * interval '1 minute', '2024-06-02 01:00'
  FROM generate_series(1, 2) k;
SELECT reltoastrelid::regclass AS zt_toast FROM pg_class WHERE oid = 'packing.zt'::regclass \gset
SELECT count(*) AS subgroups FROM zipper_lake.inspect('zt');
SELECT count(DISTINCT chunk_id) AS toasted_values FROM :zt_toast;
TRUNCATE erased_keys;
INSERT INTO erased_keys VALUES (2);
SELECT zipper_lake.erase('zt', 'erased_keys');
SELECT count(DISTINCT chunk_id) AS toasted_values FROM :zt_toast;
SELECT id, length(pad), length(doc) FROM zt;
-- versions apply makes from a stored one share its TOAST values too, also
-- when the row is wide enough to be toasted again (the pad stays inline):
-- a partial change keeps the stored doc, and neither the closed nor the
-- new version stores it again
INSERT INTO zt SELECT 3, pad, doc, '2024-06-03 01:00', 'infinity' FROM zt WHERE id = 1;
CREATE TABLE zt_change (id int, pad bytea, doc text, change_time timestamptz);
INSERT INTO zt_change SELECT 3, pad || '\x00'::bytea, NULL, '2024-06-04 01:00' FROM zt WHERE id = 3;
SELECT count(DISTINCT chunk_id) AS toasted_values FROM :zt_toast;
SELECT changes, inserted, closed
  FROM zipper_lake.apply_changes('zt', 'zt_change', ignore_nulls => true);
SELECT count(DISTINCT chunk_id) AS toasted_values FROM :zt_toast;
SELECT id, length(pad), length(doc), valid_to FROM zt ORDER BY valid_from;

-- the catalog rows of history sub-groups are inserted several at once
-- (README "Packing"): one write into 300 windows of one partition inserts
-- them in two statements, and each window still has one file group of its
-- own.  Windows a write opens are coalesced (README "Storage") unless a
-- file group lies between them: 301 writes of one row first make the
-- file groups in between
CREATE TABLE wide_windows (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('wide_windows', ARRAY['id']);
DO $$
BEGIN
  FOR k IN 0..300 LOOP
    INSERT INTO packing.wide_windows
    VALUES (1000 + k, k, '2024-06-01'::timestamptz - 2 * k * interval '1 day', '2024-06-01 12:00');
  END LOOP;
END $$;
INSERT INTO wide_windows
SELECT k, k, '2024-06-01'::timestamptz - (2 * k - 1) * interval '1 day', '2024-06-01 12:00'
  FROM generate_series(1, 300) k;
SELECT count(*) AS subgroups, count(DISTINCT window_start) AS windows,
       count(DISTINCT file_group) AS file_groups
  FROM zipper_lake.inspect('wide_windows');
SELECT * FROM zipper_lake.verify('wide_windows');

RESET search_path;
DROP SCHEMA packing CASCADE;
