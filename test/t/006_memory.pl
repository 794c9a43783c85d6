# COPY into a zipper table, and apply_changes / apply_snapshot of batches
# larger than work_mem, run in bounded memory.
#
# A load buffers its rows in tuplesorts that spill to temporary files past
# work_mem (README, "INSERT / COPY"), so the backend's private memory stays
# within work_mem plus a constant however many rows it loads.  With
# work_mem = 4MB this test COPYs about 70 MB of rows (a million versions)
# twice: into an empty table, then a backfill of earlier versions into the
# loaded one, which looks the stored neighbours of every key up and merges
# equal ones.  While each COPY runs, the backend's RssAnon (private memory,
# not shared buffers) is sampled from /proc; its peak must stay below
# work_mem + 64 MB.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

if (!-r "/proc/$$/status")
{
	plan skip_all => 'no /proc/<pid>/status to sample memory from';
}

my $work_mem_kb = 4096;
my $bound_kb = $work_mem_kb + 64 * 1024;

my $node = PostgreSQL::Test::Cluster->new('load_memory');
$node->init;
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$node->append_conf('postgresql.conf', qq(
timezone = 'UTC'
work_mem = '${work_mem_kb}kB'
max_parallel_workers_per_gather = 0
));
$node->start;

my $dir = $node->basedir;
$node->safe_psql('postgres', qq(
CREATE EXTENSION zipper_lake;
CREATE TABLE acct (id bigint, name text, balance numeric,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acct', ARRAY['id']);

-- 250,000 keys, four versions each (the last open), in random order
COPY (SELECT k, 'name-' || k || '-' || v, round((k * 7 + v) % 100000 / 100.0, 2),
             timestamptz '2020-06-01' + (k % 1000) * interval '1 hour' + (v - 1) * interval '30 days',
             CASE WHEN v = 4 THEN 'infinity'
                  ELSE timestamptz '2020-06-01' + (k % 1000) * interval '1 hour' + v * interval '30 days' END
        FROM generate_series(1, 250000) k, generate_series(1, 4) v ORDER BY random())
  TO '$dir/versions.tsv';

-- the four versions before those; the last equal to the first stored one
-- for every other key (so the two merge)
COPY (SELECT k, CASE WHEN v = 4 AND k % 2 = 0 THEN 'name-' || k || '-1' ELSE 'old-' || k || '-' || v END,
             CASE WHEN v = 4 AND k % 2 = 0 THEN round((k * 7 + 1) % 100000 / 100.0, 2) ELSE v END,
             timestamptz '2020-06-01' + (k % 1000) * interval '1 hour' + (v - 5) * interval '30 days',
             timestamptz '2020-06-01' + (k % 1000) * interval '1 hour' + (v - 4) * interval '30 days'
        FROM generate_series(1, 250000) k, generate_series(1, 4) v ORDER BY random())
  TO '$dir/backfill.tsv';
));
ok(-s "$dir/versions.tsv" > 60_000_000, 'about 70 MB of rows to load (' . (-s "$dir/versions.tsv") . ' bytes)');

sub rss_anon_kb
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	while (my $line = <$fh>)
	{
		return $1 if $line =~ /^RssAnon:\s+(\d+)\s+kB/;
	}
	return undef;
}

# run a statement in its own session, sampling its backend's RssAnon
sub peak_rss_anon
{
	my ($sql) = @_;
	my $app = 'zl_load_memory';
	my ($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
		  '-d', $node->connstr('postgres') . " application_name=$app", '-c', $sql ],
		'>', \$stdout, '2>', \$stderr);
	my ($pid, $start, $peak) = (undef, undef, 0);
	while ($h->pumpable)
	{
		$h->pump_nb;
		$pid //= $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE application_name = '$app'") || undef;
		if (defined $pid)
		{
			my $kb = rss_anon_kb($pid);
			if (defined $kb)
			{
				$start //= $kb;
				$peak = $kb if $kb > $peak;
			}
		}
		usleep(20_000);
	}
	$h->finish;
	is($?, 0, "statement succeeded: $sql") or diag($stderr);
	return ($start // 0, $peak);
}

