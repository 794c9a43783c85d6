# Real wal2json output decoded by zipper_lake._decode_events, and applied
# by zipper_lake.apply_events: the zipper table must hold the source's
# history, every version from its transaction's commit time.
#
# A source table is changed under a logical replication slot of wal2json
# (format-version 2, include-timestamp, include-lsn); the slot's output is
# stored as it comes (lsn, xid, data) and decoded (src/apply/events/zl_events.c): one
# change a row, the key change of an update as a delete of the old key and
# an upsert of the new one, an unchanged TOAST value left out (kept), the
# truncate, begin, commit and message rows skipped, every change at its
# transaction's commit time, and the row's lsn as its seq.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('wal2json');
$node->init(allows_streaming => 'logical');
$node->append_conf('postgresql.conf', 'autovacuum = off');    # its VACUUM would compact and truncate (TAP 010 tests it)
$node->append_conf('postgresql.conf', "timezone = 'UTC'");
$node->start;
my $libdir = $node->safe_psql('postgres',
	q(SELECT setting FROM pg_config() WHERE name = 'PKGLIBDIR'));
plan skip_all => "wal2json is not installed in $libdir (Debian: postgresql-15-wal2json)"
  unless -f "$libdir/wal2json.so";
# servers that restrict which libraries may be output plugins must allow it
if ($node->safe_psql('postgres',
		q(SELECT count(*) FROM pg_settings WHERE name = 'output_plugin_libraries')) eq '1')
{
	$node->safe_psql('postgres', q(ALTER SYSTEM SET output_plugin_libraries = 'wal2json'));
	$node->reload;
}

$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE src (id int PRIMARY KEY, name text, big text, amount numeric, seen timestamptz);
ALTER TABLE src ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE hist (id int, name text, big text, amount numeric, seen timestamptz,
                   valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('hist', ARRAY['id']);
SELECT 1 FROM pg_create_logical_replication_slot('zl', 'wal2json');
));

# the changes, each in its own transaction; big of key 1 is stored out of line
$node->safe_psql('postgres', $_) for (
	q(INSERT INTO src VALUES
	  (1, 'a', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g), 1.50,
	   '2024-01-02 10:00:00+00'),
	  (2, 'b', 'small', NULL, NULL)),
	q(UPDATE src SET name = 'a2' WHERE id = 1),
	q(UPDATE src SET id = 3 WHERE id = 2),
	q(DELETE FROM src WHERE id = 1),
	q(TRUNCATE src),
	q(SELECT pg_logical_emit_message(true, 'zl', 'hello')));

$node->safe_psql('postgres', q(
CREATE TABLE events AS
SELECT lsn, xid, data
  FROM pg_logical_slot_get_changes('zl', NULL, NULL, 'format-version', '2',
                                   'include-timestamp', '1', 'include-lsn', '1');
CREATE TABLE decoded AS
SELECT * FROM zipper_lake._decode_events('hist', 'events', 'wal2json', event => 'data');
));

# the changes in order (seq, sub_seq), big shown by its length
is($node->safe_psql('postgres', q(
SELECT string_agg(format('%s %s %s %s', op, sub_seq, coalesce(columns::text, '-'),
                         coalesce((SELECT array_agg(CASE WHEN c = 'big' THEN 'big:' || length(v) ELSE v END
                                                    ORDER BY o)
                                     FROM unnest(columns, vals) WITH ORDINALITY AS u(c, v, o))::text, '-')),
                  E'\n' ORDER BY seq, sub_seq)
  FROM decoded WHERE op <> 's')),
	join("\n",
		'u 1 {id,name,big,amount,seen} {1,a,big:6400,1.50,"2024-01-02 10:00:00+00"}',
		'u 1 {id,name,big,amount,seen} {2,b,big:5,NULL,NULL}',
		'u 1 {id,name,amount,seen} {1,a2,1.50,"2024-01-02 10:00:00+00"}',
		'd 0 {id} {2}',
		'u 1 {id,name,big,amount,seen} {3,b,big:5,NULL,NULL}',
		'd 1 {id} {1}',
		't 1 - -'),
	'inserts, an update keeping the TOAST value, a key change, a delete and a truncate');

is($node->safe_psql('postgres', q(
SELECT count(*) FROM decoded WHERE op = 's')),
	$node->safe_psql('postgres', q(
SELECT count(*) FROM events WHERE data::jsonb->>'action' IN ('B', 'C', 'M'))),
	'begin, commit and message rows are skipped');

# each change at its transaction's commit time, its seq the row's lsn
is($node->safe_psql('postgres', q(
SELECT count(*)
  FROM decoded d JOIN events e ON e.ctid = substr(d.event_ref, 6)::tid
 WHERE d.op <> 's'
   AND d.change_time = (SELECT (b.data::jsonb->>'timestamp')::timestamptz
                          FROM events b
                         WHERE b.xid = e.xid AND b.data::jsonb->>'action' = 'B')
   AND d.seq = e.lsn - '0/0'::pg_lsn)),
	'7', 'every change at its commit time, ordered by its lsn');

# applied: the source's history, each version from its commit time (the
# transactions' begin rows carry them, in lsn order: insert, update, key
# change, delete, truncate)
is($node->safe_psql('postgres', q(
SELECT changes || ' ' || skipped FROM zipper_lake.apply_events('hist', 'events', 'wal2json', event => 'data'))),
	'7 ' . $node->safe_psql('postgres', q(
SELECT count(*) FROM events WHERE data::jsonb->>'action' IN ('B', 'C', 'M'))),
	'apply_events applies the seven changes and skips the rest');
is($node->safe_psql('postgres', q(
WITH t AS (SELECT array_agg((data::jsonb->>'timestamp')::timestamptz ORDER BY lsn) AS c
             FROM events WHERE data::jsonb->>'action' = 'B'),
     want (id, name, big, amount, seen, f, u) AS (
       SELECT 1, 'a', 6400, 1.50, timestamptz '2024-01-02 10:00:00+00', c[1], c[2] FROM t
       UNION ALL SELECT 1, 'a2', 6400, 1.50, timestamptz '2024-01-02 10:00:00+00', c[2], c[4] FROM t
       UNION ALL SELECT 2, 'b', 5, NULL, NULL, c[1], c[3] FROM t
       UNION ALL SELECT 3, 'b', 5, NULL, NULL, c[3], c[5] FROM t),
     got AS (SELECT id, name, length(big), amount, seen, valid_from, valid_to FROM hist)
SELECT (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) d) || ' ' ||
       (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) d))),
	'0 0', 'the zipper table holds the source history (the TOAST value kept)');
is($node->safe_psql('postgres', q(SELECT * FROM zipper_lake.verify('hist'))), '',
	'verify is clean');

$node->stop;
done_testing();
