# pg_upgrade (README "Lifecycle"): a cluster with zipper tables of both
# history formats, a change record, a history cut, a retention and a
# schema change is upgraded (15 to 15) in copy and in link mode; the new
# cluster must hold the same rows, metadata and change record, verify()
# must stay empty, and the tables must go on taking changes exactly.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# everything a cluster should carry across
my $contents = q(
SELECT 'rows zr ' || count(*) || ' ' || md5(string_agg(x::text, ',' ORDER BY x::text)) FROM zr x;
SELECT 'rows zc ' || count(*) || ' ' || md5(string_agg(x::text, ',' ORDER BY x::text)) FROM zc x;
SELECT 'registration ' || tbl || ' ' || history_format || ' ' || coalesce(history_cut::text, '-') || ' ' ||
       coalesce(retention::text, '-') || ' ' || coalesce(track_columns::text, '-')
  FROM zipper_lake.registration ORDER BY tbl::text;
SELECT 'inspect ' || t || ' ' || format || ' ' || (partition_end = 'infinity') || ' ' || count(*) || ' ' || sum(row_count)
  FROM unnest(ARRAY['zr', 'zc']) t, zipper_lake.inspect(t::regclass)
 GROUP BY t, format, partition_end = 'infinity' ORDER BY 1;
SELECT 'record ' || t || ' ' || count(*) || ' ' || md5(string_agg(r::text, ',' ORDER BY r::text))
  FROM unnest(ARRAY['zr', 'zc']) t, zipper_lake._record_instants(t::regclass) r GROUP BY t ORDER BY t;
SELECT 'verify ' || t || ' ' || count(v.*)
  FROM unnest(ARRAY['zr', 'zc']) t LEFT JOIN LATERAL zipper_lake.verify(t::regclass) v ON true
 GROUP BY t ORDER BY t;
);

my $bindir = PostgreSQL::Test::Cluster->new('probe')->config_data('--bindir');

# copy mode is pg_upgrade's default (PostgreSQL 15 has no --copy)
for my $mode ('copy', 'link')
{
	my $name = $mode;
	my @mode_option = $mode eq 'link' ? ('--link') : ();
	my $old = PostgreSQL::Test::Cluster->new("old_$name");
	$old->init;
	$old->append_conf('postgresql.conf', 'autovacuum = off');
	$old->append_conf('postgresql.conf', "timezone = 'UTC'");
	$old->start;
	$old->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE zr (id int, v int, u text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('zr', ARRAY['id'], history_format => 'rows', track_columns => ARRAY['v']);
CREATE TABLE zc (LIKE zr) USING zipper_lake;
SELECT zipper_lake.register('zc', ARRAY['id'], history_format => 'columnar');
CREATE TABLE ch (id int, v int, u text, change_time timestamptz, op text);
INSERT INTO ch SELECT k, d % 3, 'u' || d, '2024-01-01'::timestamptz + d * interval '1 day',
                      CASE WHEN (k + d) % 7 = 0 THEN 'D' ELSE 'U' END
  FROM generate_series(1, 300) k, generate_series(0, 19) d;
SELECT count(*) FROM zipper_lake.apply_changes('zr', 'ch');
SELECT count(*) FROM zipper_lake.apply_changes('zc', 'ch');
SELECT zipper_lake.drop_history('zc', '2024-01-04 12:00');
SELECT zipper_lake.set_retention('zr', '30 years');
ALTER TABLE zc ADD COLUMN added int DEFAULT 7;
));
	my $before = $old->safe_psql('postgres', $contents);
	like($before, qr/verify zc 0/, "$mode: the old cluster verifies");
	$old->stop;

	my $new = PostgreSQL::Test::Cluster->new("new_$name");
	$new->init;
	$new->append_conf('postgresql.conf', 'autovacuum = off');
	$new->append_conf('postgresql.conf', "timezone = 'UTC'");
	my $workdir = PostgreSQL::Test::Utils::tempdir;
	command_ok(
		[
			"$bindir/pg_upgrade", '--no-sync', @mode_option,
			'-d', $old->data_dir, '-D', $new->data_dir,
			'-b', $bindir, '-B', $bindir,
			'-s', $new->host, '-p', $old->port, '-P', $new->port
		],
		"pg_upgrade $mode");
	$new->start;
	my $after = $new->safe_psql('postgres', $contents);
	is($after, $before, "$mode: rows, metadata and change record carried across");

	# the upgraded tables take changes: a late one (the record decides), and
	# one before the cut is still refused
	$new->safe_psql('postgres', q(
CREATE TABLE late (id int, v int, u text, change_time timestamptz, op text);
INSERT INTO late SELECT k, 9, 'late', '2024-01-10 12:00', 'U' FROM generate_series(1, 300, 7) k;
SELECT count(*) FROM zipper_lake.apply_changes('zr', 'late');
SELECT count(*) FROM zipper_lake.apply_changes('zc', 'late', missing_columns => 'keep');
));
	is( $new->safe_psql('postgres',
			q{SELECT (SELECT count(*) FROM zipper_lake.verify('zr')) + (SELECT count(*) FROM zipper_lake.verify('zc'))
			  + (SELECT count(*) FROM (SELECT id, v, valid_from, valid_to FROM zc WHERE valid_to > '2024-01-04 12:00'
			                           EXCEPT SELECT id, v, valid_from, valid_to FROM zr) d)
			  + (SELECT count(*) FROM (SELECT id, v, valid_from, valid_to FROM zr WHERE valid_to > '2024-01-04 12:00'
			                           EXCEPT SELECT id, v, valid_from, valid_to FROM zc) d)}),
		'0', "$mode: changes after the upgrade fold the same in both formats");
	my ($ret, $out, $err) = $new->psql('postgres', q(
CREATE TABLE early (id int, v int, u text, added int, change_time timestamptz);
INSERT INTO early VALUES (1, 5, 'early', 1, '2024-01-02');
SELECT * FROM zipper_lake.apply_changes('zc', 'early');));
	like($err, qr/before the history cut/, "$mode: the history cut survives");

	# retention by VACUUM, which reports it (README "Lifecycle")
	$new->safe_psql('postgres', q(SELECT zipper_lake.set_retention('zc', '1 year')));
	($ret, $out, $err) = $new->psql('postgres', 'VACUUM (VERBOSE) zc');
	like($err, qr/zipper_lake table "zc": retention dropped [1-9]\d* versions/,
		"$mode: VACUUM VERBOSE reports the history retention dropped");
	is($new->safe_psql('postgres', q(SELECT count(*) FROM zc WHERE valid_to <> 'infinity')),
		'0', "$mode: no history of 2024 is kept a year on");
	$new->stop;
}

done_testing();
