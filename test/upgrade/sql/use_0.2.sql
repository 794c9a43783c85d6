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
-- README "Row identifiers": the update numbered the sub-groups 0.1 wrote,
-- one after another, and rows old and new are found by their TIDs
SELECT count(*) AS sub_groups, count(DISTINCT first_tid_block) AS tid_starts
  FROM zipper_lake.subgroup WHERE storage_id = zipper_lake._storage_id('acct');
SELECT count(*) AS rows,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM acct f WHERE f.ctid = s.ctid AND f.id = s.id
                                       AND f.valid_from = s.valid_from)) AS found_by_tid
  FROM acct s;
-- history 0.1 wrote stays in rows and is read as it is; history written
-- since the update is columnar (README "Storage formats"), one file group
-- for the batch's versions that started over several days (README
-- "Packing"; 0.1 wrote one a day)
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
-- lifecycle on data 0.1 wrote (README "Lifecycle"): a key erased, history
-- dropped, a column added, then changed and read again
CREATE TABLE forget (id bigint);
INSERT INTO forget VALUES (3), (10);
SELECT zipper_lake.erase('acct', 'forget');
SELECT count(*) FROM acct WHERE id IN (3, 10);
SELECT zipper_lake.drop_history('acct', '2024-01-02 12:00+08');
SELECT count(*) FROM acct WHERE valid_to <= '2024-01-02 12:00+08';
SELECT zipper_lake.drop_history('dated', '2023-03-10');
SELECT count(*) FROM dated WHERE valid_to <= '2023-03-10';
ALTER TABLE acct ADD COLUMN branch text DEFAULT 'main';
CREATE TABLE after_erase (id bigint, owner text, balance numeric, branch text, change_time timestamptz);
INSERT INTO after_erase VALUES (3, 'back', 1, 'east', '2024-01-08'), (4, 'o4', 44, 'west', '2024-01-08');
SELECT * FROM zipper_lake.apply_changes('acct', 'after_erase');
SELECT id, owner, branch, valid_from, valid_to FROM acct WHERE id IN (3, 4) ORDER BY id, valid_from;
VACUUM acct;
SELECT t, v.* FROM unnest(ARRAY['acct', 'dated']) t, zipper_lake.verify(t::regclass) v;
