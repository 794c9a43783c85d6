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

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', qq(
hot_standby_feedback = off
max_standby_streaming_delay = -1
));
$standby->start;

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
my $primary_lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
is($primary->safe_psql('postgres', $sum_sql), '8000 20000', 'primary has four days');
ok($primary->safe_psql('postgres', q(
SELECT count(*) FROM zipper_lake.inspect('churn')
 WHERE first_block < (SELECT max(first_block) FROM zipper_lake.inspect('churn'))
   AND partition_end >= '2026-01-04')) > 0, 'primary wrote later sub-groups into earlier blocks');

# give replay time to reach the end of the primary's WAL if nothing stops it
my $caught_up = 0;
for (1 .. 30)
{
	$caught_up = $standby->safe_psql('postgres',
		qq(SELECT pg_last_wal_replay_lsn() >= '$primary_lsn'::pg_lsn)) eq 't';
	last if $caught_up;
	usleep(100_000);
}
ok(!$caught_up, 'replay waits at the conflict while the standby snapshot lives');
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

$standby->stop;
$primary->stop;
done_testing();
