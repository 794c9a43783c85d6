# Scheduled batch jobs (README "Following a live source"): for sources that
# can only deliver files, pg_cron runs apply_changes and apply_snapshot on
# a schedule.  Two jobs, each one command (one transaction): changes loaded
# into a staging table are applied and the staging table emptied; an image
# is applied as a snapshot at the job's time.  The test waits for pg_cron
# to run both (its schedules are by the minute), then checks their runs
# succeeded and the zipper tables hold what a direct call gives.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->append_conf('postgresql.conf', q(
shared_preload_libraries = 'pg_cron, zipper_lake'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
));
$node->start;
$node->safe_psql('postgres', q(ALTER DATABASE postgres SET timezone = 'UTC'));
$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE EXTENSION pg_cron;
CREATE TABLE account (id int, owner text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('account', ARRAY['id']);
CREATE TABLE account_changes (id int, owner text, change_time timestamptz, op text);
INSERT INTO account_changes VALUES (1, 'ann', '2026-01-01', 'I'), (2, 'bob', '2026-01-01', 'I'),
                                   (1, 'ann b', '2026-01-02', 'U'), (2, NULL, '2026-01-03', 'D');
CREATE TABLE branch (id int, name text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('branch', ARRAY['id']);
CREATE TABLE branch_file (id int, name text);
INSERT INTO branch_file VALUES (7, 'north'), (8, 'south');
SELECT cron.schedule('account-changes', '* * * * *',
  $$SELECT zipper_lake.apply_changes('account', 'account_changes'); TRUNCATE account_changes$$);
SELECT cron.schedule('branch-image', '* * * * *',
  $$SELECT zipper_lake.apply_snapshot('branch', 'branch_file', now())$$);
));

$node->poll_query_until('postgres',
	q(SELECT count(DISTINCT jobid) = 2 FROM cron.job_run_details WHERE status IN ('succeeded', 'failed')))
  or die 'pg_cron did not run the jobs';
is($node->safe_psql('postgres',
		q(SELECT string_agg(DISTINCT status, ',') FROM cron.job_run_details WHERE status IN ('succeeded', 'failed'))),
	'succeeded', 'both scheduled jobs succeeded');
is($node->safe_psql('postgres',
		q(SELECT string_agg(id || ' ' || owner || ' ' || valid_from::date || ' ' || valid_to, '; ' ORDER BY id, valid_from)
		    FROM account)),
	'1 ann 2026-01-01 2026-01-02 00:00:00+00; 1 ann b 2026-01-02 infinity; 2 bob 2026-01-01 2026-01-03 00:00:00+00',
	'the changes job applied the changes at their own times');
is($node->safe_psql('postgres', 'SELECT count(*) FROM account_changes'), '0',
	'and emptied the staging table in the same transaction');
is($node->safe_psql('postgres',
		q(SELECT string_agg(id || ' ' || name, '; ' ORDER BY id) FROM branch WHERE valid_to = 'infinity')),
	'7 north; 8 south', 'the snapshot job applied the image');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('account'))), '0', 'verify is clean');

$node->safe_psql('postgres', q(SELECT cron.unschedule('account-changes'); SELECT cron.unschedule('branch-image')));
done_testing();
