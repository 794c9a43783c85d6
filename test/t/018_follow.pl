# Following a source of the same database, and what follow() refuses
# (README "Following a live source", src/follow):
#
#  - the initial image at the image time; later transactions at their
#    commit times: several changes of a key in one transaction are one
#    instant (the last wins), a no-op update makes no version, an update
#    of the key moves it, a TRUNCATE deletes every key;
#  - apply_changes refused on a followed table; pause (changes wait in the
#    slot) and resume; set_follow;
#  - schema changes: a column added to the source alone is not kept; once
#    the zipper table has it too, it is; a column of the zipper table
#    dropped from the source stops the follower with the error in the
#    followers view (missing_columns => 'error'), nothing lost;
#    set_follow(missing_columns => 'keep') and resume() go on from there;
#  - a value the zipper column's type does not read stops it naming the key;
#  - unfollow drops the slot and the replication origin, keeps the history;
#    dropping a followed zipper table drops what followed it;
#  - refusals: no REPLICATION attribute, a transaction block, a publication
#    without the table, a replica identity not covering the key, another
#    server without a password for a role that is not a superuser, and
#    the password never shown (view, error).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('follow');
$node->init(allows_streaming => 'logical');
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'zipper_lake'\n");
$node->start;
$node->safe_psql('postgres', q(
CREATE EXTENSION zipper_lake;
CREATE TABLE src (id int PRIMARY KEY, owner text, bal numeric);
INSERT INTO src VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
CREATE PUBLICATION pub FOR TABLE src;
CREATE TABLE acc (id int, owner text, bal numeric, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('acc', ARRAY['id']);
CREATE ROLE writer LOGIN REPLICATION;
GRANT SELECT ON src TO writer;
-- wait until the follower has applied everything committed before the call
CREATE FUNCTION caught_up(t regclass) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE target pg_lsn := pg_current_wal_flush_lsn();
BEGIN
  FOR i IN 1 .. 600 LOOP
    IF (SELECT caught_up_lsn >= target FROM zipper_lake.followers WHERE tbl = t) THEN RETURN true; END IF;
    IF (SELECT state <> 'running' FROM zipper_lake.followers WHERE tbl = t) THEN RETURN false; END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN false;
END $$;
));

sub psql_ok
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

sub psql_fails
{
	my ($sql, $pattern, $name) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	isnt($ret, 0, "$name: refused");
	like($err, $pattern, "$name: the error says why");
	return $err;
}

# refusals before anything is created
psql_fails("SET ROLE writer; SELECT zipper_lake.follow('acc', 'src', publication => 'pub')",
	qr/must be owner of table acc/, 'follow() by another role');
psql_fails("BEGIN; SELECT zipper_lake.follow('acc', 'src', publication => 'pub'); COMMIT",
	qr/cannot run inside a transaction block/, 'follow() in a transaction block');
psql_fails("SELECT zipper_lake.follow('acc', 'src')", qr/invalid publication.*\n.*\n.*CREATE PUBLICATION/,
	'follow() without a publication');
psql_ok('CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION other_pub FOR TABLE other');
psql_fails("SELECT zipper_lake.follow('acc', 'src', publication => 'other_pub')",
	qr/publication "other_pub" does not publish source table public.src/, 'a publication without the table');
psql_ok(q(CREATE TABLE nokey (id int, owner text, bal numeric); ALTER TABLE nokey REPLICA IDENTITY DEFAULT;
CREATE PUBLICATION nokey_pub FOR TABLE nokey WITH (publish = 'insert, truncate')));
psql_fails("SELECT zipper_lake.follow('acc', 'nokey', publication => 'nokey_pub')",
	qr/replica identity of source table public.nokey does not cover key column "id"/,
	'a replica identity that does not cover the key');
psql_ok('ALTER TABLE acc OWNER TO writer');
psql_ok('ALTER ROLE writer NOREPLICATION');
psql_fails("SET ROLE writer; SELECT zipper_lake.follow('acc', 'src', publication => 'pub')",
	qr/permission denied to follow a table of this database/, 'follow() without REPLICATION');
my $err = psql_fails(
	"SET ROLE writer; SELECT zipper_lake.follow('acc', 'src', 'host=/nonexistent dbname=x password=hunter2', 'pub')",
	qr/could not connect to source "[^"]*password=\*\*\*\*\*\*\*\*/, 'another server that is not there');
