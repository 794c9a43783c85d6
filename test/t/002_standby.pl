# Streaming replication of zipper_lake tables.
#
# Everything a zipper table consists of (pages written by the access method,
# the metapage of every new relfilenode, the metadata catalog rows) must
# reach a streaming standby through WAL.  The primary loads rows with INSERT
# and COPY, rolls back a TRUNCATE and a load, commits a TRUNCATE + reload of
# a second table; the standby must then show the same contents and the same
# inspect() output as the primary, and a clean verify().  A long-lived
# standby session must notice the TRUNCATE (new relfilenode, new storage id),
# and the standby must accept writes once promoted.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
$primary->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# the extension and the tables are created after the backup: all via WAL
$primary->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE acct (id int, name text,
                   valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', key => ARRAY['id']);
CREATE TABLE rate (ccy text, rate numeric,
                   valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('rate', key => ARRAY['ccy'], partition_unit => 'month',
                            max_subgroups => 2);
));

# Per key: a closed version and an open one, spread over 60 days.
sub acct_sql
{
	my ($lo, $hi, $label) = @_;
	return qq(
INSERT INTO acct
SELECT id, '$label' || id || '-v' || v,
       start + (v - 1) * interval '5 days',
       CASE WHEN v = 2 THEN 'infinity' ELSE start + interval '5 days' END
  FROM (SELECT id, timestamptz '2024-01-01 00:00+00'
                    + (id % 60) * interval '1 day' + (id % 7) * interval '1 hour' AS start
          FROM generate_series($lo, $hi) id) k,
       generate_series(1, 2) v;);
}

# Daily rates of 20 currencies over $days days, as COPY input.
sub rate_copy
{
	my ($days, $factor) = @_;
	my $copy = "COPY rate FROM STDIN;\n";
	for my $c (1 .. 20)
	{
		for my $d (0 .. $days - 1)
		{
			$copy .= sprintf("C%02d\t%.4f\t%s\t%s\n", $c, $factor * $c + $d / 100,
				day($d), $d == $days - 1 ? 'infinity' : day($d + 1));
		}
	}
	return $copy . "\\.\n";
}

sub day
{
	my ($d) = @_;
	my @t = gmtime(1704067200 + $d * 86400);    # 2024-01-01 UTC
	return sprintf('%04d-%02d-%02d 00:00:00+00', $t[5] + 1900, $t[4] + 1, $t[3]);
}

# content of a table in a canonical order
sub content_sql
{
	my ($tbl) = @_;
	return qq(
SELECT count(*) || ' ' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))
  FROM $tbl t);
}

# inspect() of a table, whole
sub inspect_sql
{
	my ($tbl) = @_;
	return qq(SELECT count(*) || ' ' || md5(coalesce(string_agg(i::text, ';'), ''))
                FROM zipper_lake.inspect('$tbl') i);
}

# --- load on the primary ---------------------------------------------------
$primary->safe_psql('postgres', acct_sql(1, 1500, 'ins'));
$primary->safe_psql('postgres', acct_sql(1501, 2000, 'ins2'));
$primary->safe_psql('postgres', rate_copy(90, 1));

# a long-lived standby session reads rate before its TRUNCATE
$primary->wait_for_catchup($standby);
my $standby_session = $standby->background_psql('postgres');
my $rate_before = $standby_session->query_safe(content_sql('rate'));
like($rate_before, qr/^1800 /, 'standby session sees the first load of rate');

# rolled back: a TRUNCATE followed by a load, and a load of new rows
$primary->safe_psql('postgres',
	"BEGIN;\nTRUNCATE acct;\n" . acct_sql(1, 300, 'rolledback') . "\nROLLBACK;");
$primary->safe_psql('postgres',
	"BEGIN;\n" . acct_sql(7001, 8000, 'rolledback') . "\nROLLBACK;");

# committed: TRUNCATE + reload of rate (new relfilenode), more acct rows
$primary->safe_psql('postgres', "BEGIN;\nTRUNCATE rate;\n" . rate_copy(45, 2) . "COMMIT;");
$primary->safe_psql('postgres', "COPY rate FROM STDIN;\n"
	  . "C99\t1.0\t2023-12-01 00:00:00+00\t2024-01-01 00:00:00+00\n"
	  . "C99\t2.0\t2024-01-01 00:00:00+00\tinfinity\n\\.\n");
