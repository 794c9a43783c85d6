-- Lifecycle (README "Lifecycle"): drop_history, retention by VACUUM, erase.
SET timezone = 'UTC';
-- a schema of its own: the regression tests share one database
CREATE SCHEMA lifecycle;
SET search_path = lifecycle, public;

-- the same history in a zipper table of each history format and in a heap
-- table of expected versions (every change in one batch: an in-order stream)
CREATE TABLE ch (id int, v int, note text, change_time timestamptz, op text);
INSERT INTO ch
SELECT k, d % 4, CASE WHEN k = 7 THEN 'SECRET-' || k || '-' || d ELSE 'note-' || k END,
       '2024-01-01'::timestamptz + d * interval '1 day' + k * interval '1 hour',
       CASE WHEN (k + d) % 9 = 0 THEN 'D' ELSE 'U' END
  FROM generate_series(1, 12) k, generate_series(0, 29) d;
-- keys that change rarely: versions across the cut
INSERT INTO ch
SELECT k, d, 'note-' || k, '2024-01-01'::timestamptz + d * interval '1 day', 'U'
  FROM generate_series(13, 15) k, unnest(ARRAY[0, 20]) d;
CREATE TABLE zr (id int, v int, note text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('zr', ARRAY['id'], history_format => 'rows');
CREATE TABLE zc (LIKE zr) USING zipper_lake;
SELECT zipper_lake.register('zc', ARRAY['id'], history_format => 'columnar');
SELECT changes, inserted, closed, deleted, unchanged FROM zipper_lake.apply_changes('zr', 'ch');
SELECT changes, inserted, closed, deleted, unchanged FROM zipper_lake.apply_changes('zc', 'ch');
CREATE TABLE expected AS SELECT * FROM zr;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to <= '2024-01-10 12:00') AS ending_by_cut
  FROM expected;

-- what a table holds against what it should: rows missing or extra
CREATE FUNCTION differences(tbl regclass, cut timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ((SELECT * FROM expected WHERE valid_to > %L EXCEPT ALL SELECT * FROM %s)
                    UNION ALL (SELECT * FROM %s EXCEPT ALL SELECT * FROM expected WHERE valid_to > %L)) d',
                   cut, tbl, tbl, cut) INTO n;
    RETURN n;
END $$;
CREATE FUNCTION history_partitions(tbl regclass) RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(DISTINCT partition_end) FROM zipper_lake.inspect(tbl) WHERE partition_end <> 'infinity'
$$;
SELECT history_partitions('zr') AS zr_partitions, history_partitions('zc') AS zc_partitions;

-- drop_history: whole partitions go, the boundary partition (Jan 10) is masked
SELECT zipper_lake.drop_history('zr', '2024-01-10 12:00');
SELECT zipper_lake.drop_history('zc', '2024-01-10 12:00');
SELECT differences('zr', '2024-01-10 12:00') AS zr_differences,
       differences('zc', '2024-01-10 12:00') AS zc_differences;
SELECT history_partitions('zr') AS zr_partitions, history_partitions('zc') AS zc_partitions;
SELECT min(valid_to) > '2024-01-10 12:00' AS nothing_ended_by_cut FROM zr;
-- as_of before the cut: exactly the kept versions valid then
SELECT count(*) AS kept_valid_jan_5,
       count(*) = (SELECT count(*) FROM expected WHERE valid_from <= '2024-01-05' AND valid_to > '2024-01-10 12:00')
         AS as_expected
  FROM zipper_lake.as_of(NULL::zc, '2024-01-05');
SELECT (SELECT count(*) FROM zipper_lake.verify('zr')) AS zr_problems,
       (SELECT count(*) FROM zipper_lake.verify('zc')) AS zc_problems;
SELECT tbl, history_cut FROM zipper_lake.registration WHERE tbl IN ('zr'::regclass, 'zc'::regclass) ORDER BY 1;

-- an earlier cut removes nothing and keeps the later one
SELECT zipper_lake.drop_history('zc', '2024-01-03');
SELECT history_cut FROM zipper_lake.registration WHERE tbl = 'zc'::regclass;

