# Applying to a zipper parent in background workers (README "Scaling out",
# src/apply/zl_apply_workers.c) is all leaves or none, also across crashes.
#
# With zipper_lake.apply_workers = 2 the coordinator (worker 0) applies its
# leaf in an ordinary transaction, worker 1 prepares its own; the
# coordinator's commit decides.  zipper_lake.apply_prepared_pause holds
# the coordinator before its commit, and worker 1 before it finishes its
# prepared transaction once the coordinator ended:
#
#  - kill -9 of the coordinator while it waits: nothing of the batch is
#    visible after the restart, and resolve() rolls worker 1's prepared
#    transaction back;
#  - kill -9 of worker 1 once the coordinator committed (its leaf already
#    shows the batch, the other not yet: leaves become visible one by
#    one): after the restart the next call in workers settles the
#    prepared transaction first, committing it, and the parent then equals
#    one zipper table given the same batches;
#  - preloaded, the resolver settles such a transaction after the restart
#    with nobody calling.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('workers');
$node->init;
$node->append_conf('postgresql.conf', qq(
autovacuum = off
restart_after_crash = on
max_prepared_transactions = 4
zipper_lake.apply_prepared_pause = '3s'
));
$node->start;

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE src (id int PRIMARY KEY, v text);
SELECT zipper_lake.create_table('p', 'src', partitions => 2);
SELECT zipper_lake.create_table('one', 'src');
CREATE TABLE ch (id int, v text, change_time timestamptz);
INSERT INTO ch SELECT k, 'v0-' || k, '2026-03-01 00:00+00' FROM generate_series(1, 400) k;
SELECT zipper_lake.apply_changes('p', 'ch');
SELECT zipper_lake.apply_changes('one', 'ch');
));

my $content_sql = q(
SELECT count(*) || ' ' || md5(string_agg(format('%s|%s|%s|%s', id, v, valid_from, valid_to),
                                          ',' ORDER BY id, valid_from)) FROM p);
my $one_sql = $content_sql =~ s/FROM p\)\s*\z/FROM one)/r;
my $prepared_sql = q(SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'zipper_lake:%');
my $before = $node->safe_psql('postgres', $content_sql);
is($before, $node->safe_psql('postgres', $one_sql), 'the parent holds what one table holds');

# start a batch in workers from a background session
sub start_batch
{
	my ($label) = @_;
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	$session->query_until(qr/batch started/, qq(
DELETE FROM ch;
INSERT INTO ch SELECT k, '$label-' || k, '2026-03-02 00:00+00' FROM generate_series(1, 400) k;
SET zipper_lake.apply_workers = 2;
\\echo batch started
SELECT changes FROM zipper_lake.apply_changes('p', 'ch');
));
	return $session;
}

# the apply workers still at work (a pooled one that finished is idle)
sub worker_pids
{
	return split /\n/, $node->safe_psql('postgres', q(
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'zipper_lake apply worker' AND state IS DISTINCT FROM 'idle'
 ORDER BY backend_start));
}

# kill -9 a worker of a batch running in session; the server restarts
sub crash_worker
{
	my ($pid, $session) = @_;
	kill 'KILL', $pid;
	eval { $session->quit };
	$node->poll_query_until('postgres', 'SELECT true')
	  or die 'the server did not come back after the crash';
}

# wait until the coordinator of batch $label committed, worker 1 still prepared
sub await_coordinator_commit
{
	my ($label) = @_;
	$node->poll_query_until('postgres',
		"SELECT ($prepared_sql) = 1 AND EXISTS (SELECT FROM p WHERE v LIKE '$label-%')")
	  or die 'the coordinator did not commit';
}

# --- kill -9 of the coordinator before its commit ------------------------------
my $session = start_batch('a');
$node->poll_query_until('postgres', "SELECT ($prepared_sql) = 1")
  or die 'worker 1 did not prepare';
