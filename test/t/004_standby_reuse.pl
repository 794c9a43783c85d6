# Reusing the blocks of deleted sub-groups is safe for hot standby queries.
#
# The primary knows nothing of a standby query's snapshot (no
# hot_standby_feedback here), so it reuses the blocks of a sub-group that
# the standby query can still see.  Before it overwrites them it logs a
# recovery-conflict record; with max_standby_streaming_delay = -1 replay
# waits at that record for the standby query to finish instead of
# overwriting the pages under it.  The standby query therefore keeps
# reading its snapshot's rows; once it ends, replay goes on and the
# standby matches the primary.
#
# The same holds when the free blocks are given back to the file system
# (reclaim() then VACUUM's truncation) instead of being written again,
# and when VACUUM removes index entries of rows the standby query sees.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
# open versions stay in rows: VACUUM writing them columnar would add blocks at the end it truncates
$primary->append_conf('postgresql.conf', 'zipper_lake.columnar_current = off');
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', qq(
hot_standby_feedback = off
max_standby_streaming_delay = -1
));
$standby->start;

# whether replay stays short of the primary's current WAL position for
# three seconds, the time it would need to catch up if nothing stopped it
sub replay_waits
{
	my $primary_lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	for (1 .. 30)
	{
		return 0
		  if $standby->safe_psql('postgres',
			qq(SELECT pg_last_wal_replay_lsn() >= '$primary_lsn'::pg_lsn)) eq 't';
		usleep(100_000);
	}
	return 1;
}

# every key changes every day: each day compacts the previous day's current
# sub-group, whose blocks a later day reuses
$primary->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE churn (id int, v int, valid_from timestamptz NOT NULL,
                    valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('churn', ARRAY['id']);
CREATE TABLE churn_ch (id int, v int, change_time timestamptz);
CREATE FUNCTION churn_day(d int) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE churn_ch;
  INSERT INTO churn_ch SELECT k, d, '2026-01-01'::timestamptz + d * interval '1 day'
    FROM generate_series(1, 2000) k;
  RETURN (SELECT changes FROM zipper_lake.apply_changes('churn', 'churn_ch'));
END $$;
SELECT churn_day(1);
SELECT churn_day(2);
));
$primary->wait_for_catchup($standby);

my $sum_sql = q(SELECT count(*) || ' ' || sum(v) FROM churn);

# a standby transaction takes its snapshot: day 2's current sub-group
my $session = $standby->background_psql('postgres');
$session->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($session->query_safe($sum_sql), '4000 6000', 'standby snapshot sees two days');

# day 3 compacts that sub-group; day 4 writes into its blocks
$primary->safe_psql('postgres', 'SELECT churn_day(3)');
$primary->safe_psql('postgres', 'SELECT churn_day(4)');
is($primary->safe_psql('postgres', $sum_sql), '8000 20000', 'primary has four days');
ok($primary->safe_psql('postgres', q(
SELECT count(*) FROM zipper_lake.inspect('churn')
 WHERE first_block < (SELECT max(first_block) FROM zipper_lake.inspect('churn'))
   AND partition_end >= '2026-01-04')) > 0, 'primary wrote later sub-groups into earlier blocks');

ok(replay_waits(), 'replay waits at the conflict while the standby snapshot lives');
is($session->query_safe($sum_sql), '4000 6000',
	'standby snapshot still reads its own rows');
$session->query_safe('COMMIT');
$session->quit;

# the snapshot is gone: replay goes on and the standby matches the primary
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $sum_sql), '8000 20000', 'standby has four days');
is($standby->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('churn'))), '',
	'verify is clean on the standby');
is($standby->safe_psql('postgres',
		q(SELECT count(*) FROM zipper_lake.inspect('churn') i JOIN zipper_lake.inspect('churn') j
             ON i.sub_group < j.sub_group AND i.first_block < j.first_block + j.blocks
            AND j.first_block < i.first_block + i.blocks)), '0',
	'no two visible sub-groups share blocks');