$primary->safe_psql('postgres', acct_sql(2001, 2500, 'late'));

is($primary->safe_psql('postgres', q(SELECT count(*) FROM acct)), '5000',
	'primary: acct has the committed rows only');
is($primary->safe_psql('postgres', q(
SELECT count(*) > 0 FROM zipper_lake.inspect('acct') WHERE format = 'columnar')),
	't', 'history is written columnar (README "Storage formats"), for the standby to replay');
is($primary->safe_psql('postgres', q(SELECT count(*) FROM rate)), '902',
	'primary: rate has the reloaded rows only');

# VACUUM FULL writes acct again into a new file (README "DDL"), which the
# standby replays: its rows, and no metadata of the old file
my $acct_before = $primary->safe_psql('postgres', content_sql('acct'));
my $old_storage = $primary->safe_psql('postgres', q(SELECT zipper_lake._storage_id('acct')));
$primary->safe_psql('postgres', 'VACUUM FULL acct');
is($primary->safe_psql('postgres', content_sql('acct')), $acct_before,
	'primary: VACUUM FULL keeps the rows of acct');
is($primary->safe_psql('postgres',
		qq(SELECT count(*) FROM zipper_lake.subgroup WHERE storage_id = $old_storage)),
	'0', 'primary: the old file of acct has no sub-groups left');

$primary->wait_for_catchup($standby);

# --- compare ---------------------------------------------------------------
for my $tbl ('acct', 'rate')
{
	is($standby->safe_psql('postgres', content_sql($tbl)),
		$primary->safe_psql('postgres', content_sql($tbl)),
		"$tbl: standby has the same rows as the primary");
	my $inspect = $primary->safe_psql('postgres', inspect_sql($tbl));
	like($inspect, qr/^[1-9][0-9]* /, "$tbl: primary has sub-groups");
	is($standby->safe_psql('postgres', inspect_sql($tbl)), $inspect,
		"$tbl: standby has the same inspect() output");
	is($standby->safe_psql('postgres', qq(SELECT * FROM zipper_lake.verify('$tbl'))),
		'', "$tbl: verify is clean on the standby");
	is($primary->safe_psql('postgres', qq(SELECT * FROM zipper_lake.verify('$tbl'))),
		'', "$tbl: verify is clean on the primary");
}
is($standby->safe_psql('postgres',
		q(SELECT count(*) FROM acct WHERE name LIKE 'rolledback%')),
	'0', 'standby: no row of the rolled-back loads');
is($standby->safe_psql('postgres',
		q(SELECT string_agg(ccy || '=' || rate, ',' ORDER BY ccy) FROM rate
           WHERE valid_from <= '2024-01-01 12:00+00' AND valid_to > '2024-01-01 12:00+00'
             AND ccy IN ('C01', 'C99'))),
	'C01=2.0000,C99=2.0', 'standby: point-in-time query on the reloaded table');

is($standby_session->query_safe(content_sql('rate')),
	$primary->safe_psql('postgres', content_sql('rate')),
	'long-lived standby session sees rate after its TRUNCATE + reload');
$standby_session->quit;

# --- promotion: the former standby accepts writes --------------------------
$standby->promote;
$standby->safe_psql('postgres', acct_sql(9001, 9200, 'promoted'));
$standby->safe_psql('postgres', rate_copy(3, 4) =~ s/C(\d\d)/P$1/gr);
is($standby->safe_psql('postgres', q(SELECT count(*) FROM acct)), '5400',
	'promoted standby: new acct rows are visible');
is($standby->safe_psql('postgres', q(SELECT count(*) FROM rate)), '962',
	'promoted standby: new rate rows are visible');
is($standby->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM zipper_lake.verify('acct'))
                + (SELECT count(*) FROM zipper_lake.verify('rate'))}),
	'0', 'promoted standby: verify is clean');

$standby->stop;
$primary->stop;
done_testing();