-- changes at or before the cut are refused, whatever the path; nothing changes
CREATE TABLE late (LIKE ch);
INSERT INTO late VALUES (1, 9, 'late', '2024-01-10 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('zc', 'late');
TRUNCATE late; INSERT INTO late VALUES (1, 9, 'late', '2024-01-10 12:00', 'U'), (2, 9, 'late', '2024-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('zc', 'late');
CREATE TABLE image (id int, v int, note text);
INSERT INTO image VALUES (1, 9, 'image');
SELECT * FROM zipper_lake.apply_snapshot('zc', 'image', '2024-01-05', deletes => true);
INSERT INTO zc VALUES (50, 1, 'loaded', '2024-01-01', '2024-01-10');
SELECT differences('zc', '2024-01-10 12:00') AS zc_differences;
-- a version crossing the cut loads (pg_dump's rows do), one after it too
INSERT INTO zc VALUES (50, 1, 'loaded', '2024-01-01', '2024-01-11'), (50, 2, 'loaded', '2024-01-11', '2024-01-12');
SELECT id, v, valid_from, valid_to FROM zc WHERE id = 50 ORDER BY valid_from;
-- a late change after the cut still folds exactly
TRUNCATE late; INSERT INTO late VALUES (50, 3, 'loaded', '2024-01-10 13:00', 'U');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('zc', 'late');
SELECT id, v, valid_from, valid_to FROM zc WHERE id = 50 ORDER BY valid_from;

-- bad arguments change nothing
SELECT zipper_lake.drop_history('zc', NULL);
SELECT zipper_lake.drop_history('zc', 'infinity');
SELECT zipper_lake.drop_history('zc', '-infinity');
SELECT zipper_lake.drop_history('ch', '2024-01-05');
CREATE TABLE unregistered (id int, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.drop_history('unregistered', '2024-01-05');
CREATE ROLE lifecycle_other;
GRANT SELECT, INSERT ON zc TO lifecycle_other;
GRANT USAGE ON SCHEMA zipper_lake, lifecycle TO lifecycle_other;
SET ROLE lifecycle_other;
SELECT zipper_lake.drop_history('zc', '2024-01-20');
SELECT zipper_lake.set_retention('zc', '1 year');
SELECT zipper_lake.erase('zc', 'image');
RESET ROLE;

-- retention: VACUUM drops what ended more than `keep` ago (now()-relative
-- data, far from the cut: two years ago is dropped, a month ago is kept)
CREATE TABLE recent (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('recent', ARRAY['id']);
CREATE TABLE recent_ch (id int, v int, change_time timestamptz);
INSERT INTO recent_ch
SELECT k, d, date_trunc('day', now()) - interval '800 days' + d * interval '100 days' FROM generate_series(1, 3) k, generate_series(0, 7) d;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('recent', 'recent_ch');
CREATE TABLE recent_before AS SELECT * FROM recent;
SELECT zipper_lake.set_retention('recent', '0 days');
SELECT zipper_lake.set_retention('recent', '-1 month');
SELECT zipper_lake.set_retention('recent', '1 year');
VACUUM recent;
SELECT count(*) AS dropped_ended_over_a_year_ago
  FROM recent_before WHERE valid_to <= now() - interval '1 year';
SELECT (SELECT count(*) FROM recent) = (SELECT count(*) FROM recent_before WHERE valid_to > now() - interval '1 year')
         AS kept_the_rest,
       (SELECT count(*) FROM ((TABLE recent EXCEPT TABLE recent_before) UNION ALL
                              (SELECT * FROM recent_before WHERE valid_to > now() - interval '1 year'
                               EXCEPT TABLE recent)) d) AS differences,
       (SELECT history_cut > now() - interval '1 year 1 day' FROM zipper_lake.registration
         WHERE tbl = 'recent'::regclass) AS cut_recorded;
-- a second VACUUM finds nothing more; NULL keeps history forever again
VACUUM recent;
SELECT count(*) FROM recent;
SELECT zipper_lake.set_retention('recent', NULL);
SELECT retention FROM zipper_lake.registration WHERE tbl = 'recent'::regclass;

-- a retention whose cut now() - keep no timestamp can hold is refused (it
-- made every VACUUM of the table fail); one that reaches back to 4713 BC
-- is fine
SELECT zipper_lake.set_retention('recent', '100000000 years');
\echo :SQLSTATE
SELECT zipper_lake.set_retention('recent', '2000000000 days');
\echo :SQLSTATE
SELECT zipper_lake.set_retention('recent', '2562047788 hours');
\echo :SQLSTATE
SELECT zipper_lake.set_retention('recent', '6000 years');
SELECT zipper_lake.set_retention('recent', NULL);
-- VACUUM never fails on a stored period, whatever it is (one written by
-- hand, or restored): such a period drops nothing, and the table is
-- vacuumed and frozen (a new connection: registrations are cached)
UPDATE zipper_lake.registration SET retention = '100000000 years' WHERE tbl = 'recent'::regclass;
\c
SET timezone = 'UTC';
SET search_path = lifecycle, public;
VACUUM recent;
VACUUM (FREEZE) recent, zc;
SELECT count(*) AS versions_kept FROM recent;
-- mixed signs (the CHECK passes): the cut would lie after year 294276
UPDATE zipper_lake.registration SET retention = '-300000 years 110000000 days'
 WHERE tbl = 'recent'::regclass;
\c
SET timezone = 'UTC';
SET search_path = lifecycle, public;
VACUUM recent;
SELECT count(*) AS versions_kept FROM recent;
UPDATE zipper_lake.registration SET retention = NULL WHERE tbl = 'recent'::regclass;
\c
SET timezone = 'UTC';
SET search_path = lifecycle, public;
-- nor on a version that ended in the calendar's last local day (a zone
-- off UTC: its partition's range reaches past the last timestamp), nor on
-- a registration whose time zone the server does not know (every read of
-- the table refuses it; VACUUM skips retention and compaction)
CREATE TABLE far (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('far', ARRAY['id'], time_zone => 'America/New_York');
INSERT INTO far VALUES (1, 1, '2020-01-01', '294276-12-31 12:00:00-05'),
                       (1, 2, '294276-12-31 12:00:00-05', 'infinity');
SELECT zipper_lake.set_retention('far', '1 year');
VACUUM far;
SELECT count(*) AS far_versions FROM far WHERE valid_to > '294276-12-01';
SELECT count(*) AS far_problems FROM zipper_lake.verify('far');
UPDATE zipper_lake.registration SET time_zone = 'Mars/Olympus_Mons' WHERE tbl = 'far'::regclass;
\c
SET timezone = 'UTC';
SET search_path = lifecycle, public;
VACUUM far;
SELECT count(*) FROM far WHERE valid_to > '2020-01-01';
UPDATE zipper_lake.registration SET time_zone = 'America/New_York' WHERE tbl = 'far'::regclass;
\c
SET timezone = 'UTC';
SET search_path = lifecycle, public;
SELECT count(*) AS far_versions FROM far;

-- erase: every version and change record of keys 7 and 3 (and 99, absent)
INSERT INTO ch VALUES (3, NULL, NULL, '2024-01-25 03:30', 'D');	-- a no-op: in the record
CREATE VIEW noop AS SELECT * FROM ch WHERE change_time = '2024-01-25 03:30';
SELECT unchanged FROM zipper_lake.apply_changes('zr', 'noop');
SELECT unchanged FROM zipper_lake.apply_changes('zc', 'noop');
SELECT count(*) > 0 AS record_holds_key_3
  FROM zipper_lake._record_instants('zc') WHERE key = ARRAY['3'];
CREATE TABLE forget (id bigint);
INSERT INTO forget VALUES (7), (3), (99), (7);
SELECT zipper_lake.erase('zr', 'forget') AS zr_erased, zipper_lake.erase('zc', 'forget') AS zc_erased;
SELECT count(*) FILTER (WHERE id IN (3, 7)) AS zr_left FROM zr;
SELECT count(*) FILTER (WHERE id IN (3, 7)) AS zc_left FROM zc;
SELECT count(*) AS record_entries_left FROM zipper_lake._record_instants('zc') WHERE key && ARRAY['3', '7'];
-- other keys unchanged
SELECT count(*) AS zr_differences FROM (
    (SELECT * FROM expected WHERE valid_to > '2024-01-10 12:00' AND id NOT IN (3, 7) EXCEPT ALL SELECT * FROM zr)
    UNION ALL (SELECT * FROM zr EXCEPT ALL SELECT * FROM expected WHERE valid_to > '2024-01-10 12:00' AND id NOT IN (3, 7))) d;
SELECT (SELECT count(*) FROM zipper_lake.verify('zr')) AS zr_problems,
       (SELECT count(*) FROM zipper_lake.verify('zc')) AS zc_problems;
-- the keys start again from "absent": a change before their old history
-- (but after the cut) makes one open version
TRUNCATE late; INSERT INTO late VALUES (7, 1, 'again', '2024-01-11', 'U');
SELECT changes, inserted, closed, unchanged, late FROM zipper_lake.apply_changes('zc', 'late');
SELECT id, v, note, valid_from, valid_to FROM zc WHERE id = 7;
INSERT INTO zr VALUES (3, 1, 'again', '2024-01-12', 'infinity');
SELECT id, v, note, valid_from, valid_to FROM zr WHERE id = 3;

-- after VACUUM no byte of the erased values is left in the table's files
CHECKPOINT;
SELECT position('SECRET'::bytea IN pg_read_binary_file(pg_relation_filepath('zr'))) > 0 AS zr_file_holds_secret;
VACUUM zr;
VACUUM zc;
-- (again: a wipe waits for snapshots an autoanalyze may hold meanwhile)
VACUUM zr;
VACUUM zc;
CHECKPOINT;
SELECT position('SECRET'::bytea IN pg_read_binary_file(pg_relation_filepath('zr'))) AS zr_file,
       position('SECRET'::bytea IN pg_read_binary_file(pg_relation_filepath('zc'))) AS zc_file,
       position('note-1'::bytea IN pg_read_binary_file(pg_relation_filepath('zc'))) > 0 AS zc_file_holds_others;

-- TOAST: values too big for a page, erased from the TOAST relation too
CREATE TABLE big (id int, doc text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('big', ARRAY['id'], history_format => 'rows');
CREATE TABLE big_ch (id int, doc text, change_time timestamptz);
INSERT INTO big_ch
SELECT k, (SELECT CASE WHEN k = 2 THEN 'SECRET' ELSE 'public' END || string_agg(md5(i::text || k || d), '')
             FROM generate_series(1, 200) i),
       '2024-02-01'::timestamptz + d * interval '1 day'
  FROM generate_series(1, 3) k, generate_series(0, 3) d;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('big', 'big_ch');
CREATE TABLE toast_file AS SELECT pg_relation_filepath(reltoastrelid) AS path FROM pg_class WHERE oid = 'big'::regclass;
CHECKPOINT;
SELECT position('SECRET'::bytea IN pg_read_binary_file(path)) > 0 AS toast_holds_secret FROM toast_file;
-- key 4: two adjacent versions with one big value, loaded together, become
-- one version (the second's TOAST value must not stay behind, unreferenced)
INSERT INTO big
SELECT 4, doc, f, t
  FROM (SELECT 'SECRET' || string_agg(md5(i::text || 'four'), '') AS doc FROM generate_series(1, 200) i) d,
       (VALUES ('2024-02-01'::timestamptz, '2024-02-02'::timestamptz),
               ('2024-02-02', '2024-02-03')) p(f, t);
SELECT id, valid_from, valid_to FROM big WHERE id = 4;
CREATE TABLE forget_big (id int);
INSERT INTO forget_big VALUES (2), (4);
SELECT zipper_lake.erase('big', 'forget_big');
VACUUM big;
VACUUM big;
CHECKPOINT;
SELECT position('SECRET'::bytea IN pg_read_binary_file(path)) AS toast_secret,
       position('public'::bytea IN pg_read_binary_file(path)) > 0 AS toast_holds_others
  FROM toast_file;
SELECT id, count(*), min(left(doc, 6)), sum(length(doc)) FROM big GROUP BY id ORDER BY id;

-- bad keys change nothing
CREATE TABLE bad_keys (other int);
SELECT zipper_lake.erase('zc', 'bad_keys');
INSERT INTO forget VALUES (NULL);
SELECT zipper_lake.erase('zc', 'forget');
SELECT zipper_lake.erase('zc', NULL);
CREATE TABLE big_keys (id bigint);
INSERT INTO big_keys VALUES (7), (99999999999);
SELECT zipper_lake.erase('zc', 'big_keys');
SELECT count(*) FROM zc WHERE id = 7;

-- VACUUM compacts sub-groups more than an eighth masked (late changes
-- replaced 6 of the 10 versions that ended on Jan 3): same rows, no masks;
-- then it merges the two small sub-groups of Jan 3 into one (sql/merge.sql)
CREATE TABLE hc (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('hc', ARRAY['id']);
CREATE TABLE hc_ch (id int, v int, change_time timestamptz);
INSERT INTO hc_ch SELECT k, d, '2024-01-01'::timestamptz + d * interval '2 days'
  FROM generate_series(1, 10) k, generate_series(0, 1) d;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('hc', 'hc_ch');
TRUNCATE hc_ch;
INSERT INTO hc_ch SELECT k, 9, '2024-01-02' FROM generate_series(1, 6) k;
SELECT changes, inserted, late FROM zipper_lake.apply_changes('hc', 'hc_ch');
SELECT partition_end, row_count, masked_rows FROM zipper_lake.inspect('hc') ORDER BY 1, 2;
CREATE TABLE hc_before AS SELECT * FROM hc;
VACUUM hc;
SELECT partition_end, row_count, masked_rows FROM zipper_lake.inspect('hc') ORDER BY 1, 2;
SELECT count(*) AS differences FROM ((TABLE hc EXCEPT ALL TABLE hc_before) UNION ALL (TABLE hc_before EXCEPT ALL TABLE hc)) d;
SELECT count(*) AS problems FROM zipper_lake.verify('hc');

DROP OWNED BY lifecycle_other;
DROP ROLE lifecycle_other;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA lifecycle CASCADE;