my ($coordinator) = worker_pids();
is($node->safe_psql('postgres', $content_sql), $before,
	'while the coordinator waits: nothing of the batch is visible');
crash_worker($coordinator, $session);

is($node->safe_psql('postgres', $prepared_sql), '1',
	'after the crash: worker 1 is left prepared');
is($node->safe_psql('postgres', 'SELECT zipper_lake.resolve()'), '1',
	'resolve() settles it');
is($node->safe_psql('postgres', $prepared_sql), '0', 'nothing is left prepared');
is($node->safe_psql('postgres', $content_sql), $before,
	'the coordinator never committed: nothing of the batch anywhere');

# --- kill -9 of worker 1 after the coordinator's commit ---------------------------
$session = start_batch('b');
await_coordinator_commit('b');
my $leaves = $node->safe_psql('postgres', q(
SELECT string_agg(tableoid::regclass || ':' || (count > 0), ' ' ORDER BY tableoid::regclass::text)
  FROM (SELECT tableoid, count(*) FILTER (WHERE v LIKE 'b-%') FROM p GROUP BY tableoid) s));
like($leaves, qr/^p_0:true p_1:false$|^p_0:false p_1:true$/,
	'between the commits: one leaf shows the batch, the other not yet');
my ($worker1) = worker_pids();
crash_worker($worker1, $session);
is($node->safe_psql('postgres', $prepared_sql), '1',
	'after the crash: worker 1 is left prepared');

# the next call in workers settles it (committing) before it starts
$node->safe_psql('postgres', q(
DELETE FROM ch;
INSERT INTO ch SELECT k, 'b-' || k, '2026-03-02 00:00+00' FROM generate_series(1, 400) k;
SELECT zipper_lake.apply_changes('one', 'ch');
DELETE FROM ch;
INSERT INTO ch SELECT k, 'c-' || k, '2026-03-03 00:00+00' FROM generate_series(1, 400, 3) k;
SELECT zipper_lake.apply_changes('one', 'ch');
));
is($node->safe_psql('postgres', q(
SET zipper_lake.apply_workers = 2;
SELECT changes FROM zipper_lake.apply_changes('p', 'ch');)), '134',
	'the next batch in workers applies');
is($node->safe_psql('postgres', $prepared_sql), '0', 'nothing is left prepared');
is($node->safe_psql('postgres', $content_sql), $node->safe_psql('postgres', $one_sql),
	'the parent holds what one table given the same batches holds');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('p'))), '0',
	'verify() clean');

$node->stop;

# --- preloaded: the resolver settles what a crash left, nobody calling -----------
my $preloaded = PostgreSQL::Test::Cluster->new('preloaded');
$preloaded->init;
$preloaded->append_conf('postgresql.conf', qq(
autovacuum = off
restart_after_crash = on
max_prepared_transactions = 4
shared_preload_libraries = 'zipper_lake'
zipper_lake.apply_prepared_pause = '3s'
));
$preloaded->start;
$node = $preloaded;
$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE src (id int PRIMARY KEY, v text);
SELECT zipper_lake.create_table('p', 'src', partitions => 2);
CREATE TABLE ch (id int, v text, change_time timestamptz);
));
$before = $node->safe_psql('postgres', $content_sql);
$session = start_batch('d');
await_coordinator_commit('d');
($worker1) = worker_pids();
crash_worker($worker1, $session);
$node->poll_query_until('postgres', "SELECT ($prepared_sql) = 0")
  or die 'the resolver did not settle the prepared transaction';
is($node->safe_psql('postgres', q(SELECT count(*) FILTER (WHERE v LIKE 'd-%') FROM p)), '400',
	'preloaded: the resolver committed what the coordinator decided, in every leaf');
ok($node->log_contains(qr/zipper_lake resolver: settled 1 prepared transactions/),
	'preloaded: the resolver logged what it settled');
$node->stop;

done_testing();
