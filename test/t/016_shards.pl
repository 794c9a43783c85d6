# Shards on other servers (README "Scaling out", src/remote): a router
# whose zipper parent has its two leaves on two other clusters, and one
# zipper table on the router given the same batches to compare with.
#
#  - apply_changes, apply_snapshot and apply_events through the router,
#    then as_of, changes and current through it, equal the single table;
#  - a shard killed in the middle of a batch (its connection lost before
#    the commit): the batch fails, and once the shard is back nothing of
#    it is visible anywhere;
#  - a shard killed between the two phases (prepared, the router
#    committed): the router warns; once the shard is back, resolve()
#    commits its part and the parent equals the single table;
#  - the router killed after its shards prepared, before it committed:
#    after its restart resolve() rolls both back; killed after it
#    committed: the preloaded resolver commits both by itself;
#  - adding a shard: a third cluster takes a leaf (copy_history, DETACH,
#    ATTACH in one transaction), and later batches, late ones included,
#    still give what the single table gives.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @shards;
for my $name ('shard_a', 'shard_b', 'shard_c')
{
	my $shard = PostgreSQL::Test::Cluster->new($name);
	$shard->init;
	$shard->append_conf('postgresql.conf', "max_prepared_transactions = 4\n");
	$shard->start;
	$shard->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE acct (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('acct', ARRAY['id']);
));
	push @shards, $shard;
}

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', qq(
max_prepared_transactions = 4
shared_preload_libraries = 'zipper_lake'
));
$router->start;
$router->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE EXTENSION postgres_fdw;
CREATE TABLE acct (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  PARTITION BY HASH (id);
CREATE TABLE one (LIKE acct) USING zipper_lake;
SELECT zipper_lake.register('one', ARRAY['id']);
CREATE TABLE acct_local (LIKE acct) USING zipper_lake;   -- the parent needs a leaf to register
ALTER TABLE acct ATTACH PARTITION acct_local FOR VALUES WITH (MODULUS 2, REMAINDER 0);
SELECT zipper_lake.register('acct', ARRAY['id']);
ALTER TABLE acct DETACH PARTITION acct_local;
DROP TABLE acct_local;
CREATE TABLE ch (id int, owner text, bal numeric, change_time timestamptz, op text);
CREATE TABLE img (id int, owner text, bal numeric);
));
for my $i (0, 1, 2)
{
	my ($host, $port) = ($shards[$i]->host, $shards[$i]->port);
	$router->safe_psql('postgres', qq(
CREATE SERVER s$i FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER s$i;
));
}
# shard_c joins later: two leaves, on shard_a and shard_b
for my $i (0, 1)
{
	$router->safe_psql('postgres', qq(
CREATE FOREIGN TABLE acct_$i PARTITION OF acct FOR VALUES WITH (MODULUS 2, REMAINDER $i)
  SERVER s$i OPTIONS (table_name 'acct');
));
}
my @first_two = @shards[0, 1];

# what a query shows, as a count and a digest
sub digest
{
	my ($query) = @_;
	return $router->safe_psql('postgres', qq(
SELECT count(*) || ' ' || md5(coalesce(string_agg(format('%s|%s|%s|%s|%s', id, owner, bal, valid_from, valid_to),
                                                   ',' ORDER BY id, valid_from), '')) FROM ($query) q));
}

sub same_as_one
{
	my ($label) = @_;
	for my $read ('SELECT * FROM %s',
				  q(SELECT * FROM zipper_lake.as_of(NULL::%s, '2026-03-02 12:00+00')),
				  q(SELECT * FROM zipper_lake.changes(NULL::%s, '2026-03-01 06:00+00', '2026-03-03 00:00+00')),
				  q(SELECT * FROM zipper_lake.current(NULL::%s)))
	{
		is(digest(sprintf($read, 'acct')), digest(sprintf($read, 'one')),
		   "$label: " . sprintf($read, 't'));
	}
}

# a batch of changes through the router and into the single table
sub apply_both
{
	my ($call) = @_;
	my $on_parent = $router->safe_psql('postgres', sprintf($call, 'acct'));
	my $on_one = $router->safe_psql('postgres', sprintf($call, 'one'));
	return ($on_parent, $on_one);
}

