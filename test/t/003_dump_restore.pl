# pg_dump / pg_restore of zipper_lake tables.
#
# A dump must carry the registrations (zipper_lake.registration is an
# extension configuration table) and the rows; restoring it into a new
# database must give the same rows, the same registrations (compared by
# table name: the oids differ), a clean verify(), and only placed
# sub-groups: rows that pg_restore loads before the registration row are
# written unplaced and must be placed when the registration arrives.
# Restored once normally and once with --single-transaction.
#
# The change record (README "Change semantics") is dumped too: a table
# whose history depends on it (no-ops, deletes of absent keys, a snapshot
# with deletes) must take the same late batch the same way after a
# restore, and new record pieces must still come after the restored ones.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init(extra => ['--data-checksums']);
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$node->append_conf('postgresql.conf', "timezone = 'UTC'");    # for the expected output
$node->start;

my @tables = ('acct', 'rate', 'acct_hist');

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;

-- non-default options everywhere
CREATE TABLE acct (id int, name text, balance numeric,
                   valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', key => ARRAY['id'],
    partition_unit => 'month', history_group_span => '7 days',
    current_group_span => '2 days', max_subgroups => 4,
    open_end => '9999-12-31 00:00+00', time_zone => 'Asia/Shanghai');

-- defaults, a two-column key and other period column names
CREATE TABLE rate (ccy text, venue text, rate numeric,
                   vf timestamptz NOT NULL, vt timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('rate', key => ARRAY['ccy', 'venue'],
                            valid_from => 'vf', valid_to => 'vt');

CREATE TABLE acct_src (id int PRIMARY KEY, owner text NOT NULL, note text);
));

# derived from a heap table with a primary key; an unqualified name must land
# in the caller's schema (create_table() runs with a pinned search_path)
my ($ret, $out, $err) = $node->psql('postgres',
	q(SELECT zipper_lake.create_table('acct_hist', 'acct_src')));
is($ret, 0, 'create_table() with an unqualified name succeeds') or diag($err);
if ($ret != 0)
{
	# go on with the rest of the test
	$node->safe_psql('postgres',
		q(SELECT zipper_lake.create_table('public.acct_hist', 'acct_src')));
}
is($node->safe_psql('postgres',
		q(SELECT relnamespace::regnamespace FROM pg_class WHERE relname = 'acct_hist')),
	'public', 'create_table() created acct_hist in the current schema');

