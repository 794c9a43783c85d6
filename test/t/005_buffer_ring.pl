# Which scans read through a ring of buffers.
#
# A heap sequential scan of a table larger than a quarter of shared buffers
# reads through a small ring (BAS_BULKREAD), so that one big scan does not
# evict everything else.  A zipper scan decides on the pages it will read,
# not on the size of the file: a pruned scan of a big table reads few pages
# and must keep them cached, as an index scan would; a scan of the whole
# history must still go through the ring.
#
# With shared_buffers = 2MB there are 256 buffers: scans of more than 64
# pages use a ring of 32.  The table has about 400 pages of columnar
# history (README "Storage formats"; hex text, which compresses to about
# half) and 50 of open versions.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('ring');
$node->init;
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$node->append_conf('postgresql.conf', qq(
shared_buffers = '2MB'
max_parallel_workers_per_gather = 0
));
$node->start;

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE EXTENSION pg_buffercache;
CREATE TABLE acct (id int, pad text, valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', key => ARRAY['id']);
INSERT INTO acct
SELECT k, (SELECT string_agg(md5(k || ' ' || d || ' ' || g), '') FROM generate_series(1, 7) g),
       '2026-01-01'::timestamptz + d * interval '1 day',
       '2026-01-02'::timestamptz + d * interval '1 day'
  FROM generate_series(1, 1000) k, generate_series(0, 29) d;
INSERT INTO acct
SELECT k, repeat('c', 200), '2026-02-01', 'infinity'
  FROM generate_series(1, 1500) k;
));

my $pages = $node->safe_psql('postgres', q(
SELECT sum(blocks) FILTER (WHERE partition_end = 'infinity') || ' ' ||
       sum(blocks) FILTER (WHERE partition_end <> 'infinity')
  FROM zipper_lake.inspect('acct')));
my ($current_pages, $history_pages) = split / /, $pages;
ok($current_pages > 32 && $current_pages <= 64,
	"open versions take more pages than the ring, fewer than a quarter of shared buffers ($current_pages)");
ok($history_pages > 256, "the history is larger than shared buffers ($history_pages)");

# buffers read from outside shared buffers by a query (EXPLAIN's "read=")
sub pages_read
{
	my ($query) = @_;
	my $plan = $node->safe_psql('postgres',
		"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) $query");
	return $plan =~ /read=(\d+)/ ? $1 : 0;
}

# from disk through the first scan, from shared buffers in the second
$node->restart;
my $current = q(SELECT count(*) FROM zipper_lake.current(NULL::acct));
ok(pages_read($current) >= $current_pages, 'the first scan reads the pages');
is(pages_read($current), 0, 'a pruned scan keeps its pages in shared buffers');
is($node->safe_psql('postgres', $current), '1500', 'current rows');

$node->restart;
my $whole = q(SELECT count(*), sum(length(pad)) FROM acct);
is($node->safe_psql('postgres', $whole), '31500|7020000', 'all rows, every value read');
my $cached = $node->safe_psql('postgres', q(
SELECT count(*) FROM pg_buffercache
 WHERE relfilenode = pg_relation_filenode('acct')));
ok($cached <= 40, "a scan of the whole history reads through the ring ($cached buffers cached)");

$node->stop;
done_testing();
