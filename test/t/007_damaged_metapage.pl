# A zipper table whose metapage is damaged can still be dropped.
#
# Reading a zipper table checks the magic number and format version in its
# metapage (block 0) and refuses a table that fails the check.  Dropping
# one must not: DROP forgets the table's metadata by its oid (README
# "Features and how they work", DDL) and reads a metapage only for a
# relation that has no storage of its own, softly.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('damaged');
$node->init;
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$node->start;

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE acct (id int, v text, valid_from timestamptz NOT NULL,
                   valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('acct', key => ARRAY['id']);
INSERT INTO acct SELECT k, 'v', '2026-01-01', 'infinity' FROM generate_series(1, 100) k;
));
my $file = $node->safe_psql('postgres', q(SELECT pg_relation_filepath('acct')));
my $relid = $node->safe_psql('postgres', q(SELECT 'acct'::regclass::oid));
$node->stop;

# overwrite the magic number, the first word after the page header
my $path = $node->data_dir . '/' . $file;
open(my $fh, '+<', $path) or die "could not open $path: $!";
binmode $fh;
seek($fh, 24, 0) or die "could not seek: $!";
print $fh pack('L', 0xDEADBEEF);
close($fh);
$node->start;

my ($ret, $stdout, $stderr) = $node->psql('postgres', q(SELECT count(*) FROM acct));
isnt($ret, 0, 'reading the damaged table fails');
like($stderr, qr/has a bad metapage/, 'with an error naming the metapage');

($ret, $stdout, $stderr) = $node->psql('postgres', q(DROP TABLE acct));
is($ret, 0, 'the damaged table can be dropped') or diag($stderr);
is($node->safe_psql('postgres', qq(
SELECT (SELECT count(*) FROM zipper_lake.registration WHERE tbl = ${relid}::oid)
     + (SELECT count(*) FROM zipper_lake.storage WHERE relid = ${relid}::oid))),
	'0', 'and its metadata went with it');

$node->stop;
done_testing();
