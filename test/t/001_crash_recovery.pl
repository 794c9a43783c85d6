# Crash recovery of zipper_lake tables.
#
# Committed rows (INSERT and COPY, open and closed versions, a 100 kB value)
# must survive an immediate shutdown (no shutdown checkpoint: the pages only
# exist in WAL), rows of a transaction that was open at the crash must be
# gone even though its pages were written and WAL-logged, verify() must be
# clean, and the table must keep working after recovery (and after a second
# crash).  A second table is created, truncated and reloaded after the last
# checkpoint, so recovery must also rebuild its new relfilenode.  The cluster
# runs with data checksums so that every page read back from disk after the
# restart is checked.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(extra => ['--data-checksums']);
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
# no checkpoint may happen on its own between the load and the crash
$node->append_conf('postgresql.conf', qq(
checkpoint_timeout = '1h'
max_wal_size = '4GB'
));
$node->start;

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE acct (id int, name text,
                   valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', key => ARRAY['id']);
));

# Checksum of the whole table in a canonical order (md5 of the name keeps the
# aggregated string small despite the 100 kB value).
my $content_sql = q(
SELECT count(*) || ' ' || md5(string_agg(
         format('%s|%s|%s|%s', id, md5(name), extract(epoch FROM valid_from),
                extract(epoch FROM valid_to)),
         ',' ORDER BY id, valid_from))
  FROM acct);

# Sub-groups visible to a fresh snapshot must not share blocks and must lie
# inside the relation (block 0 is the metapage).
my $layout_sql = q(
SELECT (SELECT count(*) FROM zipper_lake.inspect('acct') a
          JOIN zipper_lake.inspect('acct') b ON a.sub_group < b.sub_group
         WHERE int8range(a.first_block, a.first_block + a.blocks)
            && int8range(b.first_block, b.first_block + b.blocks))
    || ' ' ||
       (SELECT count(*) FROM zipper_lake.inspect('acct')
         WHERE first_block < 1
            OR first_block + blocks > pg_relation_size('acct') / current_setting('block_size')::int));

# Per key: two closed versions of 3 days and one open version, starting on
# one of 90 days at one of 24 hours, so the rows span many partitions and
# file-group windows.
sub history_sql
{
	my ($lo, $hi, $label) = @_;
	return qq(
INSERT INTO acct
SELECT id, '$label' || id || '-v' || v,
       start + (v - 1) * interval '3 days',
       CASE WHEN v = 3 THEN 'infinity' ELSE start + v * interval '3 days' END
  FROM (SELECT id, timestamptz '2024-01-01 00:00+00'
                    + (id % 90) * interval '1 day' + (id % 24) * interval '1 hour' AS start
          FROM generate_series($lo, $hi) id) k,
       generate_series(1, 3) v;);
}

# --- committed load, part 1: INSERT, then a checkpoint --------------------
$node->safe_psql('postgres', history_sql(1, 1000, 'ins'));
$node->safe_psql('postgres', 'CHECKPOINT');

# --- committed load, part 2 (after the last checkpoint: WAL only) ---------
$node->safe_psql('postgres', history_sql(1001, 2000, 'ins'));

# COPY: one closed and one open version per key, spread over 60 days
my $copy = "COPY acct FROM STDIN;\n";
for my $id (3001 .. 3800)
{
	my $day = 1 + $id % 28;
	my $month = 3 + $id % 2;
	my $mid = sprintf('2024-%02d-%02d %02d:30:00+00', $month, $day, $id % 24);
	$copy .= "$id\tcopy$id-old\t2023-12-15 00:00:00+00\t$mid\n";
	$copy .= "$id\tcopy$id-new\t$mid\tinfinity\n";
}
$copy .= "\\.\n";
$node->safe_psql('postgres', $copy);

# one row with a 100 kB value that does not compress (must go to TOAST)
$node->safe_psql('postgres', q(
INSERT INTO acct
SELECT 5000, string_agg(md5(g::text), '' ORDER BY g), '2024-02-10 08:00+00', 'infinity'
  FROM generate_series(1, 3200) g;));

# a table created, loaded, truncated and reloaded after the checkpoint: its
# relfilenodes and metapages exist only in WAL too
$node->safe_psql('postgres', q(
CREATE TABLE rate (ccy text, rate numeric,
                   valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('rate', key => ARRAY['ccy']);
INSERT INTO rate SELECT 'OLD' || g, g, '2024-01-01', 'infinity' FROM generate_series(1, 100) g;
));
$node->safe_psql('postgres', q(
BEGIN;
TRUNCATE rate;
INSERT INTO rate SELECT 'C' || g, g + d / 100.0,
       timestamptz '2024-01-01 00:00+00' + d * interval '1 day',
       CASE WHEN d = 29 THEN 'infinity'
            ELSE timestamptz '2024-01-01 00:00+00' + (d + 1) * interval '1 day' END
  FROM generate_series(1, 10) g, generate_series(0, 29) d;
COMMIT;
));
my $rate_sql = q(
SELECT count(*) || ' ' || md5(string_agg(r::text, ',' ORDER BY r::text)) FROM rate r);
my $rate = $node->safe_psql('postgres', $rate_sql);
like($rate, qr/^300 /, 'rate has only its reloaded rows');

my $committed = $node->safe_psql('postgres', $content_sql);
like($committed, qr/^7601 [0-9a-f]{32}$/, 'committed load has 7601 rows');
is($node->safe_psql('postgres', q(SELECT length(name) FROM acct WHERE id = 5000)),
	'102400', '100 kB value reads back before the crash');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acct'))),
	'0', 'verify is clean before the crash');
