-- apply_changes: every row of the table in README "Change semantics", batches, late data, layout.
SET timezone = 'UTC';

CREATE TABLE acc (id int, name text, amount int,
                  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acc', ARRAY['id']);
CREATE TABLE ch (id int, name text, amount int, change_time timestamptz, op text);

-- show the versions of the table, and that it stays healthy
CREATE FUNCTION show() RETURNS TABLE (id int, name text, amount int, valid_from text, valid_to text)
LANGUAGE sql AS $$
    SELECT id, name, amount, to_char(valid_from, 'MM-DD HH24:MI'),
           CASE WHEN valid_to = 'infinity' THEN 'open' ELSE to_char(valid_to, 'MM-DD HH24:MI') END
      FROM acc ORDER BY id, valid_from
$$;
CREATE FUNCTION healthy() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM zipper_lake.verify('acc') $$;

-- upsert in a gap (new key): new open version
INSERT INTO ch VALUES (1, 'ann', 100, '2026-01-01 00:00', 'I'), (2, 'bob', 200, '2026-01-01 00:00', 'insert');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- upsert with the same value inside a version: a no-op
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 100, '2026-01-02 00:00', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- upsert with a different value inside a version: [a,t) keeps the old value, [t,b) the new
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 110, '2026-01-03 00:00', 'u');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- upsert at exactly a version's start replaces it (a = t: [a,t) dropped)
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 111, '2026-01-03 00:00', 'UPDATE');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- delete inside a version: [a,t) kept, [t,b) becomes a gap
TRUNCATE ch; INSERT INTO ch VALUES (2, NULL, NULL, '2026-01-04 00:00', 'D');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- delete in a gap: nothing
TRUNCATE ch; INSERT INTO ch VALUES (2, NULL, NULL, '2026-01-05 00:00', 'delete'), (9, NULL, NULL, '2026-01-05 00:00', 'd');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- upsert in a gap before a later version: new [t, n) ends where the next begins
TRUNCATE ch; INSERT INTO ch VALUES (3, 'cy', 300, '2026-01-06 00:00', 'r');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
TRUNCATE ch; INSERT INTO ch VALUES (3, 'cy', 299, '2026-01-04 00:00', 'c');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- resurrection: a deleted key comes back
TRUNCATE ch; INSERT INTO ch VALUES (2, 'bob', 250, '2026-01-07 00:00', NULL);
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show();

-- delete at exactly a version's start removes the version (a = t)
TRUNCATE ch; INSERT INTO ch VALUES (2, NULL, NULL, '2026-01-07 00:00', 'D');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 2;

-- a late change splits the version containing it and leaves later ones alone
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 105, '2026-01-02 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 1;

-- coalescing: a late change back to the neighbour's value merges versions
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 100, '2026-01-02 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 1;
-- and a same-instant replacement with the previous value merges with it
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 100, '2026-01-03 00:00', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 1;

-- several changes for one key in one batch, given out of order
TRUNCATE ch; INSERT INTO ch VALUES
  (4, 'dee', 3, '2026-01-10 03:00', 'U'),
  (4, 'dee', 1, '2026-01-10 01:00', 'I'),
  (4, NULL, NULL, '2026-01-10 04:00', 'D'),
  (4, 'dee', 2, '2026-01-10 02:00', 'U'),
  (4, 'dee', 2, '2026-01-10 02:30', 'U'),   -- no-op inside the batch
  (4, 'dee', 5, '2026-01-10 05:00', 'I');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 4;

