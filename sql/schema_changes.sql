-- Schema changes (README "Lifecycle"): ADD / DROP / RENAME COLUMN of value
-- columns on both history formats, applying before and after each.
SET timezone = 'UTC';
-- a schema of its own: the regression tests share one database
CREATE SCHEMA schema_changes;
SET search_path = schema_changes, public;

CREATE TABLE sr (id int, a int, u text, w text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('sr', ARRAY['id'], track_columns => ARRAY['a', 'w'], history_format => 'rows');
CREATE TABLE sc (LIKE sr) USING zipper_lake;
SELECT zipper_lake.register('sc', ARRAY['id'], track_columns => ARRAY['a', 'w'], history_format => 'columnar');
CREATE TABLE ch (id int, a int, u text, w text, change_time timestamptz);
-- key 1 at Jan 3 changes only the untracked u: the record keeps 'y'
INSERT INTO ch VALUES (1, 1, 'x', 'w1', '2024-01-01'), (1, 1, 'y', 'w1', '2024-01-03'),
                      (1, 2, 'z', 'w1', '2024-01-05'), (2, 5, 'p', 'w2', '2024-01-01');
SELECT changes, inserted, closed, unchanged FROM zipper_lake.apply_changes('sr', 'ch');
SELECT changes, inserted, closed, unchanged FROM zipper_lake.apply_changes('sc', 'ch');

-- ADD COLUMN with a default: old versions show it; without one: NULL
ALTER TABLE sr ADD COLUMN d int DEFAULT 42, ADD COLUMN n text;
ALTER TABLE sc ADD COLUMN d int DEFAULT 42, ADD COLUMN n text;
SELECT id, a, u, w, d, n, valid_from, valid_to FROM sr ORDER BY id, valid_from;
SELECT (SELECT count(*) FROM (TABLE sr EXCEPT ALL TABLE sc) x) AS formats_differ;
-- a volatile default rewrites every version (README "DDL"): each its own
-- value, the others' values kept (d's default of the versions written
-- before it was added too); dropped again for the steps below
CREATE TABLE sc_before AS SELECT id, a, u, w, d, n, valid_from, valid_to FROM sc;
ALTER TABLE sc ADD COLUMN r float DEFAULT random();
SELECT count(*) AS versions, count(DISTINCT r) AS own_values,
       (SELECT count(*) FROM ((SELECT id, a, u, w, d, n, valid_from, valid_to FROM sc EXCEPT ALL SELECT * FROM sc_before)
                              UNION ALL (SELECT * FROM sc_before EXCEPT ALL SELECT id, a, u, w, d, n, valid_from, valid_to FROM sc)) x) AS differences
  FROM sc;
SELECT * FROM zipper_lake.verify('sc');
ALTER TABLE sc DROP COLUMN r;
DROP TABLE sc_before;
-- apply with the new columns
CREATE TABLE ch2 (id int, a int, u text, w text, d int, n text, change_time timestamptz);
INSERT INTO ch2 VALUES (1, 2, 'z', 'w1', 7, 'added', '2024-01-06'), (2, 5, 'p', 'w2', 42, NULL, '2024-01-06');
SELECT changes, inserted, closed, unchanged FROM zipper_lake.apply_changes('sr', 'ch2');
SELECT changes, inserted, closed, unchanged FROM zipper_lake.apply_changes('sc', 'ch2');
SELECT id, a, u, w, d, n, valid_from, valid_to FROM sc ORDER BY id, valid_from;

-- RENAME COLUMN: track_columns follows
ALTER TABLE sr RENAME COLUMN w TO w_renamed;
ALTER TABLE sc RENAME COLUMN w TO w_renamed;
SELECT tbl, track_columns FROM zipper_lake.registration WHERE tbl IN ('sr'::regclass, 'sc'::regclass) ORDER BY 1;

-- DROP COLUMN of the untracked u, whose values the record holds
ALTER TABLE sr DROP COLUMN u;
ALTER TABLE sc DROP COLUMN u;
-- a late change before Jan 3 replays that record instant without u
CREATE TABLE late (id int, a int, w_renamed text, d int, n text, change_time timestamptz);
INSERT INTO late VALUES (1, 7, 'w1', 42, NULL, '2024-01-02');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('sr', 'late');
SELECT changes, inserted, closed, late FROM zipper_lake.apply_changes('sc', 'late');
SELECT * FROM sc ORDER BY id, valid_from;
SELECT (SELECT count(*) FROM (TABLE sr EXCEPT ALL TABLE sc) x) AS formats_differ;
SELECT (SELECT count(*) FROM zipper_lake.verify('sr')) AS sr_problems,
       (SELECT count(*) FROM zipper_lake.verify('sc')) AS sc_problems;
SELECT * FROM zipper_lake.as_of(NULL::sc, '2024-01-02 12:00') ORDER BY id;

-- lifecycle after the changes: history dropped, a key erased
SELECT zipper_lake.drop_history('sc', '2024-01-02');
CREATE TABLE forget (id int);
INSERT INTO forget VALUES (2);
SELECT zipper_lake.erase('sc', 'forget');
SELECT * FROM sc ORDER BY id, valid_from;
SELECT count(*) AS sc_problems FROM zipper_lake.verify('sc');

-- key and period columns and tracked columns stay protected
ALTER TABLE sc RENAME COLUMN id TO key_id;
ALTER TABLE sc DROP COLUMN valid_to;
ALTER TABLE sc ALTER COLUMN valid_from TYPE timestamp;
ALTER TABLE sc DROP COLUMN a;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA schema_changes CASCADE;
