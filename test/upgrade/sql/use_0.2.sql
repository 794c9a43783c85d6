-- after ALTER EXTENSION UPDATE: the new API on tables written by 0.1
SET timezone = 'UTC';
\set SHOW_CONTEXT never
SELECT extversion FROM pg_extension WHERE extname = 'zipper_lake';
-- op => NULL: the column op when there is one, none at all when not
CREATE TABLE more (id bigint, owner text, balance numeric, change_time timestamptz);
INSERT INTO more SELECT i, 'n' || i, i, '2024-01-06' FROM generate_series(1, 200, 5) i;
SELECT * FROM zipper_lake.apply_changes('acct', 'more');
SELECT * FROM zipper_lake.apply_changes('acct', 'more', op => 'missing');
CREATE TABLE empty_image (id bigint, owner text, balance numeric);
SELECT * FROM zipper_lake.apply_snapshot('acct', 'empty_image', '2024-01-07');
SELECT count(*), sum(balance) FROM zipper_lake.current(NULL::acct);
INSERT INTO dated VALUES (51, 'x', '2023-05-01', '9999-12-31');
SELECT count(*) FROM dated WHERE valid_to = '9999-12-31';
SELECT * FROM zipper_lake.apply_changes('compat', 'compat_ch');
SELECT t, v.* FROM unnest(ARRAY['acct', 'dated', 'preload', 'derived', 'compat']) t,
       zipper_lake.verify(t::regclass) v;
-- history 0.1 wrote stays in rows and is read as it is; history written
-- since the update is columnar (README "Storage formats")
SELECT history_format FROM zipper_lake.registration WHERE tbl = 'acct'::regclass;
SELECT format, partition_end = 'infinity' AS current, count(*) AS sub_groups
  FROM zipper_lake.inspect('acct') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*), sum(balance) FROM zipper_lake.as_of(NULL::acct, '2024-01-06 12:00');
-- the DDL path of the new version cleans up tables 0.1 created
SELECT zipper_lake._storage_id('derived') AS sid \gset
DROP TABLE derived;
SELECT count(*) FROM zipper_lake.subgroup WHERE storage_id = :sid;
SELECT count(*) FROM zipper_lake.registration WHERE tbl::text = 'derived';
ALTER TABLE acct RENAME COLUMN id TO ident;
-- versions 0.1 loaded unmerged: key 1 (equal by numeric's =, json as text);
-- key 2 differs in json, key 3 has a gap
SELECT * FROM zipper_lake.verify('legacy_adjacent');