# --- data -------------------------------------------------------------------
# acct: three versions per key (two closed, one open until 9999-12-31), in
# two INSERT statements so that the current partition rolls over
$node->safe_psql('postgres', q(
INSERT INTO acct
SELECT id, 'n' || id || '-' || v, id * 10 + v,
       start + (v - 1) * interval '11 days',
       CASE WHEN v = 3 THEN timestamptz '9999-12-31 00:00+00'
            ELSE start + v * interval '11 days' END
  FROM (SELECT id, timestamptz '2023-11-20 00:00+00'
                    + (id % 120) * interval '1 day' + (id % 24) * interval '1 hour' AS start
          FROM generate_series(1, 1500) id) k,
       generate_series(1, 3) v;
));
$node->safe_psql('postgres', q(
INSERT INTO acct
SELECT id, 'm' || id, NULL, timestamptz '2024-02-01 00:00+00' + (id % 10) * interval '1 day',
       '9999-12-31 00:00+00'
  FROM generate_series(2001, 2400) id;
));
# fold_t: what only the change record knows
$node->safe_psql('postgres', q(
CREATE TABLE fold_t (id int, v text, valid_from timestamptz NOT NULL,
                     valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('fold_t', ARRAY['id'], late_horizon => '400 days');
CREATE TABLE fold_ch (id int, v text, change_time timestamptz, op text);
INSERT INTO fold_ch SELECT k, 'a', '2024-01-01', 'I' FROM generate_series(1, 50) k;
INSERT INTO fold_ch SELECT k, 'a', '2024-01-05', 'U' FROM generate_series(1, 50) k;
INSERT INTO fold_ch SELECT k, NULL, '2024-01-03', 'D' FROM generate_series(51, 60) k;
SELECT count(*) FROM zipper_lake.apply_changes('fold_t', 'fold_ch');
CREATE TABLE fold_img AS SELECT k AS id, 'a'::text AS v FROM generate_series(1, 40) k;
SELECT count(*) FROM zipper_lake.apply_snapshot('fold_t', 'fold_img', '2024-01-10');
CREATE TABLE fold_late (id int, v text, change_time timestamptz, op text);
INSERT INTO fold_late SELECT k, 'b', '2024-01-03', 'U' FROM generate_series(1, 50) k;
INSERT INTO fold_late SELECT k, 'c', '2024-01-02', 'I' FROM generate_series(51, 60) k;
INSERT INTO fold_late SELECT k, 'd', '2024-01-06', 'I' FROM generate_series(41, 50) k;
));
push @tables, 'fold_t';

my $copy = "COPY rate FROM STDIN;\n";
for my $c (1 .. 12)
{
	for my $venue ('LDN', 'NYC')
	{
		for my $d (0 .. 39)
		{
			$copy .= sprintf("C%02d\t%s\t%.3f\t%s\t%s\n", $c, $venue, $c + $d / 1000,
				day($d), $d == 39 ? 'infinity' : day($d + 1));
		}
	}
}
$node->safe_psql('postgres', $copy . "\\.\n");
$node->safe_psql('postgres', q(
INSERT INTO acct_src SELECT g, 'owner' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE 'note' END
  FROM generate_series(1, 300) g;
INSERT INTO acct_hist
SELECT id, owner, note, timestamptz '2024-03-01 00:00+00' + (id % 30) * interval '1 day',
       'infinity'
  FROM acct_src;
INSERT INTO acct_hist
SELECT id, 'former' || id, NULL, timestamptz '2024-01-01 00:00+00' + (id % 30) * interval '1 day',
       timestamptz '2024-03-01 00:00+00' + (id % 30) * interval '1 day'
  FROM acct_src WHERE id <= 100;
));

sub day
{
	my ($d) = @_;
	my @t = gmtime(1704067200 + $d * 86400);    # 2024-01-01 UTC
	return sprintf('%04d-%02d-%02d 00:00:00+00', $t[5] + 1900, $t[4] + 1, $t[3]);
}

# Output of a query, or its error: a broken restore fails the assertions
# that use it instead of ending the test.
sub query
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql);
	return $ret == 0 ? $out : "ERROR (exit $ret): $err";
}

# --- what must survive -------------------------------------------------------
sub content
{
	my ($db, $tbl) = @_;
	return query($db, qq(
SELECT count(*) || ' ' || md5(string_agg(t::text, ',' ORDER BY t::text)) FROM $tbl t));
}

sub registrations
{
	my ($db) = @_;
	return query($db, q(
SELECT tbl::text, key, valid_from, valid_to, partition_unit, history_group_span,
       current_group_span, max_subgroups, open_end, time_zone
  FROM zipper_lake.registration ORDER BY tbl::text));
}

# rows per (partition, window): the same placement rules give the same cells,
# whatever the number of sub-groups
sub placement
{
	my ($db, $tbl) = @_;
	return query($db, qq(
SELECT partition_end || ' ' || window_start || ' ' || sum(row_count - masked_rows)
  FROM zipper_lake.inspect('$tbl')
 GROUP BY partition_end, window_start ORDER BY partition_end, window_start));
}

my %before = map { $_ => content('postgres', $_) } @tables;
my %placement = map { $_ => placement('postgres', $_) } @tables;
my $registrations = registrations('postgres');

sub record
{
	my ($db) = @_;
	return query($db, q(
SELECT count(*) || ' ' || md5(string_agg(format('%s %s %s %s', key, instant, is_delete, seq), ','
                                        ORDER BY key, instant))
  FROM zipper_lake._record_instants('fold_t')))
	  . ' / ' . query($db, q(
SELECT newest_change || ' ' || table_instants::text || ' ' || table_seqs::text FROM zipper_lake.record_head
 WHERE tbl = 'fold_t'::regclass));
}
my $record = record('postgres');
like($record, qr/^60 /, 'fold_t remembers its 50 no-ops and 10 deletes of absent keys');

