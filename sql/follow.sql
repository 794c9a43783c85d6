-- Following a live source (README "Following a live source"), on a server
-- without zipper_lake preloaded: arguments checked, follow() refused with
-- a hint, the view and its hidden passwords, apply refused on a followed
-- table.  Following itself: TAP test/t/017_follow_workload.pl and
-- test/t/018_follow.pl.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
CREATE TABLE fl (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('fl', ARRAY['id']);
CREATE TABLE fl_src (id int PRIMARY KEY, v text);

-- bad arguments: each named, nothing created
SELECT zipper_lake.follow('fl', 'fl_src');
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p', batch_changes => 0);
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p', batch_interval => '1 month');
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p', batch_interval => '0');
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p', missing_columns => 'drop');
SELECT zipper_lake.follow('fl', NULL, publication => 'p');
BEGIN;
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p');
ROLLBACK;
-- a zipper table with date periods: the day's changes would share the image's instant
CREATE TABLE fl_day (id int, v text, valid_from date NOT NULL, valid_to date NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('fl_day', ARRAY['id']);
SELECT zipper_lake.follow('fl_day', 'fl_src', publication => 'p');
DROP TABLE fl_day;
-- not preloaded: refused, saying how
SELECT zipper_lake.follow('fl', 'fl_src', publication => 'p');
SELECT count(*) AS slots FROM pg_replication_slots;

-- the other functions need a follower
SELECT zipper_lake.pause('fl');
SELECT zipper_lake.resume('fl');
SELECT zipper_lake.set_follow('fl', batch_changes => 5);
SELECT zipper_lake.unfollow('fl');

-- a follower's row (as follow() writes it): the view hides the password,
-- apply_* are refused, set_follow checks and changes options
INSERT INTO zipper_lake.follower (tbl, owner, source_table, source_relid, connection, publication,
    slot, batch_changes, batch_interval, missing_columns, state, image_time, applied_lsn,
    caught_up_lsn, source_lsn, checked_at)
VALUES ('fl'::regclass, current_user::regrole, 'public.fl_src', 'fl_src'::regclass,
        'host=core dbname=bank user=zl password=s3cr''et', 'p', 'zipper_lake_follow_x', 100,
        '1 second', 'error', 'paused', '2026-01-01', '0/10', '0/20', '0/30', '2026-01-01 00:00:05');
SELECT tbl, source_table, connection, publication, state, worker_pid, lag_bytes, lag > '0' AS lags,
       transactions_applied, last_error
  FROM zipper_lake.followers;
CREATE TABLE fl_ch (id int, v text, change_time timestamptz);
SELECT * FROM zipper_lake.apply_changes('fl', 'fl_ch');
SELECT zipper_lake.set_follow('fl', batch_changes => -1);
SELECT zipper_lake.set_follow('fl', batch_changes => 7, batch_interval => '250 ms', missing_columns => 'keep');
SELECT batch_changes, batch_interval, missing_columns FROM zipper_lake.follower;
SELECT zipper_lake.pause('fl');
SELECT state FROM zipper_lake.followers;
-- its last error may quote the source's values: shown to those who may
-- read the zipper table only
UPDATE zipper_lake.follower SET last_error = 'new row violates check constraint (Failing row contains (2, secret))';
CREATE ROLE zl_follow_outsider;
SET ROLE zl_follow_outsider;
SELECT tbl, state, last_error FROM zipper_lake.followers;
RESET ROLE;
DROP ROLE zl_follow_outsider;
SELECT tbl, state, last_error FROM zipper_lake.followers;
DELETE FROM zipper_lake.follower;

-- connection strings as the view shows them
SELECT zipper_lake._follow_connection_shown(c)
  FROM (VALUES ('host=h password=p'), ('postgresql://u:pw@h:5432/db'), ('dbname=''a b'''),
               ('host=h sslkey=k.pem sslpassword=keypass'),
               ('not a connection string')) v(c);

-- the table of followers is the extension owner's alone
CREATE ROLE zl_follow_reader;
SET ROLE zl_follow_reader;
SELECT count(*) FROM zipper_lake.follower;
SELECT count(*) FROM zipper_lake.followers;
RESET ROLE;
DROP ROLE zl_follow_reader;
DROP TABLE fl, fl_src, fl_ch;