my ($start, $peak) = peak_rss_anon("COPY acct FROM '$dir/versions.tsv'");
cmp_ok($peak, '>', 0, 'sampled the backend during the first COPY');
cmp_ok($peak, '<=', $bound_kb,
	"COPY into an empty table: RssAnon peak $peak kB (at start $start kB) within work_mem + 64 MB");

($start, $peak) = peak_rss_anon("COPY acct FROM '$dir/backfill.tsv'");
cmp_ok($peak, '>', 0, 'sampled the backend during the backfill');
cmp_ok($peak, '<=', $bound_kb,
	"COPY next to stored versions: RssAnon peak $peak kB (at start $start kB) within work_mem + 64 MB");

is($node->safe_psql('postgres', q(
SELECT count(*) || ' ' || count(*) FILTER (WHERE valid_from = timestamptz '2020-06-01'
                                                 + (id % 1000) * interval '1 hour' - interval '30 days'
                                              AND valid_to = timestamptz '2020-06-01'
                                                 + (id % 1000) * interval '1 hour' + interval '30 days')
  FROM acct)),
	'1875000 125000', 'all versions loaded, every other key merged across the two loads');
is($node->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('acct'))),
	'', 'verify is clean');

# apply_changes and apply_snapshot order their batch by key hash (held in
# memory while it fits work_mem, else in a tuplesort) and apply it a chunk
# of keys at a time, each chunk within work_mem
# (README, "Guarantees"): about twice work_mem plus a constant.  A batch of
# 500,000 changes (two per key, one of every five late) and an image of
# 225,000 rows, each many times work_mem.
my $apply_bound_kb = 2 * $work_mem_kb + 64 * 1024;
$node->safe_psql('postgres', q(
CREATE TABLE chg AS
SELECT k % 250000 + 1 AS id, 'chg-' || k || repeat('x', 150) AS name, (k % 1000)::numeric AS balance,
       timestamptz '2020-06-01' + (k % 1000) * interval '1 hour' + (k / 250000) * interval '1 day'
       + CASE WHEN k % 5 = 0 THEN interval '45 days' ELSE interval '200 days' END AS change_time
  FROM generate_series(0, 499999) k;
CREATE TABLE img AS
SELECT id, name || '-img' AS name, balance FROM acct WHERE valid_to = 'infinity' AND id % 10 <> 0;
));
cmp_ok($node->safe_psql('postgres', q(SELECT pg_total_relation_size('chg'))), '>', 20 * $work_mem_kb * 1024,
	'the batch is more than 20 times work_mem');

($start, $peak) = peak_rss_anon("SELECT * FROM zipper_lake.apply_changes('acct', 'chg')");
cmp_ok($peak, '>', 0, 'sampled the backend during apply_changes');
cmp_ok($peak, '<=', $apply_bound_kb,
	"apply_changes of 500,000 changes: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");

($start, $peak) = peak_rss_anon("SELECT * FROM zipper_lake.apply_snapshot('acct', 'img', '2021-06-01')");
cmp_ok($peak, '>', 0, 'sampled the backend during apply_snapshot');
cmp_ok($peak, '<=', $apply_bound_kb,
	"apply_snapshot of 225,000 rows: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");

is($node->safe_psql('postgres', q(
SELECT count(*) FILTER (WHERE valid_to = 'infinity') || ' ' ||
       count(*) FILTER (WHERE valid_to = 'infinity' AND name LIKE '%-img')
  FROM acct)),
	'225000 225000', 'the image is what is open: keys missing from it were deleted');
# an image much smaller than the table: every other open key is read (and
# deleted), a share of the key-hash space at a time
$node->safe_psql('postgres', q(CREATE TABLE img_small AS SELECT * FROM img WHERE id <= 1000));
($start, $peak) = peak_rss_anon("SELECT * FROM zipper_lake.apply_snapshot('acct', 'img_small', '2021-07-01')");
cmp_ok($peak, '<=', $apply_bound_kb,
	"apply_snapshot of 900 rows deleting 224,100 open keys: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");