like($before{acct}, qr/^4900 /, 'acct loaded');
like($before{rate}, qr/^960 /, 'rate loaded');
like($before{acct_hist}, qr/^400 /, 'acct_hist loaded');
like($registrations, qr/^acct\|\{id\}\|valid_from\|valid_to\|month\|7 days\|2 days\|4\|9999-12-31 00:00:00\+00\|Asia\/Shanghai$/m,
	'acct is registered with its non-default options');
like($registrations, qr/^acct_hist\|\{id\}\|/m, 'create_table() registered acct_hist');
for my $tbl (@tables)
{
	is($node->safe_psql('postgres', qq(SELECT * FROM zipper_lake.verify('$tbl'))),
		'', "$tbl: verify is clean in the original database");
}

# --- dump and restore ----------------------------------------------------------
my $dump = $node->basedir . '/zl.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump -Fc');

my %late;
my %variants = (
	restored => [],
	restored_single => ['--single-transaction'],
	# workers load tables and the record in any order; each truncates the
	# table it created before loading its rows
	restored_parallel => [ '-j', '2' ],
);
for my $db (sort keys %variants)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	my $restored = run_log(
		[ 'pg_restore', '--exit-on-error', @{ $variants{$db} },
			'-d', $node->connstr($db), $dump ]);
	ok($restored, "pg_restore @{ $variants{$db} } into $db");

  SKIP:
	{
		skip "pg_restore into $db failed", 20 unless $restored;

		is(registrations($db), $registrations, "$db: same registrations");
		is(record($db), $record, "$db: the same change record");
		is(query($db, q(
SELECT last_value >= (SELECT max(piece) FROM zipper_lake.record_segment) FROM zipper_lake.id_seq)),
			't', "$db: new record pieces come after the restored ones");
		for my $tbl (@tables)
		{
			is(content($db, $tbl), $before{$tbl}, "$db: $tbl has the same rows");
			is(query($db, qq(SELECT * FROM zipper_lake.verify('$tbl'))),
				'', "$db: verify of $tbl is clean");
			is(query($db, qq(
SELECT count(*) FILTER (WHERE partition_end IS NULL) || ' ' || (count(*) > 0)
  FROM zipper_lake.inspect('$tbl'))),
				'0 true', "$db: $tbl has only placed sub-groups");
			is(placement($db, $tbl), $placement{$tbl},
				"$db: $tbl rows are in the same partitions and windows");
		}

		# the restored tables are fully working zipper tables
		is(query($db, q{
INSERT INTO acct VALUES (9001, 'new', 1, '2024-06-01 00:00+00', '9999-12-31 00:00+00');
INSERT INTO acct_hist VALUES (9001, 'new', NULL, '2024-06-01 00:00+00', 'infinity');
SELECT (SELECT count(*) FROM acct WHERE id = 9001)
     + (SELECT count(*) FROM acct_hist WHERE id = 9001)}),
			'2', "$db: inserts into restored tables work");
		is(query($db, q{
SELECT (SELECT count(*) FROM zipper_lake.verify('acct'))
     + (SELECT count(*) FROM zipper_lake.verify('acct_hist'))}),
			'0', "$db: verify is clean after new inserts");

		# the same late batch, twice (the second reads the first's piece),
		# gives the same history as in the original database
		is(query($db, q{
SELECT count(*) FROM zipper_lake.apply_changes('fold_t', 'fold_late');
UPDATE fold_late SET change_time = change_time - interval '12 hours', v = v || '2';
SELECT count(*) FROM zipper_lake.apply_changes('fold_t', 'fold_late');
UPDATE fold_late SET change_time = change_time + interval '12 hours', v = left(v, 1)}),
			"1\n1", "$db: late batches apply to the restored record");
		$late{$db} = content($db, 'fold_t');
	}
}

# the original database takes the same late batches last
$node->safe_psql('postgres', q{
SELECT count(*) FROM zipper_lake.apply_changes('fold_t', 'fold_late');
UPDATE fold_late SET change_time = change_time - interval '12 hours', v = v || '2';
SELECT count(*) FROM zipper_lake.apply_changes('fold_t', 'fold_late');});
my $late_original = content('postgres', 'fold_t');
isnt($late_original, $before{fold_t}, 'the late batches changed fold_t');
for my $db (sort keys %variants)
{
	is($late{$db}, $late_original, "$db: fold_t took the late batches as the original did");
}

$node->stop;
done_testing();
