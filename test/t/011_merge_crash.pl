# Merging small history file groups (src/write/zl_merge.c) is crash-safe
# and replicated.
#
# VACUUM's worker merges runs of small neighbouring file groups in one
# transaction.  zipper_lake.maintenance_pause holds the worker after it has
# written the merged sub-groups and deleted the old ones, before its commit;
# a kill -9 of the worker then (the postmaster restarts the cluster through
# crash recovery) must leave the old file groups: nothing lost or doubled,
# verify() clean.  While the worker waits, an apply waits for its writer
# lock and goes on after it.  The next VACUUM merges; a streaming standby
# then shows the merged sub-groups and the same query results.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
$primary->append_conf('postgresql.conf', qq(
autovacuum = off
restart_after_crash = on
));
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# 200 keys opened on 40 days, closed on 03-01 by one batch per start day:
# 40 small file groups of one base window (as 0.1 wrote them); a late
# change masks rows in some of them
$primary->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE m (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('m', ARRAY['id']);
INSERT INTO m SELECT k, 'v0-' || k, '2026-01-01 06:00+00'::timestamptz + (k % 40) * interval '1 day', 'infinity'
  FROM generate_series(1, 200) k;
CREATE TABLE ch (id int, v text, change_time timestamptz);
DO $$
BEGIN
  FOR d IN 0..39 LOOP
    DELETE FROM ch;
    INSERT INTO ch SELECT k, 'v1-' || k, '2026-03-01 12:00+00'::timestamptz + d * interval '1 minute'
      FROM generate_series(1, 200) k WHERE k % 40 = d;
    PERFORM zipper_lake.apply_changes('m', 'ch');
  END LOOP;
END $$;
DELETE FROM ch;
INSERT INTO ch SELECT k, 'late-' || k, '2026-02-15 00:00+00' FROM generate_series(1, 200, 7) k;
SELECT zipper_lake.apply_changes('m', 'ch');
));

my $content_sql = q(
SELECT count(*) || ' ' || md5(string_agg(format('%s|%s|%s|%s', id, v, valid_from, valid_to),
                                          ',' ORDER BY id, valid_from)) FROM m);
my $as_of_sql = q(
SELECT count(*) || ' ' || md5(string_agg(format('%s|%s', id, v), ',' ORDER BY id))
  FROM zipper_lake.as_of(NULL::m, '2026-02-20 00:00+00'));
my $history_sql = q(
SELECT count(*) || ' ' || count(DISTINCT window_start)
  FROM zipper_lake.inspect('m') WHERE partition_end = '2026-03-01');

my $content = $primary->safe_psql('postgres', $content_sql);
my $as_of = $primary->safe_psql('postgres', $as_of_sql);
my $content_no3 = $primary->safe_psql('postgres', $content_sql =~ s/FROM m\s*\z/FROM m WHERE id <> 3/r);
like($content, qr/^429 /, 'the table holds its versions');
is($primary->safe_psql('postgres', $history_sql), '41 41',
	'41 small file groups of one sub-group each in partition 03-01');

# --- a merge held before its commit, then kill -9 ----------------------------
my $vacuum = $primary->background_psql('postgres', on_error_stop => 0);
$vacuum->query_until(qr/vacuum started/, q(
SET zipper_lake.maintenance_pause = '1h';
\echo vacuum started
VACUUM m;
));
my $worker_sql = q(
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'zipper_lake maintenance' AND wait_event = 'Extension');
$primary->poll_query_until('postgres', qq(SELECT count(*) = 1 FROM ($worker_sql) w))
  or die 'the merge did not reach its pause';
my $worker = $primary->safe_psql('postgres', $worker_sql);

is($primary->safe_psql('postgres', $content_sql), $content,
	'while the merge is open: other sessions see the same rows');
is($primary->safe_psql('postgres', $history_sql), '41 41',
	'while the merge is open: other sessions see the old file groups');

# an apply waits for the worker's writer lock
my $apply = $primary->background_psql('postgres', on_error_stop => 0);
$apply->query_until(qr/apply started/, q(
\echo apply started
BEGIN;
DELETE FROM ch;
INSERT INTO ch VALUES (3, 'during', '2026-03-05 00:00+00');
SELECT zipper_lake.apply_changes('m', 'ch');
COMMIT;
));
$primary->poll_query_until('postgres', q(
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE query LIKE '%apply_changes%' AND wait_event_type = 'Lock'))
  or die 'the apply did not wait for the merge';

kill 'KILL', $worker;
eval { $vacuum->quit };
eval { $apply->quit };
$primary->poll_query_until('postgres', 'SELECT true')
  or die 'the server did not come back after the crash';

is($primary->safe_psql('postgres', $content_sql), $content,
	'after kill -9 during the merge: nothing lost or doubled');
is($primary->safe_psql('postgres', $as_of_sql), $as_of, 'after kill -9: as_of the same');
is($primary->safe_psql('postgres', $history_sql), '41 41',
	'after kill -9: the old file groups');
is($primary->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('m'))), '0',
	'after kill -9: verify() clean');

# --- the next VACUUM merges; an apply while the merge waits goes on after it ---
$vacuum = $primary->background_psql('postgres', on_error_stop => 1);
$vacuum->query_until(qr/vacuum started/, q(
SET zipper_lake.maintenance_pause = '2s';
\echo vacuum started
VACUUM m;
\echo vacuum done
));
$primary->poll_query_until('postgres', qq(SELECT count(*) = 1 FROM ($worker_sql) w))
  or die 'the merge did not reach its pause';
$apply = $primary->background_psql('postgres', on_error_stop => 1);
$apply->query_safe(q(DELETE FROM ch));
$apply->query_safe(q(INSERT INTO ch VALUES (3, 'after', '2026-03-05 00:00+00')));
is($apply->query_safe(q(SELECT changes FROM zipper_lake.apply_changes('m', 'ch'))), '1',
	'an apply waiting for the merge goes on after it');
$apply->quit;
$vacuum->query_until(qr/vacuum done/, '');
$vacuum->quit;

is($primary->safe_psql('postgres', $history_sql), '1 1',
	'VACUUM merged partition 03-01 into one file group of one sub-group');
my $content_after = $primary->safe_psql('postgres', $content_sql);
like($content_after, qr/^430 /, 'the merged table plus the apply after it');
is($primary->safe_psql('postgres', $content_sql =~ s/FROM m\s*\z/FROM m WHERE id <> 3/r), $content_no3,
	'after the merge: the other keys as before');
is($primary->safe_psql('postgres', $as_of_sql), $as_of, 'after the merge: as_of the same');
is($primary->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('m'))), '0',
	'after the merge: verify() clean');

# --- the standby sees the merged sub-groups and the same results ----------------
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $history_sql), '1 1', 'standby: the merged file group');
is($standby->safe_psql('postgres', $content_sql), $content_after, 'standby: the same rows');
is($standby->safe_psql('postgres', $as_of_sql), $as_of, 'standby: as_of the same');
is($standby->safe_psql('postgres', q(SELECT count(*) FROM zipper_lake.verify('m'))), '0',
	'standby: verify() clean');

$standby->stop;
$primary->stop;
done_testing();
