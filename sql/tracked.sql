-- README "Tracked columns": only changes of the tracked columns make
-- versions; a version shows, for the others, what the last change inside
-- its period gave — a fold too, so late changes re-evaluate it.
SET timezone = 'UTC';
SET datestyle = 'ISO';
CREATE TABLE tc (id int, price int, note text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('tc', ARRAY['id'], track_columns => ARRAY['price']);
SELECT track_columns FROM zipper_lake.registration WHERE tbl = 'tc'::regclass;
CREATE FUNCTION tc_show() RETURNS TABLE (id int, price int, note text, valid_from text, valid_to text)
LANGUAGE sql AS $$
    SELECT id, price, note, to_char(valid_from, 'MM-DD HH24:MI'),
           CASE WHEN valid_to = 'infinity' THEN 'open' ELSE to_char(valid_to, 'MM-DD HH24:MI') END
      FROM tc ORDER BY id, valid_from
$$;
CREATE TABLE tc_ch (id int, price int, note text, change_time timestamptz);

-- a change of the note only makes no version, but the version shows it
INSERT INTO tc_ch VALUES (1, 10, 'a', '2024-01-01'), (1, 10, 'b', '2024-01-02'), (1, 20, 'c', '2024-01-03');
SELECT * FROM zipper_lake.apply_changes('tc', 'tc_ch');
SELECT * FROM tc_show();
-- late, inside the first version: the last change inside its period is now 01-02 12:00
TRUNCATE tc_ch;
INSERT INTO tc_ch VALUES (1, 10, 'z', '2024-01-02 12:00');
SELECT * FROM zipper_lake.apply_changes('tc', 'tc_ch');
SELECT * FROM tc_show();
-- late, splitting it: each part shows the last change inside its own period
-- (01-01's 'a', remembered by the change record, and 01-02 12:00's 'z')
TRUNCATE tc_ch;
INSERT INTO tc_ch VALUES (1, 15, 'q', '2024-01-01 12:00');
SELECT * FROM zipper_lake.apply_changes('tc', 'tc_ch');
SELECT * FROM tc_show();
-- the same changes in one batch give the same history
CREATE TABLE tc_one (LIKE tc) USING zipper_lake;
SELECT zipper_lake.register('tc_one', ARRAY['id'], track_columns => ARRAY['price']);
CREATE TABLE tc_all (id int, price int, note text, change_time timestamptz);
INSERT INTO tc_all VALUES (1, 10, 'a', '2024-01-01'), (1, 10, 'b', '2024-01-02'), (1, 20, 'c', '2024-01-03'),
                          (1, 10, 'z', '2024-01-02 12:00'), (1, 15, 'q', '2024-01-01 12:00');
SELECT * FROM zipper_lake.apply_changes('tc_one', 'tc_all');
SELECT count(*) AS differences
  FROM ((TABLE tc EXCEPT ALL TABLE tc_one) UNION ALL (TABLE tc_one EXCEPT ALL TABLE tc)) d;
SELECT * FROM zipper_lake.verify('tc');

-- a renamed tracked column stays tracked; a tracked column cannot be
-- dropped; the set is settable later (NULL: every value column)
ALTER TABLE tc RENAME COLUMN price TO amount;
SELECT track_columns FROM zipper_lake.registration WHERE tbl = 'tc'::regclass;
ALTER TABLE tc DROP COLUMN amount;
\echo :SQLSTATE
CREATE TABLE tc_ch2 (id int, amount int, note text, change_time timestamptz);
INSERT INTO tc_ch2 VALUES (1, 20, 'd', '2024-01-04');
SELECT * FROM zipper_lake.apply_changes('tc', 'tc_ch2');
SELECT * FROM tc WHERE valid_to = 'infinity';
SELECT zipper_lake.set_track_columns('tc', NULL);
TRUNCATE tc_ch2;
INSERT INTO tc_ch2 VALUES (1, 20, 'e', '2024-01-05');
SELECT * FROM zipper_lake.apply_changes('tc', 'tc_ch2');
SELECT note, valid_from::date FROM tc WHERE valid_from >= '2024-01-03' ORDER BY valid_from;
-- bad sets
SELECT zipper_lake.set_track_columns('tc', ARRAY[]::text[]);
\echo :SQLSTATE
SELECT zipper_lake.set_track_columns('tc', ARRAY['id']);
\echo :SQLSTATE
SELECT zipper_lake.set_track_columns('tc', ARRAY['nope']);
\echo :SQLSTATE
SELECT zipper_lake.set_track_columns('tc', ARRAY['note', 'note']);
\echo :SQLSTATE
DROP TABLE tc, tc_ch, tc_one, tc_all, tc_ch2;
DROP FUNCTION tc_show();