# closed versions are columnar history (README "Storage formats"), open ones rows
is($node->safe_psql('postgres', q(
SELECT string_agg(DISTINCT format || ':' || (partition_end = 'infinity'), ',' ORDER BY format || ':' || (partition_end = 'infinity'))
  FROM zipper_lake.inspect('acct'))), 'columnar:false,rows:true',
	'history is columnar, the current partition rows');
my $committed_subgroups = $node->safe_psql('postgres',
	q(SELECT count(*) FROM zipper_lake.inspect('acct')));
cmp_ok($committed_subgroups, '>', 50,
	'committed rows are spread over many sub-groups');

# --- uncommitted load, left open at the crash ------------------------------
my $size_before = $node->safe_psql('postgres', q(SELECT pg_relation_size('acct')));
my $bg = $node->background_psql('postgres', on_error_stop => 1);
$bg->query_safe('BEGIN');
$bg->query_safe(history_sql(900001, 902000, 'lost'));
$bg->query_safe(q(
INSERT INTO acct
SELECT 905000, string_agg(md5((-g)::text), '' ORDER BY g), '2024-02-11 08:00+00', 'infinity'
  FROM generate_series(1, 3200) g;));
is($bg->query_safe(q(SELECT count(*) FROM acct WHERE id >= 900000)), '6001',
	'open transaction sees its own uncommitted rows');
my $size_during = $node->safe_psql('postgres', q(SELECT pg_relation_size('acct')));
cmp_ok($size_during, '>', $size_before,
	'uncommitted INSERT has written its pages before the crash');
is($node->safe_psql('postgres', $content_sql), $committed,
	'other sessions do not see the uncommitted rows');

# --- crash -----------------------------------------------------------------
$node->stop('immediate');
eval { $bg->quit };    # its server is gone; psql exits with an error
$node->start;

is($node->safe_psql('postgres', $content_sql), $committed,
	'after crash recovery: all committed rows, and nothing else');
is($node->safe_psql('postgres', q(SELECT count(*) FROM acct WHERE id >= 900000)),
	'0', 'after crash recovery: no row of the open transaction');
is($node->safe_psql('postgres',
		q(SELECT length(name) || ' ' || md5(name) FROM acct WHERE id = 5000)),
	$node->safe_psql('postgres',
		q(SELECT length(s) || ' ' || md5(s) FROM (SELECT string_agg(md5(g::text), '' ORDER BY g) s
                                               FROM generate_series(1, 3200) g) x)),
	'after crash recovery: the 100 kB value is intact');
is($node->safe_psql('postgres',
		q(SELECT count(*) FROM zipper_lake.inspect('acct'))),
	$committed_subgroups, 'after crash recovery: same sub-groups as committed');
is($node->safe_psql('postgres', $layout_sql), '0 0',
	'after crash recovery: sub-groups do not overlap and lie inside the file');
is($node->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('acct'))),
	'', 'after crash recovery: verify is clean');
is($node->safe_psql('postgres', $rate_sql), $rate,
	'after crash recovery: the truncated and reloaded table has its new rows');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('rate'))),
	'0', 'after crash recovery: verify of the reloaded table is clean');
cmp_ok($node->safe_psql('postgres', q(SELECT pg_relation_size('acct'))), '>=', $size_during,
	'after crash recovery: pages of the aborted load are still in the file');

# --- the table keeps working after recovery -------------------------------
$node->safe_psql('postgres', history_sql(2001, 2500, 'after'));
$node->safe_psql('postgres',
	"COPY acct FROM STDIN;\n"
	  . "6001\tafter-copy\t2024-05-01 00:00:00+00\t2024-05-02 00:00:00+00\n"
	  . "6001\tafter-copy2\t2024-05-02 00:00:00+00\tinfinity\n\\.\n");
is($node->safe_psql('postgres', q(SELECT count(*) FROM acct)), 7601 + 1500 + 2,
	'inserts and COPY after recovery are visible');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acct'))),
	'0', 'verify is clean after new writes');
is($node->safe_psql('postgres', $layout_sql), '0 0',
	'new sub-groups do not overlap the aborted or committed ones');
my $after = $node->safe_psql('postgres', $content_sql);

# --- a second crash: writes made after recovery are durable too -----------
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', $content_sql), $after,
	'after a second crash: post-recovery writes survive');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acct'))),
	'0', 'after a second crash: verify is clean');

# --- a crash in the middle of VACUUM FULL, then right after one -------------
# (README "DDL"): the table keeps its old file, then has its new one whole
$bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/started/, q(
\echo started
VACUUM FULL acct;
));
$node->stop('immediate');
eval { $bg->quit };
$node->start;
is($node->safe_psql('postgres', $content_sql), $after,
	'after a crash during VACUUM FULL: the same rows');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('acct'))),
	'0', 'after a crash during VACUUM FULL: verify is clean');
$node->safe_psql('postgres', 'VACUUM FULL acct');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', $content_sql), $after,
	'after a crash following VACUUM FULL: the same rows');
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM zipper_lake.verify('acct'))
		+ (SELECT count(*) FROM zipper_lake.inspect('acct') WHERE masked_rows > 0)}),
	'0', 'after a crash following VACUUM FULL: verify is clean, no masked rows');

$node->stop;
done_testing();
