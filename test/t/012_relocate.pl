# VACUUM moving sub-groups off the end of the file, then cutting the end
# (src/lifecycle/zl_relocate.c), through WAL: a streaming standby sees the
# moved sub-groups and the shorter file with the same rows; a crash
# (kill -9) right after the move, before the end is given back, loses and
# doubles nothing, and the next VACUUM cuts the end.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
$primary->append_conf('postgresql.conf', 'autovacuum = off');    # the test runs VACUUM itself
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# two history partitions, one after the other in the file; dropping the
# first frees the bottom of the file (separate statements: separate writes)
$primary->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE mv (id int, pad text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('mv', key => ARRAY['id'], history_format => 'rows');
));
$primary->safe_psql('postgres', q(
INSERT INTO mv SELECT g, md5(g::text) || md5((g + 1)::text), '2024-01-01', '2024-01-05'
  FROM generate_series(1, 25000) g;));
$primary->safe_psql('postgres', q(
INSERT INTO mv SELECT g, md5(g::text) || md5((g + 2)::text), '2024-01-05', '2024-01-20'
  FROM generate_series(1, 20000) g;));
$primary->safe_psql('postgres', q(
INSERT INTO mv SELECT g, 'open', '2024-01-20', 'infinity' FROM generate_series(1, 300) g;));
$primary->safe_psql('postgres', q(SELECT zipper_lake.drop_history('mv', '2024-01-06')));

my $contents = q(SELECT count(*), count(DISTINCT id), sum(length(pad)), min(valid_from), max(valid_to) FROM mv);
my $key = q(SELECT id, pad, valid_from, valid_to FROM mv WHERE id IN (7, 19999) ORDER BY id, valid_from);
my $file = q(SELECT pg_relation_size('mv') / 8192);
my $jan20_at = q(SELECT min(first_block) FROM zipper_lake.inspect('mv') WHERE partition_end = '2024-01-20');
my $before = $primary->safe_psql('postgres', $contents);
my $key_before = $primary->safe_psql('postgres', $key);
my $file_before = $primary->safe_psql('postgres', $file);
my $jan20_before = $primary->safe_psql('postgres', $jan20_at);

# the move: committed, the end not given back yet; the standby follows
$primary->safe_psql('postgres', 'VACUUM mv');
ok($primary->safe_psql('postgres', $jan20_at) < $jan20_before, 'VACUUM moved the sub-groups down');
is($primary->safe_psql('postgres', $file), $file_before, 'the file keeps its end until the next VACUUM');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $contents), $before, 'the standby reads the moved sub-groups: same rows');
is($standby->safe_psql('postgres', $key), $key_before, 'the standby finds keys in the moved sub-groups');
is($standby->safe_psql('postgres', $jan20_at), $primary->safe_psql('postgres', $jan20_at),
	'the standby has the same layout');

# kill -9 before the end is given back
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', $contents), $before, 'after the crash: no row lost or doubled');
is($primary->safe_psql('postgres', $key), $key_before, 'after the crash: keys found');
is($primary->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('mv'))), '0',
	'after the crash: verify is clean');

# the next VACUUM cuts the end; the standby replays the truncation
$primary->safe_psql('postgres', 'VACUUM mv');
my $file_after = $primary->safe_psql('postgres', $file);
ok($file_after < $file_before / 2, "the end was cut ($file_before -> $file_after blocks)");
is($primary->safe_psql('postgres', $contents), $before, 'same rows after the cut');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $file), $file_after, 'the standby file was cut too');
is($standby->safe_psql('postgres', $contents), $before, 'the standby reads the same rows after the cut');
is($standby->safe_psql('postgres', $key), $key_before, 'and finds the keys');

# writes go on after the moves
$primary->safe_psql('postgres', q(
CREATE TABLE ch (id int, pad text, change_time timestamptz);
INSERT INTO ch SELECT g, 'new', '2024-02-01' FROM generate_series(1, 100) g;
SELECT zipper_lake.apply_changes('mv', 'ch');));
is($primary->safe_psql('postgres', q(SELECT count(*) FROM mv WHERE valid_to = 'infinity')), '300',
	'an apply after the moves');
is($primary->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('mv'))), '0', 'verify is clean');

$standby->stop;
$primary->stop;
done_testing();