# Free blocks at the end of the file go back to the file system: reclaim()
# gives up the free extents there (logging the same conflict record) and
# VACUUM truncates them.  A standby transaction whose snapshot still sees
# the deleted sub-group, but has not opened the table yet (so holds no lock
# that VACUUM's exclusive lock would conflict with), must not find the
# file truncated under it: replay waits at reclaim's conflict record.
$primary->safe_psql('postgres', q(
CREATE TABLE tail_t (id int, v int, valid_from timestamptz NOT NULL,
                     valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('tail_t', ARRAY['id']);
INSERT INTO tail_t SELECT k, 1, '2026-01-01', 'infinity' FROM generate_series(1, 1000) k;
INSERT INTO tail_t SELECT k, 2, '2026-02-01', 'infinity' FROM generate_series(2001, 7000) k;
CREATE TABLE tail_del (id int, v int, change_time timestamptz, op text);
INSERT INTO tail_del SELECT k, NULL, '2026-02-01', 'D' FROM generate_series(2001, 7000) k;
));
$primary->wait_for_catchup($standby);
my $tail_sql = q(SELECT count(*) || ' ' || sum(v) FROM tail_t);

$session = $standby->background_psql('postgres');
$session->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$session->query_safe('SELECT count(*) FROM pg_class');

# deleting the rows at their valid_from leaves no history: the last
# sub-group of the file is compacted away
my $size_sql = q(SELECT pg_relation_size('tail_t') / 8192);
my $blocks_before = $primary->safe_psql('postgres', $size_sql);
$primary->safe_psql('postgres', q(SELECT zipper_lake.apply_changes('tail_t', 'tail_del')));
ok($primary->safe_psql('postgres', q(SELECT zipper_lake.reclaim('tail_t'))) > 0,
	'reclaim gives up the free extent at the end of the file');
$primary->safe_psql('postgres', 'VACUUM tail_t');
my $blocks_after = $primary->safe_psql('postgres', $size_sql);
ok($blocks_after < $blocks_before, "VACUUM truncated the file ($blocks_before -> $blocks_after blocks)");
ok(replay_waits(), 'replay waits at the conflict while the standby snapshot lives');
is($session->query_safe($tail_sql), '6000 11000',
	'standby snapshot reads the rows of the deleted sub-group');
$session->query_safe('COMMIT');
$session->quit;

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $tail_sql), '1000 1000', 'standby has the rows left');
is($standby->safe_psql('postgres', $size_sql), $blocks_after, 'standby file truncated too');
is($standby->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('tail_t'))), '',
	'verify is clean on the standby');

# VACUUM's index pass removes the entries of rows every snapshot on the
# primary no longer sees; a standby snapshot may still see them.  The pass
# logs the same conflict record before the first entry goes, so replay
# waits there and the standby's index scan keeps finding its rows (a tenth
# of the keys change: too few for VACUUM to compact their sub-group, so
# no reuse of blocks logs a conflict of its own).
$primary->safe_psql('postgres', q(
CREATE TABLE ixs (id int, v int, valid_from timestamptz NOT NULL,
                  valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ixs', ARRAY['id']);
INSERT INTO ixs SELECT k, 1, '2026-01-01', 'infinity' FROM generate_series(1, 1000) k;
CREATE INDEX ixs_v ON ixs (v);
CREATE TABLE ixs_ch (id int, v int, change_time timestamptz);
INSERT INTO ixs_ch SELECT k, 2, '2026-01-02' FROM generate_series(1, 1000, 10) k;
));
$primary->wait_for_catchup($standby);
my $open_sql = q(SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM ixs WHERE v = 1 AND valid_to = 'infinity');

$session = $standby->background_psql('postgres');
$session->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
is($session->query_safe($open_sql), '1000', 'standby snapshot finds 1000 open rows through the index');

$primary->safe_psql('postgres', q(SELECT zipper_lake.apply_changes('ixs', 'ixs_ch')));
$primary->safe_psql('postgres', 'VACUUM ixs');
is($primary->safe_psql('postgres', $open_sql), '900', 'primary: 100 keys changed');
ok(replay_waits(), 'replay waits at the index pass\'s conflict while the standby snapshot lives');
is($session->query_safe($open_sql), '1000', 'standby snapshot still finds its rows through the index');
$session->query_safe('COMMIT');
$session->quit;

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $open_sql), '900', 'standby follows the primary');

$standby->stop;
$primary->stop;
done_testing();