$router->safe_psql('postgres', q(
INSERT INTO ch SELECT k % 300, 'o' || k, k, '2026-03-01 00:00+00'::timestamptz + k * interval '3 minutes',
                      CASE WHEN k % 13 = 0 THEN 'D' ELSE 'U' END
  FROM generate_series(1, 2000) k;
));
my ($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_changes('%s', 'ch') r));
is($p, $o, 'apply_changes through the router counts as on one table');
$router->safe_psql('postgres', q(
DELETE FROM ch;
INSERT INTO ch SELECT k, 'late' || k, -k, '2026-03-01 12:00+00', 'U' FROM generate_series(1, 300, 7) k;
INSERT INTO img SELECT k, 'img' || k, k FROM generate_series(1, 200) k;
));
($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_changes('%s', 'ch') r));
is($p, $o, 'late changes through the router count as on one table');
($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_snapshot('%s', 'img', '2026-03-02 18:00+00') r));
is($p, $o, 'apply_snapshot through the router counts as on one table');
$router->safe_psql('postgres', q(
CREATE TABLE ev (event jsonb, pos bigint);
INSERT INTO ev SELECT jsonb_build_object('op', CASE WHEN k % 11 = 0 THEN 'd' ELSE 'u' END,
                                         'ts_ms', 1772409600000 + k * 1000,
                                         'before', jsonb_build_object('id', k % 300),
                                         'after', jsonb_build_object('id', (k + k % 2) % 300, 'owner', 'ev' || k, 'bal', k)), k
  FROM generate_series(1, 900) k;));
($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_events('%s', 'ev', 'debezium', seq => 'pos') r));
is($p, $o, 'apply_events through the router counts as on one table');
same_as_one('after changes, a snapshot and events');
ok($shards[0]->safe_psql('postgres', 'SELECT count(*) FROM acct') > 0
	  && $shards[1]->safe_psql('postgres', 'SELECT count(*) FROM acct') > 0,
   'both shards hold versions');
my $before = digest('SELECT * FROM acct');

# the next batch, for the crash cases: new values for every key
$router->safe_psql('postgres', q(
DELETE FROM ch;
INSERT INTO ch SELECT k, 'next' || k, k, '2026-03-04 00:00+00', 'U' FROM generate_series(1, 299) k;
));
my $prepared = q(SELECT count(*) FROM pg_prepared_xacts);

# 1. a shard killed in the middle of a batch
my $session = $router->background_psql('postgres', on_error_stop => 0);
$session->query_safe(q(BEGIN; SELECT changes FROM zipper_lake.apply_changes('acct', 'ch')));
$shards[1]->stop('immediate');
$session->query(q(COMMIT));
$session->quit;
$shards[1]->start;
is(digest('SELECT * FROM acct'), $before, 'a shard killed mid-batch: nothing of the batch is visible');
is($shards[0]->safe_psql('postgres', $prepared) + $shards[1]->safe_psql('postgres', $prepared), 0,
   'a shard killed mid-batch: nothing is left prepared');