-- NULL values compare as not distinct: an upsert of the same NULLs is a no-op
TRUNCATE ch; INSERT INTO ch VALUES (5, NULL, NULL, '2026-01-11', 'I');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
TRUNCATE ch; INSERT INTO ch VALUES (5, NULL, NULL, '2026-01-12', 'U'), (5, NULL, 1, '2026-01-13', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 5;

-- identical duplicates collapse silently
TRUNCATE ch; INSERT INTO ch VALUES (6, 'fay', 6, '2026-01-14', 'I'), (6, 'fay', 6, '2026-01-14', 'I');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT * FROM show() WHERE id = 6;

-- seq orders changes of the same key and time: the last one wins
CREATE TABLE ch_seq (id int, name text, amount int, ts timestamptz, kind text, n int);
INSERT INTO ch_seq VALUES (7, 'gus', 3, '2026-01-15', 'U', 3), (7, 'gus', 1, '2026-01-15', 'I', 1),
                          (7, 'gus', 2, '2026-01-15', 'U', 2);
SELECT * FROM zipper_lake.apply_changes('acc', 'ch_seq', change_time => 'ts', op => 'kind', seq => 'n');
SELECT * FROM show() WHERE id = 7;

-- a changes relation without an op column is all upserts; a view works too
CREATE VIEW ch_noop AS SELECT id, name, amount, change_time FROM ch;
TRUNCATE ch; INSERT INTO ch VALUES (8, 'hal', 8, '2026-01-16', 'D');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch_noop');
SELECT * FROM show() WHERE id = 8;

-- re-applying a batch changes nothing (idempotent)
CREATE TABLE before AS SELECT * FROM acc;
TRUNCATE ch; INSERT INTO ch VALUES
  (1, 'ann', 120, '2026-01-20', 'U'), (3, NULL, NULL, '2026-01-20', 'D'),
  (10, 'ivy', 10, '2026-01-18', 'I'), (1, 'ann', 90, '2026-01-01 06:00', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
CREATE TABLE after_once AS SELECT * FROM acc;
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
SELECT count(*) AS differences FROM ((TABLE acc EXCEPT ALL TABLE after_once) UNION ALL (TABLE after_once EXCEPT ALL TABLE acc)) d;
SELECT healthy();

-- a rolled-back application leaves no trace
BEGIN;
TRUNCATE ch; INSERT INTO ch VALUES (1, 'ann', 999, '2026-01-25', 'U');
SELECT * FROM zipper_lake.apply_changes('acc', 'ch');
ROLLBACK;
SELECT count(*) AS differences FROM ((TABLE acc EXCEPT ALL TABLE after_once) UNION ALL (TABLE after_once EXCEPT ALL TABLE acc)) d;

-- the layout: closed versions in the partitions of their end dates, open
-- versions in the current partition, masks on what was replaced
CREATE TABLE lay (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('lay', ARRAY['id'], max_subgroups => 2);
CREATE TABLE lay_ch (id int, v int, change_time timestamptz);
INSERT INTO lay_ch SELECT g, 0, '2026-03-01 00:00' FROM generate_series(1, 4) g;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('lay', 'lay_ch');
TRUNCATE lay_ch; INSERT INTO lay_ch SELECT g, 1, '2026-03-02 10:00' FROM generate_series(1, 2) g;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('lay', 'lay_ch');
TRUNCATE lay_ch; INSERT INTO lay_ch SELECT g, 2, '2026-03-03 10:00' FROM generate_series(2, 3) g;
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('lay', 'lay_ch');
TRUNCATE lay_ch; INSERT INTO lay_ch VALUES (4, 3, '2026-03-01 12:00');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('lay', 'lay_ch');
SELECT partition_end, dense_rank() OVER (ORDER BY file_group) AS file_group,
       to_char(window_start, 'MM-DD') AS window, to_char(first_start, 'MM-DD HH24:MI') AS first,
       to_char(last_start, 'MM-DD HH24:MI') AS last, row_count, masked_rows
  FROM zipper_lake.inspect('lay') ORDER BY partition_end, window_start, file_group, sub_group;
SELECT id, v, to_char(valid_from, 'MM-DD HH24:MI') AS f, to_char(valid_to, 'MM-DD HH24:MI') AS t
  FROM lay ORDER BY id, valid_from;  -- an empty t is the open end
SELECT * FROM zipper_lake.verify('lay');
-- compaction: a current sub-group more than half masked is rewritten, so
-- none is left that way (the fully masked first sub-group is gone)
SELECT count(*) AS over_half_masked FROM zipper_lake.inspect('lay')
 WHERE partition_end = 'infinity' AND masked_rows * 2 > row_count;
CREATE TABLE comp (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('comp', ARRAY['id']);
INSERT INTO comp SELECT g, 0, '2026-03-01', 'infinity' FROM generate_series(1, 10) g;
CREATE TABLE comp_ch (id int, v int, change_time timestamptz);
INSERT INTO comp_ch SELECT g, 1, '2026-03-05' FROM generate_series(1, 4) g;
SELECT changes, closed FROM zipper_lake.apply_changes('comp', 'comp_ch');
SELECT partition_end, to_char(window_start, 'MM-DD') AS window, row_count, masked_rows
  FROM zipper_lake.inspect('comp') ORDER BY partition_end, window_start, sub_group;
TRUNCATE comp_ch; INSERT INTO comp_ch SELECT g, 1, '2026-03-06' FROM generate_series(5, 6) g;
SELECT changes, closed FROM zipper_lake.apply_changes('comp', 'comp_ch');
SELECT partition_end, to_char(window_start, 'MM-DD') AS window, row_count, masked_rows
  FROM zipper_lake.inspect('comp') ORDER BY partition_end, window_start, sub_group;
SELECT count(*), count(*) FILTER (WHERE valid_to = 'infinity') AS open, sum(v) FROM comp;
SELECT * FROM zipper_lake.verify('comp');

-- a composite key with text and a time zone other than UTC
CREATE TABLE cust (region text, cid int, tier text, since date,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('cust', ARRAY['region', 'cid'], time_zone => 'Asia/Shanghai');
CREATE TABLE cust_ch (region varchar, cid smallint, tier text, since date, change_time timestamptz, op "char");
INSERT INTO cust_ch VALUES ('eu', 1, 'gold', '2020-01-01', '2026-05-01 20:00+00', 'I'),
                           ('us', 1, 'blue', '2021-01-01', '2026-05-01 20:00+00', 'I'),
                           ('eu', 1, 'plat', '2020-01-01', '2026-05-02 17:00+00', 'U');
SELECT * FROM zipper_lake.apply_changes('cust', 'cust_ch');
SELECT region, cid, tier, since, valid_from, valid_to FROM cust ORDER BY 1, 2, 5;
SELECT partition_end, row_count FROM zipper_lake.inspect('cust') ORDER BY 1;

-- a batch whose values live out of line in its own TOAST table: the versions
-- keep the values, not pointers into that table (they outlive it), also
-- when one is written to history and one stays open
CREATE TABLE tst (id int, doc text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('tst', ARRAY['id']);
CREATE TABLE tst_ch (id int, doc text, change_time timestamptz);
ALTER TABLE tst_ch ALTER COLUMN doc SET STORAGE EXTERNAL;
INSERT INTO tst_ch SELECT g, repeat(md5(g::text), 100 * g), '2026-06-01' FROM generate_series(1, 3) g;
INSERT INTO tst_ch SELECT 1, repeat(md5('x'), 150), '2026-06-03';
SELECT pg_relation_size(reltoastrelid) > 0 AS batch_toasted FROM pg_class WHERE relname = 'tst_ch';
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('tst', 'tst_ch');
DROP TABLE tst_ch;
SELECT id, valid_to, length(doc),
       doc IN (repeat(md5(id::text), 100 * id), repeat(md5('x'), 150)) AS whole
  FROM tst ORDER BY id, valid_from;
-- the freed memory a backend keeps for reuse (README "Performance"):
-- 256 MB unless set; 0 sets the C library's initial thresholds, and applies
-- give the same answers under either
SHOW zipper_lake.retained_memory;
SET zipper_lake.retained_memory = -1;
SET zipper_lake.retained_memory = 0;
CREATE TABLE tst_ch (id int, doc text, change_time timestamptz);
INSERT INTO tst_ch VALUES (2, 'two', '2026-06-04'), (4, 'four', '2026-06-04');
SELECT changes, inserted, closed FROM zipper_lake.apply_changes('tst', 'tst_ch');
RESET zipper_lake.retained_memory;
SHOW zipper_lake.retained_memory;
SELECT id, valid_from, valid_to, left(doc, 8) FROM tst WHERE id IN (2, 4) ORDER BY id, valid_from;
DROP TABLE tst_ch;
