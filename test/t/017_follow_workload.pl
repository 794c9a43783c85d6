# A zipper table following a live source on another server (README
# "Following a live source", src/follow): a write workload of inserts,
# updates, no-op updates, deletes, transactions changing one key several
# times and a TRUNCATE runs on 10,000 keys of the source for 30 s; an audit
# trigger there records every change, and the history is rebuilt from it
# with the source's own commit timestamps (track_commit_timestamp) as the
# reference.  After the follower catches up the zipper table equals the
# reference, and it counts exactly the source transactions and changes
# there were (a transaction applied twice would count twice).  Then, each
# with more workload: the history server killed (kill -9) in the middle of
# batches, the source restarted, the source stopped for a while (the
# followers view shows the connection error, and the follower resumes by
# itself): after each, the same equalities.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $seconds = $ENV{ZL_FOLLOW_WORKLOAD_SECONDS} || 30;

my $src = PostgreSQL::Test::Cluster->new('source');
$src->init(allows_streaming => 'logical');
$src->append_conf('postgresql.conf', "track_commit_timestamp = on\n");
$src->start;
$src->safe_psql('postgres', q(
CREATE TABLE account (id int PRIMARY KEY, owner text, bal int);
CREATE TABLE audit (ord bigserial PRIMARY KEY, op char, id int, owner text, bal int);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO audit (op, id) VALUES ('D', OLD.id);
  ELSIF TG_OP = 'TRUNCATE' THEN
    INSERT INTO audit (op) VALUES ('T');
  ELSE
    INSERT INTO audit (op, id, owner, bal) VALUES (left(TG_OP, 1), NEW.id, NEW.owner, NEW.bal);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER audit_row AFTER INSERT OR UPDATE OR DELETE ON account FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit_truncate AFTER TRUNCATE ON account FOR EACH STATEMENT EXECUTE FUNCTION audit_row();
CREATE PUBLICATION account_pub FOR TABLE account;
-- the history the audit says: at each commit time the last change of a key
-- counts; a truncate deletes every key; equal neighbours are one version
CREATE VIEW reference AS
WITH ev AS (
  SELECT a.id, pg_xact_commit_timestamp(a.xmin) AS ts, a.ord, a.op, a.owner, a.bal
    FROM audit a WHERE a.op <> 'T'
  UNION ALL
  SELECT k.id, pg_xact_commit_timestamp(a.xmin), a.ord, 'D', NULL, NULL
    FROM audit a CROSS JOIN (SELECT DISTINCT id FROM audit WHERE id IS NOT NULL) k WHERE a.op = 'T'
), last AS (
  SELECT DISTINCT ON (id, ts) id, ts, op <> 'D' AS present, owner, bal FROM ev ORDER BY id, ts, ord DESC
), states AS (
  SELECT *, COALESCE(lag(present) OVER w, false) AS prev_present,
         lag(owner) OVER w AS prev_owner, lag(bal) OVER w AS prev_bal
    FROM last WINDOW w AS (PARTITION BY id ORDER BY ts)
), changes AS (
  SELECT * FROM states
   WHERE present IS DISTINCT FROM prev_present
      OR (present AND (owner IS DISTINCT FROM prev_owner OR bal IS DISTINCT FROM prev_bal))
), versions AS (
  SELECT id, owner, bal, present, ts AS valid_from,
         COALESCE(lead(ts) OVER (PARTITION BY id ORDER BY ts), 'infinity') AS valid_to
    FROM changes
)
SELECT id, owner, bal, valid_from, valid_to FROM versions WHERE present;
));

my $hist = PostgreSQL::Test::Cluster->new('history');
$hist->init;
$hist->append_conf('postgresql.conf', "shared_preload_libraries = 'zipper_lake'\n");
$hist->start;
my $conn = 'host=' . $src->host . ' port=' . $src->port . ' dbname=postgres';
$hist->safe_psql('postgres', qq(
CREATE EXTENSION zipper_lake;
CREATE TABLE account (id int, owner text, bal int, valid_from timestamptz, valid_to timestamptz)
  USING zipper_lake;
SELECT zipper_lake.register('account', ARRAY['id']);
SELECT image_rows FROM zipper_lake.follow('account', 'account', '$conn', 'account_pub',
                                          batch_interval => '100 ms');
));

