# Retention enforced by autovacuum (README "Lifecycle"): rows written to a
# zipper table count as inserts, so autovacuum visits it, and its VACUUM
# has the maintenance worker drop the history that ended more than the
# table's retention ago and compact sub-groups with many masked rows --
# with no VACUUM run by hand.  The server preloads the library, as README
# "Quick start" suggests: the hooks, GUCs and workers then come from the
# postmaster.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', q(
autovacuum = on
autovacuum_naptime = 1
autovacuum_vacuum_insert_threshold = 100
autovacuum_vacuum_insert_scale_factor = 0
log_autovacuum_min_duration = 0
shared_preload_libraries = 'zipper_lake'
));
$node->start;

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE acc (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acc', ARRAY['id']);
SELECT zipper_lake.set_retention('acc', '1 year');
-- a version of every key a week, from two years ago to now
CREATE TABLE ch (id int, v int, change_time timestamptz);
INSERT INTO ch SELECT k, w, date_trunc('day', now()) - interval '730 days' + w * interval '7 days'
  FROM generate_series(1, 50) k, generate_series(0, 103) w;
SELECT count(*) FROM zipper_lake.apply_changes('acc', 'ch');
));
my $ended_long_ago = q(SELECT count(*) FROM acc WHERE valid_to <= now() - interval '1 year 1 day');
ok($node->safe_psql('postgres', $ended_long_ago) > 0, 'history older than the retention was written');

ok($node->poll_query_until('postgres', "SELECT ($ended_long_ago) = 0"),
	'autovacuum dropped the history that ended more than a year ago');
is($node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM acc WHERE valid_to > now() - interval '1 year' + interval '1 day')
		  = (SELECT count(*) + 50 FROM ch WHERE change_time > now() - interval '1 year' + interval '1 day')}),
	't', 'history that ended within the year is kept (every change closed one, 50 are open)');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acc'))), '0', 'verify is clean');
ok( $node->safe_psql('postgres',
		q(SELECT history_cut > now() - interval '1 year 1 day' FROM zipper_lake.registration)),
	'the cut is recorded');
like(slurp_file($node->logfile), qr/zipper_lake retention of table "acc": dropped \d+ versions/,
	'the maintenance worker logged what it dropped');

# late changes mask history rows; autovacuum's worker compacts the
# sub-groups they left more than half masked
$node->safe_psql('postgres', q(
CREATE TABLE late (id int, v int, change_time timestamptz);
INSERT INTO late SELECT k, -w, date_trunc('day', now()) - interval '730 days' + w * interval '7 days' + interval '1 day'
  FROM generate_series(1, 50) k, generate_series(90, 93) w;
SELECT count(*) FROM zipper_lake.apply_changes('acc', 'late');
CREATE TABLE expected AS SELECT * FROM acc;
));
ok($node->poll_query_until('postgres',
		q{SELECT coalesce(sum(masked_rows), 0) = 0 FROM zipper_lake.inspect('acc')}),
	'autovacuum compacted the masked history');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM ((TABLE acc EXCEPT ALL TABLE expected) UNION ALL (TABLE expected EXCEPT ALL TABLE acc)) d}),
	'0', 'compaction kept every version');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acc'))), '0', 'verify is clean after compaction');

# a VACUUM starts pgstat's counts over, as heap's does: autovacuum saw
# the table vacuumed and does not come back at every nap while nothing
# changes
ok($node->poll_query_until('postgres',
		q{SELECT last_autovacuum IS NOT NULL AND n_ins_since_vacuum = 0 FROM pg_stat_user_tables WHERE relname = 'acc'}),
	'autovacuum of a zipper table is recorded and starts the counts over');
my $visits = q{SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'acc'};
my $before = $node->safe_psql('postgres', $visits);
sleep 5;
is($node->safe_psql('postgres', $visits), $before, 'no visits while nothing changes (naptime 1s)');

# rows a batch replaced count as deleted: a table that grows too little
# to be visited for its inserts is visited for them (and the VACUUM drops
# their index entries).  Autovacuum stays away until the counts are read:
# its VACUUM (columnar open versions) and ANALYZE would change them.
$node->safe_psql('postgres', q(
CREATE TABLE cust (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake WITH (autovacuum_enabled = false, autovacuum_vacuum_insert_threshold = 2000000000,
                          autovacuum_vacuum_threshold = 100, autovacuum_vacuum_scale_factor = 0);
SELECT zipper_lake.register('cust', ARRAY['id']);
CREATE INDEX cust_v ON cust (v);
CREATE TABLE cch (id int, v int, change_time timestamptz);
INSERT INTO cch SELECT k, 0, '2026-01-01' FROM generate_series(1, 300) k;
SELECT count(*) FROM zipper_lake.apply_changes('cust', 'cch');
UPDATE cch SET v = 1, change_time = '2026-01-02';
SELECT count(*) FROM zipper_lake.apply_changes('cust', 'cch');
SELECT pg_stat_force_next_flush();
));
ok($node->poll_query_until('postgres',
		q{SELECT n_tup_del = 300 AND n_dead_tup = 300 FROM pg_stat_user_tables WHERE relname = 'cust'}),
	'the 300 open versions the batch replaced count as deleted');
$node->safe_psql('postgres', q(ALTER TABLE cust SET (autovacuum_enabled = true)));
ok($node->poll_query_until('postgres',
		q{SELECT autovacuum_count > 0 FROM pg_stat_user_tables WHERE relname = 'cust'}),
	'autovacuum visited the table for them');
is($node->safe_psql('postgres', q{SET enable_seqscan = off; SELECT count(*) FROM cust WHERE v >= 0}), '600',
	'the index finds the 300 closed and 300 open versions');

$node->stop;
done_testing();