is($node->safe_psql('postgres', q(SELECT count(*) FROM acct WHERE valid_to = 'infinity')),
	'900', 'only the small image is open');
is($node->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('acct'))),
	'', 'verify is clean after the applies');

# the change record (README "Change semantics"): the image applied twice
# without deletes remembers a no-op of every key the second time (225,000
# instants, written as they come), and a late batch of all keys before
# those no-ops reads them back a chunk at a time
$node->safe_psql('postgres',
	q(SELECT * FROM zipper_lake.apply_snapshot('acct', 'img', '2021-08-01', deletes => false)));
($start, $peak) = peak_rss_anon(
	"SELECT * FROM zipper_lake.apply_snapshot('acct', 'img', '2021-08-02', deletes => false)");
cmp_ok($peak, '<=', $apply_bound_kb,
	"apply_snapshot remembering 225,000 no-ops: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");
is($node->safe_psql('postgres', q(SELECT sum(instants) FROM zipper_lake.inspect_record('acct'))),
	'225900', 'the record remembers a no-op of every key (and of the 900 open at the first image)');
$node->safe_psql('postgres', q(
CREATE TABLE chg_late AS
SELECT id, name || '-late' AS name, balance, timestamptz '2021-08-01 12:00' AS change_time FROM img;
));
($start, $peak) = peak_rss_anon("SELECT * FROM zipper_lake.apply_changes('acct', 'chg_late')");
cmp_ok($peak, '<=', $apply_bound_kb,
	"a late batch of 225,000 changes over the record: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");
is($node->safe_psql('postgres', q(
SELECT count(*) FILTER (WHERE name LIKE '%-late' AND valid_to = '2021-08-02') || ' ' ||
       count(*) FILTER (WHERE valid_to = 'infinity' AND valid_from = '2021-08-02')
  FROM acct)),
	'225000 225000', 'the late changes end at the no-ops the record remembers');
is($node->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('acct'))),
	'', 'verify is clean after the late batch');

# verify() loads a sub-group's key directory as it checks it, and lets the
# cache drop those it checked (README "Bounded memory"): with
# key_cache_memory at 1MB the table's directories (about 9 bytes a version)
# never pile up -- holding them all peaked at 72 MB, 44 MB
# without
($start, $peak) = peak_rss_anon(
	"SET zipper_lake.key_cache_memory = '1MB'; SELECT count(*) FROM zipper_lake.verify('acct')");
cmp_ok($peak, '<=', 2 * $work_mem_kb + 48 * 1024,
	"verify of acct, key_cache_memory 1MB: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 48 MB");

# a truncate in a batch (README "Change semantics") is a change of every
# key: a chunk counts the changes its truncates make of its keys, so 400
# truncates in a batch of 20,000 keys (8 million changes of keys) are
# applied in chunks of a few hundred keys, not all at once (800 MB)
$node->safe_psql('postgres', q(
CREATE TABLE trunc (id bigint, name text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('trunc', ARRAY['id']);
CREATE TABLE chg_trunc AS
SELECT id, 'k' || id AS name, timestamptz '2022-01-01' AS change_time, 'I' AS op
  FROM generate_series(1, 20000) id
UNION ALL
SELECT NULL, NULL, timestamptz '2022-01-01' + t * interval '1 second', 'T'
  FROM generate_series(1, 400) t;
));
($start, $peak) = peak_rss_anon("SELECT * FROM zipper_lake.apply_changes('trunc', 'chg_trunc')");
cmp_ok($peak, '>', 0, 'sampled the backend during the batch of truncates');
cmp_ok($peak, '<=', $apply_bound_kb,
	"400 truncates of 20,000 keys: RssAnon peak $peak kB (at start $start kB) within 2 x work_mem + 64 MB");
is($node->safe_psql('postgres', q(
SELECT count(*) || ' ' || count(*) FILTER (WHERE valid_to = '2022-01-01 00:00:01') FROM trunc)),
	'20000 20000', 'every key was deleted by the first truncate');

$node->stop;
done_testing();