unlike($err, qr/hunter2/, 'the error does not show the password');
psql_fails("SET ROLE writer; SELECT zipper_lake.follow('acc', 'src', 'host=/nonexistent dbname=x', 'pub')",
	qr/password is required to reach source/, 'another server without a password, not a superuser');
is(psql_ok("SELECT count(*) FROM pg_replication_slots"), '0', 'the refusals created no slot');
psql_ok('ALTER ROLE writer REPLICATION');

# the image and the changes after it
my $image = psql_ok(q(SET ROLE writer;
SELECT image_rows || ' ' || slot FROM zipper_lake.follow('acc', 'src', publication => 'pub', batch_interval => '50 ms')));
like($image, qr/^3 zipper_lake_follow_\d+_\d+$/, 'follow() applies the image and names the slot');
is(psql_ok(q(SELECT string_agg(id || owner || bal, ' ' ORDER BY id) FROM acc
  WHERE valid_from = (SELECT image_time FROM zipper_lake.followers) AND valid_to = 'infinity')),
	'1a10 2b20 3c30', 'the image: the source rows from the image time');
is(psql_ok("SELECT state || ' ' || (worker_pid IS NOT NULL) FROM zipper_lake.followers"), 'running true',
	'the worker runs');
psql_ok('CREATE ROLE other REPLICATION');
for my $call ("pause('acc')", "resume('acc')", "set_follow('acc', batch_changes => 5)", "unfollow('acc')")
{
	psql_fails("SET ROLE other; SELECT zipper_lake.$call", qr/must be owner of table acc/,
		"$call by a role that does not own the table");
}
psql_ok(q(
UPDATE src SET bal = 11 WHERE id = 1;
UPDATE src SET owner = owner WHERE id = 2;
BEGIN; INSERT INTO src VALUES (4, 'd', 1); UPDATE src SET bal = 2 WHERE id = 4; UPDATE src SET owner = 'dd' WHERE id = 4; COMMIT;
UPDATE src SET id = 5 WHERE id = 3;
));
is(psql_ok("SELECT caught_up('acc')"), 't', 'the follower catches up');
is(psql_ok(q(SELECT string_agg(id || owner || bal || CASE WHEN valid_to = 'infinity' THEN '' ELSE ']' END, ' ' ORDER BY id, valid_from) FROM acc)),
	'1a10] 1a11 2b20 3c30] 4dd2 5c30',
	'updates, a no-op update, three changes of a key in one transaction, a key moved');
is(psql_ok(q(SELECT count(DISTINCT valid_from) FROM acc WHERE id = 4)), '1',
	'the changes of one transaction are one instant');
is(psql_ok(q(SELECT (SELECT valid_to FROM acc WHERE id = 3) = (SELECT valid_from FROM acc WHERE id = 5))),
	't', 'the moved key: the old one ends when the new one begins');

psql_fails("CREATE TABLE ch (id int, owner text, bal numeric, change_time timestamptz); SELECT * FROM zipper_lake.apply_changes('acc', 'ch')",
	qr/table "acc" follows a live source/, 'apply_changes on a followed table');

# TRUNCATE, then rows again in the same transaction
psql_ok("BEGIN; TRUNCATE src; INSERT INTO src VALUES (1, 'a', 11); COMMIT");
is(psql_ok("SELECT caught_up('acc')"), 't', 'caught up after TRUNCATE');
is(psql_ok(q(SELECT string_agg(id::text, ' ' ORDER BY id) FROM acc WHERE valid_to = 'infinity')), '1',
	'TRUNCATE deletes every key; a row inserted after it in its transaction stays');
is(psql_ok(q(SELECT count(*) FROM acc WHERE id = 1)), '2', 'an unchanged row is no new version');

# a TOASTed value an update leaves out (pgoutput sends it as unchanged);
# the source table renamed
psql_ok(q(UPDATE src SET owner = (SELECT string_agg(md5(g::text || random()::text), '') FROM generate_series(1, 300) g)
  WHERE id = 1));