# 2. a shard killed between the two phases: its part stays prepared
#    until resolve()
$router->safe_psql('postgres', q(ALTER SYSTEM SET zipper_lake.apply_prepared_pause = '4s'; SELECT pg_reload_conf();));
$session = $router->background_psql('postgres', on_error_stop => 0);
$session->query_until(qr/started/, q(
\echo started
SELECT changes FROM zipper_lake.apply_changes('acct', 'ch');
\echo finished
));
$router->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%apply_changes(''acct''%' AND state = 'active'})
  or die 'the batch did not start';
$shards[1]->poll_query_until('postgres', "SELECT ($prepared) = 1") or die 'shard b did not prepare';
sleep 1;
$shards[1]->stop('immediate');
$session->query_until(qr/finished/, '');
$session->quit;
$router->safe_psql('postgres', q(ALTER SYSTEM RESET zipper_lake.apply_prepared_pause; SELECT pg_reload_conf();));
$shards[1]->start;
is($shards[1]->safe_psql('postgres', $prepared), 1, 'a shard killed between the phases keeps its part prepared');
isnt(digest('SELECT * FROM acct'), $before, 'the router committed: the other shard shows the batch');
$router->safe_psql('postgres', 'SELECT zipper_lake.resolve()');
is($shards[1]->safe_psql('postgres', $prepared), 0, 'resolve() settled it');
$router->safe_psql('postgres', q(SELECT zipper_lake.apply_changes('one', 'ch')));
same_as_one('after resolve()');

# 3. the router killed after its shards prepared, before it committed
$router->safe_psql('postgres', q(
UPDATE ch SET owner = 'third' || id, change_time = '2026-03-05 00:00+00';
ALTER SYSTEM SET zipper_lake.apply_prepared_pause = '5s'; SELECT pg_reload_conf();));
$before = digest('SELECT * FROM acct');
$session = $router->background_psql('postgres', on_error_stop => 0);
$session->query_until(qr/started/, q(
\echo started
SELECT changes FROM zipper_lake.apply_changes('acct', 'ch');
));
$_->poll_query_until('postgres', "SELECT ($prepared) = 1") or die 'a shard did not prepare' for @first_two;
$router->stop('immediate');
eval { $session->quit };
$router->start;
$router->safe_psql('postgres', q(ALTER SYSTEM RESET zipper_lake.apply_prepared_pause; SELECT pg_reload_conf();));
$router->safe_psql('postgres', 'SELECT zipper_lake.resolve()');
is($shards[0]->safe_psql('postgres', $prepared) + $shards[1]->safe_psql('postgres', $prepared), 0,
   'the router killed before its commit: resolve() rolled the shards back');
is(digest('SELECT * FROM acct'), $before, 'nothing of that batch is visible');

# 4. the router killed after it committed: the resolver commits the shards
$router->safe_psql('postgres', q(ALTER SYSTEM SET zipper_lake.apply_prepared_pause = '5s'; SELECT pg_reload_conf();));
$session = $router->background_psql('postgres', on_error_stop => 0);
$session->query_until(qr/started/, q(
\echo started
SELECT changes FROM zipper_lake.apply_changes('acct', 'ch');
));
$_->poll_query_until('postgres', "SELECT ($prepared) = 1") or die 'a shard did not prepare' for @first_two;
# committed: the caller's transaction id is gone while it waits to commit the shards
$router->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE query LIKE '%apply_changes(''acct''%' AND backend_xid IS NULL AND pid <> pg_backend_pid()})
  or die 'the router did not commit';
$router->stop('immediate');
eval { $session->quit };
$router->start;
$router->safe_psql('postgres', q(ALTER SYSTEM RESET zipper_lake.apply_prepared_pause; SELECT pg_reload_conf();));
$_->poll_query_until('postgres', "SELECT ($prepared) = 0") or die 'the resolver did not settle a shard' for @first_two;
$router->safe_psql('postgres', q(SELECT zipper_lake.apply_changes('one', 'ch')));
same_as_one('the router killed after its commit, then its resolver');

# 5. adding a shard: shard_c takes the leaf of shard_b
$router->safe_psql('postgres', q(
BEGIN;
ALTER TABLE acct DETACH PARTITION acct_1;
CREATE FOREIGN TABLE acct_1c (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  SERVER s2 OPTIONS (table_name 'acct');
SELECT zipper_lake.copy_history('acct_1', 'acct_1c');
ALTER TABLE acct ATTACH PARTITION acct_1c FOR VALUES WITH (MODULUS 2, REMAINDER 1);
COMMIT;
DROP FOREIGN TABLE acct_1;
));
is($shards[2]->safe_psql('postgres', 'SELECT count(*) FROM acct'),
   $shards[1]->safe_psql('postgres', 'SELECT count(*) FROM acct'), 'shard_c holds the versions of the leaf it took');
same_as_one('after moving a leaf to a new shard');
$router->safe_psql('postgres', q(
DELETE FROM ch;
INSERT INTO ch SELECT k, 'after move' || k, k, '2026-03-02 06:00+00', CASE WHEN k % 5 = 0 THEN 'D' ELSE 'U' END
  FROM generate_series(1, 299, 2) k;));
($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_changes('%s', 'ch') r));
is($p, $o, 'late changes after the move count as on one table');
($p, $o) = apply_both(q(SELECT r::text FROM zipper_lake.apply_changes('%s', 'ch') r));
is($p, $o, 'applied again: counts as on one table');
same_as_one('late changes after the move');
is($router->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acct'))), '0', 'verify is clean');

done_testing();
