-- README "Change semantics": the history is the fold of every change ever
-- applied, whatever the batching.  Each line of the fold table across two
-- batches, the README's example, corrections, seq across batches,
-- re-application, the late horizon, late changes before snapshots.
SET timezone = 'UTC';
SET datestyle = 'ISO';
CREATE TABLE fb (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('fb', ARRAY['id']);
CREATE TABLE fb_ch (id int, v text, change_time timestamptz, op text, seq bigint);
CREATE FUNCTION fb_apply(seq boolean DEFAULT false) RETURNS SETOF record LANGUAGE sql AS $$
    SELECT * FROM zipper_lake.apply_changes('fb', 'fb_ch', seq => CASE WHEN seq THEN 'seq' END)
$$;
CREATE FUNCTION fb_show(lo int, hi int) RETURNS TABLE (id int, v text, valid_from date, valid_to text)
LANGUAGE sql AS $$
    SELECT id, v, valid_from::date, CASE WHEN valid_to = 'infinity' THEN 'open' ELSE valid_to::date::text END
      FROM fb WHERE id BETWEEN lo AND hi ORDER BY id, valid_from
$$;

-- the fold table, each line meeting a state an earlier batch left:
-- 11 upsert while absent; 12 upsert while another value is held (until a
-- no-op applied before); 13 a no-op, which then bounds a later late change;
-- 14 delete while a version is held (until a no-op); 15 delete while
-- absent, which then bounds a late upsert
INSERT INTO fb_ch VALUES
  (11, 'a', '2024-01-03', 'I', NULL),
  (12, 'a', '2024-01-01', 'I', NULL), (12, 'a', '2024-01-05', 'U', NULL),
  (13, 'a', '2024-01-01', 'I', NULL), (13, 'b', '2024-01-05', 'U', NULL),
  (14, 'a', '2024-01-01', 'I', NULL), (14, 'a', '2024-01-05', 'U', NULL),
  (15, NULL, '2024-01-04', 'D', NULL),
  (16, 'a', '2024-01-01', 'I', NULL), (16, NULL, '2024-01-03', 'D', NULL), (16, NULL, '2024-01-05', 'D', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES
  (11, 'b', '2024-01-01', 'I', NULL),
  (12, 'b', '2024-01-03', 'U', NULL),
  (13, 'a', '2024-01-03', 'U', NULL),
  (14, NULL, '2024-01-03', 'D', NULL),
  (15, 'a', '2024-01-02', 'I', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(11, 15);
-- 13's no-op at 01-03 bounds a change at 01-02
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (13, 'c', '2024-01-02', 'U', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(13, 13);

-- README's example: b0, b1, b2 applied in that order give one batch's fold
CREATE TABLE fb_b0 (id int, v text, change_time timestamptz, op text);
CREATE TABLE fb_b1 (LIKE fb_b0); CREATE TABLE fb_b2 (LIKE fb_b0);
INSERT INTO fb_b0 VALUES (1, NULL, '2024-01-02', 'd');
INSERT INTO fb_b1 VALUES (1, 'a', '2024-01-01', 'c'), (2, 'a', '2024-01-01', 'c'), (2, 'a', '2024-01-03', 'u'),
                         (3, 'a', '2024-01-01', 'c'), (3, 'a', '2024-01-03', 'c');
INSERT INTO fb_b2 VALUES (2, 'b', '2024-01-02', 'u'), (3, NULL, '2024-01-02', 'd');
SELECT * FROM zipper_lake.apply_changes('fb', 'fb_b0');
SELECT * FROM zipper_lake.apply_changes('fb', 'fb_b1');
SELECT * FROM zipper_lake.apply_changes('fb', 'fb_b2');
SELECT * FROM fb_show(1, 3);
-- re-applying a batch changes nothing and counts nothing late
CREATE TABLE fb_before AS SELECT * FROM fb;
SELECT * FROM zipper_lake.apply_changes('fb', 'fb_b1');
SELECT * FROM zipper_lake.apply_changes('fb', 'fb_b0');
SELECT count(*) AS differences
  FROM ((TABLE fb EXCEPT ALL TABLE fb_before) UNION ALL (TABLE fb_before EXCEPT ALL TABLE fb)) d;
-- the same changes as one batch, into a second table: the same history
CREATE TABLE fb_one (LIKE fb) USING zipper_lake;
SELECT zipper_lake.register('fb_one', ARRAY['id']);
CREATE TABLE fb_all AS TABLE fb_b0 UNION ALL TABLE fb_b1 UNION ALL TABLE fb_b2;
SELECT * FROM zipper_lake.apply_changes('fb_one', 'fb_all');
SELECT count(*) AS differences
  FROM ((SELECT * FROM fb WHERE id <= 3 EXCEPT ALL TABLE fb_one)
        UNION ALL (TABLE fb_one EXCEPT ALL SELECT * FROM fb WHERE id <= 3)) d;

-- corrections: a later batch's change without seq at an instant already
-- applied replaces it (20); one replaces a delete and re-opens the key (21)
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (20, 'a', '2024-01-01', 'I', NULL), (20, 'b', '2024-01-03', 'U', NULL),
                         (21, 'a', '2024-01-01', 'I', NULL), (21, NULL, '2024-01-03', 'D', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (20, 'c', '2024-01-03', 'U', NULL), (21, 'b', '2024-01-03', 'U', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(20, 21);

-- seq across batches: at one instant the highest seq wins, a change without
-- seq after every change with seq; a change a higher seq applied before
-- follows shapes nothing (unchanged, not late)
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (30, 'a', '2024-01-01', 'I', 1), (30, 'b', '2024-01-02', 'U', 5);
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (30, 'c', '2024-01-02', 'U', 3);
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(30, 30);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (30, 'd', '2024-01-02', 'U', 7);
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(30, 30);
-- re-applied: nothing
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (30, 'e', '2024-01-02', 'U', NULL);
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (30, 'f', '2024-01-02', 'U', 9);
SELECT * FROM fb_apply(true) AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(30, 30);

-- changelog ops: +I and +U upsert, -D deletes, -U (an update's
-- before-image) is read and counted unchanged, nothing else
TRUNCATE fb_ch;
INSERT INTO fb_ch VALUES (40, 'a', '2024-01-01', '+I', NULL), (40, 'a', '2024-01-02', '-U', NULL),
                         (40, 'b', '2024-01-02', '+u', NULL), (40, NULL, '2024-01-04', '-D', NULL);
SELECT * FROM fb_apply() AS (changes bigint, inserted bigint, closed bigint, deleted bigint, unchanged bigint, late bigint);
SELECT * FROM fb_show(40, 40);

-- the record is healthy and shown by inspect_record()
SELECT * FROM zipper_lake.verify('fb');
SELECT sum(instants) > 0 AS remembers FROM zipper_lake.inspect_record('fb');
-- a load that contradicts it: key 16's delete at 01-05 (of an absent key)
-- is now inside a version
INSERT INTO fb VALUES (16, 'z', '2024-01-04', '2024-01-06');
SELECT * FROM zipper_lake.verify('fb');
SELECT * FROM fb_show(16, 16);

-- the late horizon: changes older than the newest change minus the horizon are refused
CREATE TABLE fb_h (LIKE fb) USING zipper_lake;
SELECT zipper_lake.register('fb_h', ARRAY['id'], late_horizon => '2 days');
SELECT late_horizon FROM zipper_lake.registration WHERE tbl = 'fb_h'::regclass;
CREATE TABLE fb_hc (id int, v text, change_time timestamptz);
INSERT INTO fb_hc VALUES (1, 'a', '2024-01-10');
SELECT * FROM zipper_lake.apply_changes('fb_h', 'fb_hc');
TRUNCATE fb_hc; INSERT INTO fb_hc VALUES (1, 'b', '2024-01-08 12:00'), (2, 'c', '2024-01-07 23:00');
SELECT * FROM zipper_lake.apply_changes('fb_h', 'fb_hc');
\echo :SQLSTATE
SELECT count(*) AS versions FROM fb_h;
-- a snapshot with deletes is a change of every key, even an empty one
CREATE TABLE fb_hi (id int, v text);
SELECT * FROM zipper_lake.apply_snapshot('fb_h', 'fb_hi', '2024-01-07', allow_empty => true);
\echo :SQLSTATE
DELETE FROM fb_hc WHERE id = 2;
SELECT * FROM zipper_lake.apply_changes('fb_h', 'fb_hc');
-- settable later; NULL removes it; months have no fixed length
SELECT zipper_lake.set_late_horizon('fb_h', '1 month');
\echo :SQLSTATE
SELECT zipper_lake.set_late_horizon('fb_h', NULL);
TRUNCATE fb_hc; INSERT INTO fb_hc VALUES (2, 'c', '2024-01-01');
SELECT * FROM zipper_lake.apply_changes('fb_h', 'fb_hc');
SELECT id, v, valid_from::date, valid_to FROM fb_h ORDER BY id, valid_from;

-- the record forgets what no accepted change can reach: with a 2-day
-- horizon, the no-ops of 01-02 go once the no-ops of 01-10 are merged in
CREATE TABLE fb_h2 (LIKE fb) USING zipper_lake;
SELECT zipper_lake.register('fb_h2', ARRAY['id'], late_horizon => '2 days');
TRUNCATE fb_hc; INSERT INTO fb_hc SELECT k, 'a', '2024-01-01' FROM generate_series(1, 3) k;
SELECT inserted FROM zipper_lake.apply_changes('fb_h2', 'fb_hc');
UPDATE fb_hc SET change_time = '2024-01-02';
SELECT unchanged FROM zipper_lake.apply_changes('fb_h2', 'fb_hc');
SELECT sum(instants) AS remembered, min(newest) AS oldest_piece_newest FROM zipper_lake.inspect_record('fb_h2');
UPDATE fb_hc SET change_time = '2024-01-10';
SELECT unchanged FROM zipper_lake.apply_changes('fb_h2', 'fb_hc');
SELECT sum(instants) AS remembered, count(*) AS pieces FROM zipper_lake.inspect_record('fb_h2');
SELECT * FROM zipper_lake.verify('fb_h2');

-- a late apply_changes before an earlier apply_snapshot.  With deletes the
-- snapshot is a change of every key: a key missing from its image (3) is
-- absent from it on, even one first seen later; without deletes it only
-- upserts its rows (a no-op of 1 at 01-07 bounds the late change of 1).
CREATE TABLE fb_s1 (LIKE fb) USING zipper_lake;
CREATE TABLE fb_s2 (LIKE fb) USING zipper_lake;
SELECT zipper_lake.register('fb_s1', ARRAY['id']);
SELECT zipper_lake.register('fb_s2', ARRAY['id']);
CREATE TABLE fb_img (id int, v text);
INSERT INTO fb_img VALUES (1, 'a'), (2, 'b');
SELECT * FROM zipper_lake.apply_snapshot('fb_s1', 'fb_img', '2024-01-05');
SELECT * FROM zipper_lake.apply_snapshot('fb_s2', 'fb_img', '2024-01-05', deletes => false);
SELECT * FROM zipper_lake.apply_snapshot('fb_s1', 'fb_img', '2024-01-07');
SELECT * FROM zipper_lake.apply_snapshot('fb_s2', 'fb_img', '2024-01-07', deletes => false);
CREATE TABLE fb_late (id int, v text, change_time timestamptz, op text);
INSERT INTO fb_late VALUES (1, 'x', '2024-01-06', 'U'), (3, 'y', '2024-01-03', 'I'), (2, NULL, '2024-01-04', 'D');
SELECT * FROM zipper_lake.apply_changes('fb_s1', 'fb_late');
SELECT * FROM zipper_lake.apply_changes('fb_s2', 'fb_late');
SELECT 's1' AS t, id, v, valid_from::date, valid_to FROM fb_s1
UNION ALL SELECT 's2', id, v, valid_from::date, valid_to FROM fb_s2 ORDER BY 1, 2, 4;

-- a snapshot older than the newest change reads history like any late
-- change: 5 and 6 held closed versions at 01-04 and are missing from the image
CREATE TABLE fb_s3 (LIKE fb) USING zipper_lake;
SELECT zipper_lake.register('fb_s3', ARRAY['id']);
TRUNCATE fb_late;
INSERT INTO fb_late VALUES (5, 'p', '2024-01-01', 'I'), (5, 'q', '2024-01-08', 'U'),
                           (6, 'r', '2024-01-01', 'I'), (6, NULL, '2024-01-06', 'D'),
                           (1, 'a', '2024-01-01', 'I');
SELECT * FROM zipper_lake.apply_changes('fb_s3', 'fb_late');
SELECT * FROM zipper_lake.apply_snapshot('fb_s3', 'fb_img', '2024-01-04');
SELECT id, v, valid_from::date, valid_to FROM fb_s3 ORDER BY id, valid_from;
SELECT * FROM zipper_lake.verify('fb_s3');

-- TRUNCATE forgets the record with the rows
TRUNCATE fb;
SELECT count(*) AS pieces FROM zipper_lake.inspect_record('fb');
-- a table holding no rows keeps its record (a delete of an absent key is
-- remembered with no version): a parallel pg_restore truncates each table
-- it created before it loads the rows, maybe after the record
CREATE TABLE fb_norows (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('fb_norows', ARRAY['id']);
CREATE TABLE fb_norows_ch (id int, v int, change_time timestamptz, op text);
INSERT INTO fb_norows_ch VALUES (1, NULL, '2024-01-02', 'D');
SELECT changes, deleted FROM zipper_lake.apply_changes('fb_norows', 'fb_norows_ch');
TRUNCATE fb_norows;
SELECT sum(instants) AS remembered FROM zipper_lake.inspect_record('fb_norows');
DROP TABLE fb_norows, fb_norows_ch;

DROP TABLE fb, fb_ch, fb_b0, fb_b1, fb_b2, fb_before, fb_one, fb_all, fb_h, fb_h2, fb_hc, fb_hi,
           fb_s1, fb_s2, fb_s3, fb_img, fb_late;
DROP FUNCTION fb_apply(boolean), fb_show(int, int);
-- DROP forgets it too: no record of a table that is gone
SELECT count(*) AS orphans FROM zipper_lake.record_head h
 WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = h.tbl);
SELECT count(*) AS orphans FROM zipper_lake.record_segment s
 WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.tbl);
-- segments and key directories do not compress: stored as they are, no
-- failed compression on every write
SELECT attrelid::regclass, attname, attstorage FROM pg_attribute
 WHERE (attrelid, attname) IN (('zipper_lake.record_segment'::regclass, 'entries'),
                               ('zipper_lake.subgroup'::regclass, 'key_directory'))
 ORDER BY 1, 2;

-- truncate (op T or truncate): every key holding a version then is deleted —
-- also a key first seen in a later, late batch; at the truncate's instant a
-- change with a higher seq follows it, one with a lower seq shapes nothing
CREATE TABLE fb_t (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('fb_t', ARRAY['id']);
CREATE TABLE fb_tc (id int, v text, change_time timestamptz, op text, seq bigint);
INSERT INTO fb_tc VALUES (1, 'a', '2024-01-01', 'I', 1), (2, 'b', '2024-01-01', 'I', 2),
                         (NULL, NULL, '2024-01-03', 'T', 10), (2, 'c', '2024-01-03', 'I', 11);
SELECT * FROM zipper_lake.apply_changes('fb_t', 'fb_tc', seq => 'seq');
TRUNCATE fb_tc;
INSERT INTO fb_tc VALUES (3, 'x', '2024-01-02', 'I', 5), (4, 'y', '2024-01-03', 'I', 9);
SELECT * FROM zipper_lake.apply_changes('fb_t', 'fb_tc', seq => 'seq');
TRUNCATE fb_tc;
INSERT INTO fb_tc VALUES (5, 'z', '2024-01-03', 'I', 12), (1, 'w', '2024-01-02', 'U', 6);
SELECT * FROM zipper_lake.apply_changes('fb_t', 'fb_tc', seq => 'seq');
SELECT id, v, valid_from::date, valid_to FROM fb_t ORDER BY id, valid_from;
SELECT table_instants, table_seqs FROM zipper_lake.record_head WHERE tbl = 'fb_t'::regclass;
SELECT * FROM zipper_lake.verify('fb_t');
-- a truncate that changes applied before follow at its instant (seq 8:
-- every key has one of a higher seq on 01-03) deletes nothing and counts
-- nowhere but in changes (not as unchanged, as no key is deleted)
TRUNCATE fb_tc;
INSERT INTO fb_tc VALUES (NULL, NULL, '2024-01-03', 'T', 8);
SELECT * FROM zipper_lake.apply_changes('fb_t', 'fb_tc', seq => 'seq');
SELECT id, v, valid_from::date, valid_to FROM fb_t ORDER BY id, valid_from;
DROP TABLE fb_t, fb_tc;

-- a change without seq follows every change with seq at its instant, a
-- truncate's too, whichever came first: a later truncate (fb_n1) or change
-- (fb_n2, fb_n3) with a higher seq there shapes nothing, also where a
-- delete without seq ended the version (fb_n3)
CREATE TABLE fb_nc (id int, v text, change_time timestamptz, op text, seq bigint);
CREATE TABLE fb_n1 (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
CREATE TABLE fb_n2 (LIKE fb_n1) USING zipper_lake;
CREATE TABLE fb_n3 (LIKE fb_n1) USING zipper_lake;
SELECT zipper_lake.register(t, ARRAY['id']) FROM unnest(ARRAY['fb_n1', 'fb_n2', 'fb_n3']) t;
CREATE FUNCTION fb_napply(tbl text, VARIADIC rows text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    counts text;
BEGIN
    TRUNCATE fb_nc;
    EXECUTE 'INSERT INTO fb_nc VALUES ' || array_to_string(rows, ', ');
    EXECUTE format('SELECT format(''%%s inserted, %%s deleted, %%s unchanged'', inserted, deleted, unchanged)
                      FROM zipper_lake.apply_changes(%L, ''fb_nc'', seq => ''seq'')', tbl) INTO counts;
    RETURN counts;
END $$;
SELECT fb_napply('fb_n1', $$(1, 'a', '2024-01-01', 'U', NULL)$$) AS no_seq,
       fb_napply('fb_n1', $$(NULL, NULL, '2024-01-01', 'T', 4)$$) AS truncate_4,
       fb_napply('fb_n1', $$(NULL, NULL, '2024-01-01', 'T', 5)$$) AS truncate_5;
SELECT fb_napply('fb_n2', $$(2, 'x', '2024-01-01', 'U', NULL)$$) AS first,
       fb_napply('fb_n2', $$(NULL, NULL, '2024-01-02', 'T', 1)$$) AS truncate_1,
       fb_napply('fb_n2', $$(2, 'b', '2024-01-02', 'U', NULL)$$) AS no_seq,
       fb_napply('fb_n2', $$(2, 'a', '2024-01-02', 'U', 2)$$) AS seq_2;
SELECT fb_napply('fb_n3', $$(3, 'c', '2024-01-01', 'U', NULL)$$, $$(3, NULL, '2024-01-03', 'D', NULL)$$) AS no_seq,
       fb_napply('fb_n3', $$(NULL, NULL, '2024-01-03', 'T', 4)$$) AS truncate_4,
       fb_napply('fb_n3', $$(3, 'd', '2024-01-03', 'U', 6)$$) AS seq_6;
SELECT 'fb_n1' AS t, id, v, valid_from::date, valid_to FROM fb_n1
UNION ALL SELECT 'fb_n2', id, v, valid_from::date, valid_to FROM fb_n2
UNION ALL SELECT 'fb_n3', id, v, valid_from::date, valid_to FROM fb_n3
ORDER BY 1, 2, 4;
SELECT t, (SELECT count(*) FROM zipper_lake.verify(t::regclass)) AS problems
  FROM unnest(ARRAY['fb_n1', 'fb_n2', 'fb_n3']) t;
DROP TABLE fb_n1, fb_n2, fb_n3, fb_nc;
DROP FUNCTION fb_napply(text, text[]);

-- the record stores integer keys (smallint, int, bigint, domains over them)
-- as varints and other keys in their binary send format: every key comes
-- back as it was, extremes and negatives included.  Each key opens on
-- 01-01 and has a no-op on 01-03 (remembered); a later batch's late change
-- on 01-02 ends at the no-op only if the record gave that key back
CREATE DOMAIN fb_code AS bigint CHECK (VALUE <> 0);
CREATE TABLE fb_k2 (k smallint, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE fb_k4 (k int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE fb_k8 (k bigint, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE fb_kd (k fb_code, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE fb_kt (k text, j int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('fb_k2', ARRAY['k']), zipper_lake.register('fb_k4', ARRAY['k']),
       zipper_lake.register('fb_k8', ARRAY['k']), zipper_lake.register('fb_kd', ARRAY['k']),
       zipper_lake.register('fb_kt', ARRAY['k', 'j']);
CREATE TABLE fb_kkeys (t text, k text);
INSERT INTO fb_kkeys VALUES ('fb_k2', '-32768'), ('fb_k2', '-1'), ('fb_k2', '0'), ('fb_k2', '32767'),
  ('fb_k4', '-2147483648'), ('fb_k4', '-1'), ('fb_k4', '2147483647'),
  ('fb_k8', '-9223372036854775808'), ('fb_k8', '-64'), ('fb_k8', '63'), ('fb_k8', '9223372036854775807'),
  ('fb_kd', '-9223372036854775808'), ('fb_kd', '5'), ('fb_kd', '9223372036854775807'),
  ('fb_kt', ''), ('fb_kt', 'a'), ('fb_kt', 'ключ');
CREATE FUNCTION fb_kapply(tbl text, late boolean) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    key_type text := CASE tbl WHEN 'fb_k2' THEN 'smallint' WHEN 'fb_k4' THEN 'int'
                              WHEN 'fb_k8' THEN 'bigint' WHEN 'fb_kd' THEN 'fb_code' ELSE 'text' END;
    counts text;
BEGIN
    EXECUTE format('CREATE TEMP TABLE fb_kb AS
        SELECT k::%s AS k, %s v, change_time FROM fb_kkeys,
               unnest(CASE WHEN %L THEN ARRAY[timestamptz ''2024-01-02'']
                           ELSE ARRAY[timestamptz ''2024-01-01'', ''2024-01-03''] END) change_time
         WHERE t = %L', key_type, CASE WHEN late THEN 2 ELSE 1 END, late, tbl);
    IF tbl = 'fb_kt' THEN
        ALTER TABLE fb_kb ADD COLUMN j int;
        UPDATE fb_kb SET j = length(k) - 2147483648;
    END IF;
    EXECUTE format('SELECT format(''%%s changes, %%s inserted, %%s unchanged, %%s late'', changes, inserted, unchanged, late)
                      FROM zipper_lake.apply_changes(%L, ''fb_kb'')', tbl) INTO counts;
    DROP TABLE fb_kb;
    RETURN counts;
END $$;
SELECT t, fb_kapply(t, false) AS first
  FROM (VALUES ('fb_k2'), ('fb_k4'), ('fb_k8'), ('fb_kd'), ('fb_kt')) v(t);
-- the no-ops, key by key, as the record gives them back
SELECT t, r.key, r.instant FROM (VALUES ('fb_k2'), ('fb_k4'), ('fb_k8'), ('fb_kd'), ('fb_kt')) v(t),
       zipper_lake._record_instants(t::regclass) r ORDER BY 1, 2;
SELECT t, fb_kapply(t, true) AS late
  FROM (VALUES ('fb_k2'), ('fb_k4'), ('fb_k8'), ('fb_kd'), ('fb_kt')) v(t);
SELECT 'fb_k2' AS t, k::text, v, valid_from::date, valid_to::date FROM fb_k2
UNION ALL SELECT 'fb_k4', k::text, v, valid_from::date, valid_to::date FROM fb_k4
UNION ALL SELECT 'fb_k8', k::text, v, valid_from::date, valid_to::date FROM fb_k8
UNION ALL SELECT 'fb_kd', k::text, v, valid_from::date, valid_to::date FROM fb_kd
UNION ALL SELECT 'fb_kt', k || '/' || j, v, valid_from::date, valid_to::date FROM fb_kt
ORDER BY 1, 2, 4;
SELECT t, (SELECT count(*) FROM zipper_lake.verify(t::regclass)) AS problems
  FROM (VALUES ('fb_k2'), ('fb_k4'), ('fb_k8'), ('fb_kd'), ('fb_kt')) v(t);
DROP TABLE fb_k2, fb_k4, fb_k8, fb_kd, fb_kt, fb_kkeys;
DROP FUNCTION fb_kapply(text, boolean);
DROP DOMAIN fb_code;