psql_ok('UPDATE src SET bal = 99 WHERE id = 1');
is(psql_ok("SELECT caught_up('acc')"), 't', 'caught up after a TOASTed value');
is(psql_ok(q(SELECT a.owner = s.owner AND length(a.owner) = 9600 AND a.bal = 99 FROM acc a JOIN src s USING (id)
  WHERE a.id = 1 AND a.valid_to = 'infinity')), 't',
	'an update that leaves a TOASTed value out keeps the value the key holds');
psql_ok('ALTER TABLE src RENAME TO src_renamed; UPDATE src_renamed SET bal = 100 WHERE id = 1');
is(psql_ok("SELECT caught_up('acc')"), 't', 'caught up after the source was renamed');
is(psql_ok(q(SELECT bal FROM acc WHERE id = 1 AND valid_to = 'infinity')), '100',
	'a renamed source table is still followed (by its oid)');
psql_ok('ALTER TABLE src_renamed RENAME TO src');

# logical decoding of a transaction that wrote a TOASTed value into a
# zipper table and then deleted a heap row (the zipper table's TOAST chunks
# are not decoded: they would wait for a heap change, and a delete would
# crash the decoding process)
psql_ok(q(SELECT pg_create_logical_replication_slot('td', 'test_decoding');
CREATE TABLE heap_rows (i int); INSERT INTO heap_rows VALUES (1);
CREATE TABLE toasty (id int, v text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('toasty', ARRAY['id'])));
psql_ok(q(BEGIN; INSERT INTO toasty VALUES (1, (SELECT string_agg(md5(g::text || random()::text), '')
  FROM generate_series(1, 400) g), '2020-01-01', 'infinity'); DELETE FROM heap_rows; COMMIT));
like(psql_ok(q(SELECT string_agg(data, ' ') FROM pg_logical_slot_get_changes('td', NULL, NULL))),
	qr/table public.heap_rows: DELETE/, 'decoding a TOASTed zipper row and a delete after it works');
psql_ok(q(SELECT pg_drop_replication_slot('td'); DROP TABLE toasty, heap_rows));

# pause and resume
psql_ok("SET ROLE writer; SELECT zipper_lake.pause('acc')");
$node->poll_query_until('postgres', 'SELECT worker_pid IS NULL FROM zipper_lake.followers')
  or die 'the worker did not stop';
psql_ok("INSERT INTO src VALUES (6, 'f', 6)");
sleep(1);
is(psql_ok('SELECT count(*) FROM acc WHERE id = 6'), '0', 'paused: nothing applied');
psql_ok("SET ROLE writer; SELECT zipper_lake.resume('acc')");
is(psql_ok("SELECT caught_up('acc')"), 't', 'resumed: caught up');
is(psql_ok('SELECT count(*) FROM acc WHERE id = 6'), '1', 'resumed: what waited in the slot is applied');

# a crash between a batch's commit and the slot's advance, made by not
# advancing: the slot then shows the transactions applied before, which
# the follower skips, and with more of them than a batch it must still
# move the slot on
psql_ok(q(ALTER SYSTEM SET zipper_lake.follow_advance_slot = off; SELECT pg_reload_conf()));
sleep(1);
psql_ok("INSERT INTO src VALUES ($_, 'k', $_)") for (900 .. 909);
is(psql_ok("SELECT caught_up('acc')"), 't', 'slot not advanced: caught up');
is(psql_ok(q(SELECT confirmed_flush_lsn < (SELECT applied_lsn FROM zipper_lake.followers) FROM pg_replication_slots)),
	't', 'the slot is behind what was applied');
psql_ok("SET ROLE writer; SELECT zipper_lake.set_follow('acc', batch_changes => 5)");
psql_ok(q(ALTER SYSTEM RESET zipper_lake.follow_advance_slot; SELECT pg_reload_conf()));
sleep(1);
psql_ok("INSERT INTO src VALUES (910, 'k', 910)");
is(psql_ok("SELECT caught_up('acc')"), 't', 'advancing again, batches of 5 messages: caught up');
is(psql_ok(q(SELECT count(*) FROM acc WHERE id BETWEEN 900 AND 910)), '11', 'each applied once');
is(psql_ok(q(SELECT confirmed_flush_lsn >= (SELECT applied_lsn FROM zipper_lake.followers) FROM pg_replication_slots)),
	't', 'the slot moved on');
psql_ok("SET ROLE writer; SELECT zipper_lake.set_follow('acc', batch_changes => 10000)");

# schema changes
psql_ok("ALTER TABLE src ADD COLUMN note text; UPDATE src SET note = 'n1' WHERE id = 6");
is(psql_ok("SELECT caught_up('acc')"), 't', 'a column added to the source alone: caught up');
psql_ok("ALTER TABLE acc ADD COLUMN note text");
psql_ok("UPDATE src SET note = 'n2' WHERE id = 6");
is(psql_ok("SELECT caught_up('acc')"), 't', 'the zipper table has the column too: caught up');
is(psql_ok(q(SELECT string_agg(COALESCE(note, '-'), ' ' ORDER BY valid_from) FROM acc WHERE id = 6)), '- n2',
	'the added column is kept once the zipper table has it');
psql_ok("ALTER TABLE src DROP COLUMN bal; UPDATE src SET owner = 'g' WHERE id = 6");
$node->poll_query_until('postgres', q(SELECT state = 'stopped' FROM zipper_lake.followers))
  or die 'the follower did not stop';
like(psql_ok('SELECT last_error FROM zipper_lake.followers'),
	qr/column "bal" of zipper table public.acc is missing from source table public.src/,
	'a zipper column dropped from the source: stopped, the error in the view');
psql_ok("SET ROLE writer; SELECT zipper_lake.set_follow('acc', missing_columns => 'keep'); SELECT zipper_lake.resume('acc')");
is(psql_ok("SELECT caught_up('acc')"), 't', 'missing_columns keep, resumed: caught up');
is(psql_ok(q(SELECT owner || bal FROM acc WHERE id = 6 AND valid_to = 'infinity')), 'g6',
	'nothing was lost; the dropped column keeps its value');
psql_ok("ALTER TABLE src ADD COLUMN bal text; UPDATE src SET bal = 'x' WHERE id = 1");
$node->poll_query_until('postgres', q(SELECT state = 'stopped' FROM zipper_lake.followers))
  or die 'the follower did not stop';
like(psql_ok('SELECT last_error FROM zipper_lake.followers'),
	qr/invalid input syntax for type numeric: "x".*change U of key \(id=1\) committed on the source at/,
	'a value the zipper column does not read: stopped, naming the key and time');
psql_ok("UPDATE src SET bal = '7' WHERE id = 1; ALTER TABLE acc ALTER COLUMN bal TYPE text");
psql_ok("SET ROLE writer; SELECT zipper_lake.resume('acc')");
is(psql_ok("SELECT caught_up('acc')"), 't', 'the zipper column changed to text, resumed: caught up');
is(psql_ok(q(SELECT string_agg(bal, ' ' ORDER BY valid_from) FROM acc WHERE id = 1)), '10 11 11 99 100 x 7',
	'then every change is applied');
is(psql_ok("SELECT count(*) FROM zipper_lake.verify('acc')"), '0', 'verify is clean');

# timestamp periods: commit times in the table's time zone
psql_ok(q(CREATE TABLE acc_ts (id int, owner text, note text, bal text, valid_from timestamp, valid_to timestamp)
  USING zipper_lake;
SELECT zipper_lake.register('acc_ts', ARRAY['id'], time_zone => 'Asia/Shanghai')));
psql_ok(q(SELECT zipper_lake.follow('acc_ts', 'src', publication => 'pub', batch_interval => '50 ms')));
psql_ok("UPDATE src SET owner = 'ts' WHERE id = 1");
is(psql_ok("SELECT caught_up('acc_ts')"), 't', 'timestamp periods: caught up');
is(psql_ok(q(SELECT valid_from = (SELECT applied_commit_time AT TIME ZONE 'Asia/Shanghai' FROM zipper_lake.followers
  WHERE tbl = 'acc_ts'::regclass) FROM acc_ts WHERE id = 1 AND owner = 'ts' AND valid_to = 'infinity')), 't',
	'timestamp periods: a version begins at the commit time in the table\'s time zone');
psql_ok("SELECT zipper_lake.unfollow('acc_ts')");
psql_ok('DROP TABLE acc_ts');

# the password is never shown by the view
psql_ok(q(INSERT INTO zipper_lake.follower SELECT 1, owner, source_table, source_relid, 'host=h password=hunter2', publication, 'x',
  batch_changes, batch_interval, missing_columns, 'paused', image_time, applied_lsn, applied_commit_time,
  caught_up_lsn, source_lsn, checked_at FROM zipper_lake.follower));
is(psql_ok("SELECT connection FROM zipper_lake.followers WHERE tbl = 1::regclass"),
	"password=******** host='h'", 'the view hides the password');
psql_ok("DELETE FROM zipper_lake.follower WHERE tbl = 1");
psql_fails("SET ROLE writer; SELECT connection FROM zipper_lake.follower",
	qr/permission denied for table follower/, 'the table of followers is not readable');

# one source transaction of 500,000 changes: the worker's private memory
# stays within 2 x work_mem + 64 MB (the slot's messages are read a row at
# a time, staged in a temporary table, applied by apply_changes)
$node->safe_psql('postgres', q(ALTER SYSTEM SET work_mem = '4MB'; SELECT pg_reload_conf()));
my $pid = psql_ok('SELECT worker_pid FROM zipper_lake.followers');
sub rss_anon_kb
{
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	while (my $line = <$fh>)
	{
		return $1 if $line =~ /^RssAnon:\s+(\d+)\s+kB/;
	}
	return undef;
}
my $start_kb = rss_anon_kb() // 0;
psql_ok(q(INSERT INTO src (id, owner, bal) SELECT g, 'bulk ' || g, g::text FROM generate_series(1000, 500999) g));
my $peak_kb = $start_kb;
for (my $i = 0; $i < 3000; $i++)
{
	my $kb = rss_anon_kb();
	$peak_kb = $kb if defined $kb && $kb > $peak_kb;
	last if psql_ok(q(SELECT count(*) = 500000 FROM acc WHERE id >= 1000 AND valid_to = 'infinity')) eq 't';
	usleep(100_000);
}
is(psql_ok(q(SELECT count(*) FROM acc WHERE id >= 1000 AND valid_to = 'infinity')), '500000',
	'a source transaction of 500,000 changes is applied');
ok($peak_kb < 2 * 4096 + 64 * 1024,
	"the worker's RssAnon peak $peak_kb kB (at start $start_kb kB) is within 2 x work_mem + 64 MB");
is(psql_ok('SELECT worker_pid FROM zipper_lake.followers'), $pid, 'by the same worker');

# unfollow: slot and origin dropped, history kept, batches allowed again
psql_ok("SET ROLE writer; SELECT zipper_lake.unfollow('acc')");
is(psql_ok(q(SELECT (SELECT count(*) FROM zipper_lake.followers) || ' ' || (SELECT count(*) FROM pg_replication_slots)
  || ' ' || (SELECT count(*) FROM pg_replication_origin))), '0 0 0', 'unfollow drops the slot and the origin');
is(psql_ok('SELECT count(*) > 0 FROM acc'), 't', 'unfollow keeps the history');
psql_ok("GRANT SELECT ON ch TO writer; SET ROLE writer; SELECT * FROM zipper_lake.apply_changes('acc', 'ch', missing_columns => 'null')");
pass('apply_changes works again after unfollow');

# a followed table dropped: its follower drops what it used
psql_ok(q(CREATE TABLE acc2 (id int, owner text, note text, bal text, valid_from timestamptz, valid_to timestamptz) USING zipper_lake;
SELECT zipper_lake.register('acc2', ARRAY['id'])));
psql_ok(q(SELECT zipper_lake.follow('acc2', 'src', publication => 'pub', batch_interval => '50 ms')));
psql_ok('DROP TABLE acc2');
psql_ok("UPDATE src SET owner = 'z' WHERE id = 1");
$node->poll_query_until('postgres',
	q(SELECT (SELECT count(*) FROM zipper_lake.follower) + (SELECT count(*) FROM pg_replication_slots) = 0))
  or die 'what followed the dropped table stayed';
pass('a dropped zipper table: its follower dropped its slot and row');

# an UPDATE that changes a key only in its text (numeric 2 to 2.0) keeps
# the key: one new version, not a delete and an upsert of one key at one
# instant (which the apply refuses as conflicting, stopping the follower)
psql_ok(q(CREATE TABLE src_num (id numeric PRIMARY KEY, v text);
INSERT INTO src_num VALUES (1, 'one'), (2, 'two');
CREATE PUBLICATION pub_num FOR TABLE src_num;
CREATE TABLE acc_num (id numeric, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acc_num', ARRAY['id'])));
psql_ok(q(SELECT zipper_lake.follow('acc_num', 'src_num', publication => 'pub_num', batch_interval => '50 ms')));
psql_ok(q(UPDATE src_num SET id = 2.0, v = 'changed' WHERE id = 2));
is(psql_ok(q(SELECT caught_up('acc_num'))), 't', 'a key changed only in scale: the follower keeps running');
is(psql_ok(q(SELECT string_agg(id || ' ' || v || ' ' || (valid_to = 'infinity'), ', ' ORDER BY valid_from, id)
  FROM acc_num)), '1 one true, 2 two false, 2.0 changed true', 'a key changed only in scale: a new version');
psql_ok(q(SELECT zipper_lake.unfollow('acc_num')));

# an UPDATE that changes the key and leaves a TOASTed value as it was
# (pgoutput leaves it out): the new key takes the value of the row it was,
# not one its key held before (a row deleted in the same transaction)
psql_ok(q(CREATE TABLE src_big (id int PRIMARY KEY, big text);
INSERT INTO src_big SELECT g, (SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 400) i)
  FROM generate_series(1, 4) g;
CREATE PUBLICATION pub_big FOR TABLE src_big;
CREATE TABLE acc_big (id int, big text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('acc_big', ARRAY['id'])));
psql_ok(q(SELECT zipper_lake.follow('acc_big', 'src_big', publication => 'pub_big', batch_interval => '50 ms')));
psql_ok(q(UPDATE src_big SET id = 100 WHERE id = 2;
BEGIN; DELETE FROM src_big WHERE id = 4; UPDATE src_big SET id = 4 WHERE id = 3; COMMIT;));
is(psql_ok(q(SELECT caught_up('acc_big'))), 't', 'key changes with TOASTed values: the follower keeps running');
is(psql_ok(q(SELECT count(*) FROM src_big s FULL JOIN zipper_lake.current(NULL::acc_big) a USING (id)
  WHERE md5(s.big) IS DISTINCT FROM md5(a.big))), '0',
	'key changes with TOASTed values: each new key holds its own row\'s value');
psql_ok(q(SELECT zipper_lake.unfollow('acc_big')));

# a follower in a database dropped after unfollow(): its terminated worker
# is not started again (the postmaster would, and it would fail to connect
# to the database every few seconds for ever)
$node->safe_psql('postgres', 'CREATE DATABASE gone');
$node->safe_psql('gone', q(CREATE EXTENSION zipper_lake;
CREATE TABLE s (id int PRIMARY KEY, v text);
INSERT INTO s VALUES (1, 'a');
CREATE PUBLICATION gone_pub FOR TABLE s;
CREATE TABLE h (id int, v text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('h', ARRAY['id'])));
$node->safe_psql('gone', q(SELECT zipper_lake.follow('h', 's', publication => 'gone_pub')));
$node->poll_query_until('gone', q(SELECT worker_pid IS NOT NULL FROM zipper_lake.followers))
  or die 'the follower in database gone did not start';
$node->safe_psql('gone', q(SELECT zipper_lake.unfollow('h')));
$node->safe_psql('postgres', 'DROP DATABASE gone');
my $log_at = -s $node->logfile;
sleep 8;
unlike(slurp_file($node->logfile, $log_at), qr/"zipper_lake follower" \(PID \d+\) exited/,
	'no follower worker is started again after unfollow() and DROP DATABASE');

done_testing();