# the workload: 2 clients, random keys, every kind of change
my $script = q(
\set id random(1, 10000)
\set r random(1, 100)
\if :r <= 40
INSERT INTO account VALUES (:id, 'o' || :r, :r) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, bal = excluded.bal;
\elif :r <= 60
UPDATE account SET bal = bal + 1 WHERE id = :id;
\elif :r <= 75
UPDATE account SET bal = bal WHERE id = :id;
\elif :r <= 90
DELETE FROM account WHERE id = :id;
\else
BEGIN;
INSERT INTO account VALUES (:id, 'm', 0) ON CONFLICT (id) DO UPDATE SET bal = account.bal + 1;
UPDATE account SET owner = 'multi' WHERE id = :id;
DELETE FROM account WHERE id = :id;
INSERT INTO account VALUES (:id, 'again', :r);
COMMIT;
\endif
);
my $script_file = $src->basedir . '/workload.sql';
PostgreSQL::Test::Utils::append_to_file($script_file, $script);

sub start_workload
{
	my ($secs) = @_;
	return IPC::Run::start(
		[ 'pgbench', '-n', '-c', '2', '-T', $secs, '-f', $script_file, '-h', $src->host, '-p', $src->port,
		  'postgres' ],
		'>', \my $out, '2>', \my $err);
}

sub reference_text
{
	return $src->safe_psql('postgres',
		"SET TIME ZONE 'UTC'; SELECT id, owner, bal, valid_from, valid_to FROM reference ORDER BY id, valid_from");
}

# wait until the history equals the reference, and the counts the audit's
sub check_equal
{
	my ($what) = @_;
	my $reference = reference_text();
	my $counts = $src->safe_psql('postgres',
		"SELECT count(DISTINCT xmin::text) || '|' || count(*) FROM audit");
	my $history = '';
	for (my $i = 0; $i < 600; $i++)
	{
		$history = $hist->safe_psql('postgres',
			"SET TIME ZONE 'UTC'; SELECT id, owner, bal, valid_from, valid_to FROM account ORDER BY id, valid_from");
		last if $history eq $reference;
		usleep(500_000);
	}
	ok($history eq $reference, "$what: the zipper table equals the history rebuilt from the audit")
	  or diag(substr($history, 0, 2000) . "\n---- reference\n" . substr($reference, 0, 2000));
	is($hist->safe_psql('postgres',
			"SELECT transactions_applied || '|' || changes_applied FROM zipper_lake.followers"),
		$counts, "$what: each source transaction and change applied exactly once");
	is($hist->safe_psql('postgres', "SELECT count(*) FROM zipper_lake.verify('account')"), '0',
		"$what: verify is clean");
}

# 1. the workload, with a TRUNCATE half way
my $workload = start_workload($seconds);
sleep($seconds / 2);
$src->safe_psql('postgres', 'TRUNCATE account');
$workload->finish;
ok($src->safe_psql('postgres', "SELECT count(*) > 1000 FROM audit"), 'the workload changed the source');
check_equal('after the workload');

# 2. the history server killed in the middle of batches
$workload = start_workload(10);
sleep(3);
$hist->kill9;
sleep(2);
$hist->start;
$workload->finish;
check_equal('after kill -9 of the history server');

# 3. the source restarted while the workload runs
$workload = start_workload(10);
sleep(3);
$workload->finish;
$src->restart;
$workload = start_workload(3);
$workload->finish;
check_equal('after a restart of the source');

# 4. the source stopped for a while: the follower shows why and resumes
$src->stop;
$hist->poll_query_until('postgres',
	"SELECT last_error IS NOT NULL AND state = 'running' FROM zipper_lake.followers")
  or die 'the follower did not show the source down';
pass('while the source is down, the followers view shows the error and the follower keeps running');
$src->start;
$workload = start_workload(5);
$workload->finish;
check_equal('after the source was stopped for a while');
is($hist->safe_psql('postgres', 'SELECT last_error IS NULL FROM zipper_lake.followers'), 't',
	'the error is cleared once batches apply again');

done_testing();
