-- README "Partial changes": ignore_nulls and missing_columns.  A partial
-- change sets the columns it gives and keeps the others from what the key
-- holds at that point of the fold, so a late full change before it
-- changes what it keeps.
SET timezone = 'UTC';
SET datestyle = 'ISO';
CREATE TABLE pc (id int, a int, b text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('pc', ARRAY['id']);
CREATE FUNCTION pc_show() RETURNS TABLE (id int, a int, b text, valid_from date, valid_to text)
LANGUAGE sql AS $$
    SELECT id, a, b, valid_from::date, CASE WHEN valid_to = 'infinity' THEN 'open' ELSE valid_to::date::text END
      FROM pc ORDER BY id, valid_from
$$;
CREATE TABLE pc_ch (id int, a int, b text, change_time timestamptz, op text);

-- ignore_nulls: a NULL keeps the column; without it a NULL is a value
INSERT INTO pc_ch VALUES (1, 1, 'x', '2024-01-01', 'I'), (2, 1, 'x', '2024-01-01', 'I');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch');
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 2, NULL, '2024-01-03', 'U'), (2, 2, NULL, '2024-01-03', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch', ignore_nulls => true);
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 3, NULL, '2024-01-05', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch');
SELECT * FROM pc_show();
-- a late full change before the partial one at 01-03 changes what it kept
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 5, 'y', '2024-01-02', 'U'), (2, 5, 'y', '2024-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch');
SELECT * FROM pc_show();
-- a partial change that gives what is held is a no-op; re-applied, nothing
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (2, 2, NULL, '2024-01-04', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch', ignore_nulls => true);
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 2, NULL, '2024-01-03', 'U'), (2, 2, NULL, '2024-01-03', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch', ignore_nulls => true);
SELECT * FROM pc_show();
-- a partial change of an absent key keeps nothing: NULL
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (3, 7, NULL, '2024-01-01', 'I');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch', ignore_nulls => true);
SELECT * FROM pc_show() WHERE id = 3;

-- missing_columns: a value column the changes lack
CREATE TABLE pc_only_a (id int, a int, change_time timestamptz);
INSERT INTO pc_only_a VALUES (1, 9, '2024-01-06');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_only_a');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_only_a', missing_columns => 'sometimes');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_only_a', missing_columns => 'keep');
TRUNCATE pc_only_a;
INSERT INTO pc_only_a VALUES (2, 9, '2024-01-06');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_only_a', missing_columns => 'null');
SELECT * FROM pc_show() WHERE id IN (1, 2) AND valid_from >= '2024-01-05';
-- a key column is never optional
CREATE TABLE pc_no_key (a int, b text, change_time timestamptz);
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_no_key', missing_columns => 'keep');
\echo :SQLSTATE
-- late across batches: a full change before the kept one at 01-06
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 4, 'z', '2024-01-05 12:00', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch');
SELECT * FROM pc_show() WHERE id = 1 AND valid_from >= '2024-01-05';

-- after ADD COLUMN, batches without the new column: an error by default,
-- kept (NULL until some change gives it) with missing_columns => 'keep'
ALTER TABLE pc ADD COLUMN c text;
TRUNCATE pc_ch;
INSERT INTO pc_ch VALUES (1, 10, 'z', '2024-01-08', 'U');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch');
\echo :SQLSTATE
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_ch', missing_columns => 'keep');
CREATE TABLE pc_with_c (id int, a int, b text, c text, change_time timestamptz);
INSERT INTO pc_with_c VALUES (1, 10, 'z', 'new', '2024-01-07');
SELECT * FROM zipper_lake.apply_changes('pc', 'pc_with_c');
SELECT id, a, b, c, valid_from::date, valid_to FROM pc WHERE id = 1 AND valid_from >= '2024-01-06'
 ORDER BY valid_from;

-- apply_snapshot takes them too
CREATE TABLE pc_img (id int, a int, b text, c text);
INSERT INTO pc_img VALUES (2, 9, NULL, 'img');
SELECT * FROM zipper_lake.apply_snapshot('pc', 'pc_img', '2024-01-09', deletes => false, ignore_nulls => true);
SELECT id, a, b, c, valid_from::date FROM pc WHERE id = 2 AND valid_to = 'infinity';

-- the record keeps the columns of partial changes; healthy
SELECT sum(instants) > 0 AS remembers FROM zipper_lake.inspect_record('pc');
SELECT * FROM zipper_lake.verify('pc');
DROP TABLE pc, pc_ch, pc_only_a, pc_no_key, pc_with_c, pc_img;
DROP FUNCTION pc_show();
