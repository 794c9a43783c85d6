# VACUUM's maintenance worker gives way to a writer (README "Lifecycle").
#
# The worker moves sub-groups off the end of a mostly free file holding the
# table's writer lock; an apply_changes that arrives meanwhile waits for
# it.  When a writer waits, the worker stops after the move at hand and
# commits (zl_maintenance_gives_way in src/lifecycle/zl_retention.c), so a
# batch waits for one sub-group's move, not for all of them; the next
# VACUUM moves the rest.  zipper_lake.maintenance_pause holds the worker
# after its first move, so the apply queues there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('node');
$node->init;
$node->append_conf('postgresql.conf', qq(
autovacuum = off
log_lock_waits = on
deadlock_timeout = 100ms
));
$node->start;

# an end-date partition of 25,000 rows low in the file, four of 5,000 above
# it; dropping the first leaves the four to move down, one sub-group each
$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE rl (id int, pad text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('rl', key => ARRAY['id'], history_format => 'rows');
INSERT INTO rl SELECT g, md5(g::text) || md5((g + 1)::text), '2023-01-01', '2023-01-05'
  FROM generate_series(1, 25000) g;
INSERT INTO rl SELECT g, md5(g::text) || md5((g + 2)::text), '2023-02-01',
       '2024-01-20'::timestamptz + (g % 4) * interval '1 day'
  FROM generate_series(1, 20000) g;
SELECT zipper_lake.drop_history('rl', '2023-01-06');
CREATE TABLE ch (id int, pad text, change_time timestamptz);
INSERT INTO ch VALUES (1, 'changed', '2024-02-01');
));

my $low_sql = q(SELECT count(*) FILTER (WHERE first_block < 359) || ' of ' || count(*)
  FROM zipper_lake.inspect('rl') WHERE partition_end < 'infinity');
my $content_sql = q(
SELECT count(*) || ' ' || md5(string_agg(format('%s|%s|%s|%s', id, pad, valid_from, valid_to),
                                          ',' ORDER BY id, valid_from)) FROM rl WHERE id <> 1);
is($node->safe_psql('postgres', $low_sql), '0 of 4', 'four history sub-groups above the free blocks');
my $content = $node->safe_psql('postgres', $content_sql);

# --- VACUUM held after its first move; an apply queues for the table ---------
my $vacuum = $node->background_psql('postgres', on_error_stop => 1);
$vacuum->query_until(qr/vacuum started/, q(
SET zipper_lake.maintenance_pause = '2s';
\echo vacuum started
VACUUM rl;
\echo vacuum done
));
$node->poll_query_until('postgres', q(
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'zipper_lake maintenance' AND wait_event = 'Extension'))
  or die 'the worker did not reach its pause after the first move';

my $apply = $node->background_psql('postgres', on_error_stop => 1);
$apply->query_until(qr/apply started/, q(
\echo apply started
SELECT 'applied ' || changes FROM zipper_lake.apply_changes('rl', 'ch');
));
$apply->query_until(qr/applied 1/, '');
pass('the apply that waited went on');
$apply->quit;
$vacuum->query_until(qr/vacuum done/, '');
$vacuum->quit;

is($node->safe_psql('postgres', $low_sql), '1 of 4',
	'the worker moved one sub-group and gave way to the waiting apply');
ok($node->log_contains('maintenance gave way to a waiting writer'), 'the server log says so');
ok($node->log_contains('still waiting for ExclusiveLock on advisory lock'),
	'the apply did wait for the writer lock');

# --- the next VACUUM moves the rest; nothing lost or doubled ------------------
$node->safe_psql('postgres', 'VACUUM rl');
is($node->safe_psql('postgres', $low_sql), '4 of 4', 'the next VACUUM moved the other three');
is($node->safe_psql('postgres', $content_sql), $content, 'the other keys as before');
is($node->safe_psql('postgres', q(SELECT pad FROM rl WHERE id = 1 AND valid_to = 'infinity')),
	'changed', 'the apply\'s version is there');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('rl'))), '0', 'verify() clean');

# --- VACUUM's index pass lets writers in ------------------------------------
# The pass notes the first TID block not taken and lets the writer lock go
# (src/lifecycle/zl_index_vacuum.c): applies that commit while VACUUMs run
# one after the other leave every index answering what a sequential scan
# answers, and amcheck clean.
$node->safe_psql('postgres', q(
CREATE EXTENSION amcheck;
CREATE TABLE ix (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ix', ARRAY['id']);
INSERT INTO ix SELECT g, 'v' || g % 50, '2026-01-01', 'infinity' FROM generate_series(1, 3000) g;
CREATE INDEX ix_v ON ix (v);
CREATE INDEX ix_vid ON ix USING hash (id);
CREATE TABLE ix_ch (id int, v text, change_time timestamptz);
));
my $writer = $node->background_psql('postgres', on_error_stop => 1);
$writer->query_until(qr/writes started/, q(
\echo writes started
DO $$
BEGIN
  FOR b IN 1..60 LOOP
    DELETE FROM ix_ch;
    INSERT INTO ix_ch SELECT (b * 37 + g * 50) % 3000 + 1, 'v' || (random() * 50)::int,
                             '2026-01-02'::timestamptz + b * interval '1 hour'
      FROM generate_series(1, 60) g;
    PERFORM zipper_lake.apply_changes('ix', 'ix_ch');
    COMMIT;
  END LOOP;
END $$;
\echo writes done
));
for (1 .. 15) { $node->safe_psql('postgres', 'VACUUM ix'); }
$writer->query_until(qr/writes done/, '');
$writer->quit;
$node->safe_psql('postgres', 'VACUUM ix');
my $answers_sql = q(
SELECT string_agg(v || ':' || n, ' ' ORDER BY v)
  FROM (SELECT v, count(*) n FROM ix WHERE v IN (SELECT 'v' || g FROM generate_series(0, 50) g) GROUP BY v) a);
my $seq = $node->safe_psql('postgres', "SET enable_indexscan = off; SET enable_bitmapscan = off; $answers_sql");
is($node->safe_psql('postgres', "SET enable_seqscan = off; SET enable_bitmapscan = off; $answers_sql"), $seq,
	'after VACUUMs amid applies: the btree index scan answers as the sequential scan');
is($node->safe_psql('postgres', "SET enable_seqscan = off; SET enable_indexscan = off; $answers_sql"), $seq,
	'and the bitmap scan');
is($node->safe_psql('postgres', q(
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM generate_series(1, 3000) g
 WHERE (SELECT count(*) FROM ix WHERE id = g) <> (SELECT count(*) FROM ix WHERE id + 0 = g))), '0',
	'hash look-ups of every id answer as the scan');
is($node->safe_psql('postgres', q(SELECT bt_index_check('ix_v', true))), '', 'bt_index_check clean');
is($node->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('ix'))), '0', 'verify() clean');

$node->stop;
done_testing();
