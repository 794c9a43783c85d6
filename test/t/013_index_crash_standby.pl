# Indexes of a zipper table through crashes and streaming replication
# (README "Indexes", src/access/README.md "Indexes").
#
# A zipper table with a btree, a partial btree, a hash, a GiST (on
# tstzrange(valid_from, valid_to)) and a GIN index (on an array expression)
# is written by apply_changes only (INSERT, COPY and unique indexes are
# tested elsewhere).  After every step below, each query of @queries is
# answered three ways -- sequential scan (the reference: no index, no
# pruning), index scan, bitmap scan -- and the plans must be the ones named
# there; the answers are compared as text (every row, ordered by all
# columns).  Two of the queries select every row, so every row must be
# found through the GiST and the GIN index; amcheck's
# bt_index_check(index, true) must find every row in every btree, a
# look-up of every id must find every row through the hash index, and
# verify() must be clean.  The primary is stopped with 'immediate' (no shutdown
# checkpoint) and no checkpoint runs between the writes and a crash, so
# every committed index entry is restored by WAL replay; a commit just
# before each crash flushes the WAL of the transactions left open too, so
# their entries are replayed as well and must be ignored:
#
#  a. crash during CREATE INDEX: uncommitted indexes of every type, fully
#     built, next to a CREATE INDEX stopped mid-build (a function of the
#     indexed expression sleeps in that session): afterwards none exists
#     and the table reads the same.  Then a CREATE INDEX CONCURRENTLY
#     stopped mid-build: its index is left invalid and the planner ignores
#     it; after an apply, REINDEX makes it usable.
#  b. crash during an apply: committed batches (new versions, closed ones,
#     late changes into columnar history, deletes) and an uncommitted
#     apply -- after a CREATE INDEX in its transaction -- whose entries are
#     in the indexes at the crash: afterwards the index and bitmap scans
#     return the committed rows and none of the lost ones; VACUUM then
#     removes the lost entries (the hash index holds one entry per row).
#  c. crash during rewrites: committed VACUUM FULL and ALTER COLUMN ... TYPE
#     and an apply after them, then an ALTER COLUMN ... TYPE (and an apply)
#     left uncommitted; then a VACUUM FULL stopped while it rebuilds the
#     indexes of the new file: afterwards the committed column type, file
#     and rows, with indexes that answer alike.
#  d. a streaming standby, started before the extension existed, replays
#     all of it, then applies, VACUUM and a CREATE INDEX: its index and
#     bitmap scans return exactly the primary's answers.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => ['--data-checksums']);
# no checkpoint may happen on its own between writes and a crash; buffers
# enough to keep the dirty pages of the writes until the crash
$primary->append_conf('postgresql.conf', qq(
autovacuum = off
checkpoint_timeout = '1h'
max_wal_size = '1GB'
shared_buffers = '16MB'
));
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# slow_id() sleeps on id 500 in a session where zl_test.slow is on: an index
# on it is built (or rebuilt) there until the crash.  answer() gives the
# rows of ix matching a condition, ordered by all columns, scans() the scan
# nodes of that query's plan.
$primary->safe_psql('postgres', <<'SQL');
CREATE EXTENSION zipper_lake;
CREATE EXTENSION amcheck;
CREATE EXTENSION pgstattuple;
CREATE TABLE wal_flush (i int);
CREATE TABLE ix (id int, branch int, amount int, tags text,
                 valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('ix', key => ARRAY['id']);
CREATE FUNCTION slow_id(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
  IF $1 = 500 AND current_setting('zl_test.slow', true) = 'on' THEN
    PERFORM pg_sleep(180);
  END IF;
  RETURN $1;
END $$;
CREATE FUNCTION answer_sql(cond text) RETURNS text IMMUTABLE LANGUAGE sql AS $$
  SELECT 'SELECT count(*) || '':'' || coalesce(string_agg(ix::text, '';'' '
         'ORDER BY id, valid_from, valid_to, branch, amount, tags), '''') FROM ix WHERE ' || cond $$;
CREATE FUNCTION answer(cond text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r text;
BEGIN
  EXECUTE answer_sql(cond) INTO r;
  RETURN r;
END $$;
CREATE FUNCTION scans(cond text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  l text;
  r text[] := '{}';
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || answer_sql(cond) LOOP
    IF l ~ 'Scan' THEN
      r := r || regexp_replace(l, '^[ ->]*', '');
    END IF;
  END LOOP;
  RETURN array_to_string(r, ', ');
END $$;
SQL

# name, condition, index of the index scan (undef: GIN, which has no index
# scans: not asked then), index of the bitmap scan, whether it must be
# empty (rows of the batches lost in crashes), the index it waits for
# (asked only once that index is valid)
my @queries = (
	[ 'btree =', 'branch = 3', 'ix_branch', 'ix_branch' ],
	[ 'btree range', 'branch BETWEEN 7 AND 8', 'ix_branch', 'ix_branch' ],
	[ 'hash 300', 'id = 300', 'ix_id', 'ix_id' ],
	[ 'hash 1449', 'id = 1449', 'ix_id', 'ix_id' ],
	[ 'gist @>', q{tstzrange(valid_from, valid_to) @> timestamptz '2026-01-02 06:00+00'},
		'ix_period', 'ix_period' ],
	[ 'gist &&', q{tstzrange(valid_from, valid_to) && tstzrange('2026-01-03 20:00+00', '2026-01-04 04:00+00')},
		'ix_period', 'ix_period' ],
	[ 'gin gold', q{string_to_array(tags, ',') @> '{gold}'}, undef, 'ix_tags' ],
	[ 'gin gold eu', q{string_to_array(tags, ',') @> '{gold,eu}'}, undef, 'ix_tags' ],
	# every row (each has a tag k0 .. k6): each is found through the index
	[ 'gist all', q{tstzrange(valid_from, valid_to) && tstzrange(NULL, NULL)}, 'ix_period', 'ix_period' ],
	[ 'gin all', q{string_to_array(tags, ',') && '{k0,k1,k2,k3,k4,k5,k6}'}, undef, 'ix_tags' ],
	[ 'partial btree', q{valid_to <> 'infinity' AND amount BETWEEN 100 AND 300}, 'ix_closed', 'ix_closed' ],
	[ 'lost rows', 'branch = 99', 'ix_branch', 'ix_branch', 'empty' ],
	[ 'slow_id', 'slow_id(id) BETWEEN 480 AND 520', 'ix_slow', 'ix_slow', undef, 'ix_slow' ],
	[ 'tags btree', q{tags = 'k3,gold'}, 'ix_tags_eq', 'ix_tags_eq', undef, 'ix_tags_eq' ],
);
my %ready;    # indexes of the last column of @queries that are valid by now

my %mode_settings = (
	seq => 'SET enable_indexscan = off; SET enable_bitmapscan = off;',
	index => 'SET enable_seqscan = off; SET enable_bitmapscan = off;',
	bitmap => 'SET enable_seqscan = off; SET enable_indexscan = off;');

sub asked
{
	my ($mode) = @_;
	return grep { (!defined $_->[5] || $ready{ $_->[5] }) && ($mode ne 'index' || defined $_->[2]) }
	  @queries;
}

# the plan each query must have, by mode
sub expected_scan
{
	my ($mode, $q) = @_;
	return 'Seq Scan on ix' if $mode eq 'seq';
	return "Index Scan using $q->[2] on ix" if $mode eq 'index';
	return "Bitmap Heap Scan on ix, Bitmap Index Scan on $q->[3]";
}

# { name => [scan nodes, answer] } of every query asked, in one mode
sub answers
{
	my ($node, $mode) = @_;
	my @q = asked($mode);
	my $values = join(",\n", map { "($_, \$c\$$q[$_][1]\$c\$)" } 0 .. $#q);
	my $out = $node->safe_psql('postgres', qq(
SET zipper_lake.enable_pruning = off; $mode_settings{$mode}
SELECT scans(cond) || '|' || answer(cond) FROM (VALUES $values) v(i, cond) ORDER BY i));
	my @lines = split /\n/, $out;
	die "expected " . scalar(@q) . " answers, got " . scalar(@lines) unless @lines == @q;
	my %a;
	for my $i (0 .. $#q)
	{
		my ($scan, $answer) = split /\|/, $lines[$i], 2;
		$a{ $q[$i][0] } = [ $scan, $answer ];
	}
	return \%a;
}

# is() of two sets of answers, naming the queries that differ and, for
# each, a few rows found by one side only
sub same_answers
{
	my ($got, $want, $name) = @_;
	my @differ = grep { !exists $want->{$_} || $got->{$_}[1] ne $want->{$_}[1] } sort keys %$got;
	is(join(', ', @differ), '', $name) and return;
	for my $q (@differ)
	{
		next unless exists $want->{$q};
		my ($gn, $gr) = split /:/, $got->{$q}[1], 2;
		my ($wn, $wr) = split /:/, $want->{$q}[1], 2;
		my @g = split /;/, $gr;
		my @w = split /;/, $wr;
		my %g = map { $_ => 1 } @g;
		my %w = map { $_ => 1 } @w;
		my @extra = grep { !$w{$_} } @g;
		my @missing = grep { !$g{$_} } @w;
		diag("$q: $gn rows instead of $wn; extra: @extra[0 .. ($#extra < 4 ? $#extra : 4)]; "
			  . "missing: @missing[0 .. ($#missing < 4 ? $#missing : 4)]");
	}
	return;
}

# the btree indexes of ix that must be there and valid
sub btrees
{
	return join(',', sort(('ix_branch', 'ix_closed'), grep { $ready{$_} } ('ix_slow', 'ix_tags_eq')));
}

# Every query by the three paths, the plans, amcheck of every btree,
# verify().  With $reference (sequential answers from before), the
# sequential answers must equal it.  Returns the sequential answers.
sub check_paths
{
	my ($node, $label, $reference) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %a = map { $_ => answers($node, $_) } qw(seq index bitmap);
	for my $mode (qw(seq index bitmap))
	{
		is(join("\n", map { "$_->[0]: $a{$mode}{$_->[0]}[0]" } asked($mode)),
			join("\n", map { "$_->[0]: " . expected_scan($mode, $_) } asked($mode)),
			"$label: $mode plans");
	}
	is(join(', ', map { $_->[0] } grep { defined $_->[4] xor $a{seq}{ $_->[0] }[1] =~ /^0:/ } asked('seq')),
		'', "$label: every query has rows, but that of the lost rows");
	same_answers($a{seq}, $reference, "$label: sequential answers as before") if $reference;
	same_answers($a{index}, $a{seq}, "$label: index scans return what the sequential scan returns");
	same_answers($a{bitmap}, $a{seq}, "$label: bitmap scans return what the sequential scan returns");
	my ($ret, $out, $err) = $node->psql('postgres', q{
SELECT string_agg(relname, ',' ORDER BY relname)
  FROM (SELECT c.relname, bt_index_check(c.oid, true)
          FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
         WHERE i.indrelid = 'ix'::regclass AND a.amname = 'btree' AND i.indisvalid) x});
	is("$ret|$out|$err", '0|' . btrees() . '|', "$label: bt_index_check(heapallindexed) of every btree is clean");
	# the same for the hash index: every row is found by its id (1 .. 1600)
	my $by_id = q{SELECT count(*) FROM generate_series(1, 1600) g, LATERAL (SELECT 1 FROM ix WHERE id = g) x};
	my $settings = 'SET enable_seqscan = off; SET enable_bitmapscan = off; SET zipper_lake.enable_pruning = off;';
	like($node->safe_psql('postgres', "$settings EXPLAIN (COSTS OFF) $by_id"), qr/Index Scan using ix_id on ix/,
		"$label: a look-up of every id scans the hash index");
	is($node->safe_psql('postgres', "$settings SELECT ($by_id) - (SELECT count(*) FROM ix)"), '0',
		"$label: the hash index finds every row");
	is($node->safe_psql('postgres', q{SELECT * FROM zipper_lake.verify('ix')}), '',
		"$label: verify() is clean");
	return $a{seq};
}

my $indexes_sql = q{
SELECT string_agg(c.relname || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END, ', ' ORDER BY c.relname)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'ix'::regclass};
my $content_sql = q{
SET zipper_lake.enable_pruning = off;
SELECT count(*) || ' ' || md5(string_agg(ix::text, ';' ORDER BY id, valid_from, valid_to, branch, amount, tags))
  FROM ix};
# entries of the hash index less rows of the table (0 once VACUUM has
# removed the entries of rows no snapshot sees)
my $hash_extra_sql = q{
SELECT (SELECT live_items FROM pgstathashindex('ix_id')) - (SELECT count(*) FROM ix)};
# where recovery would start
my $redo_sql = q{SELECT redo_lsn FROM pg_control_checkpoint()};

# A batch of changes (id, branch, amount, tags, change_time, op) in a table
# of its own, committed, to be applied now or in an open transaction.
my $nbatch = 0;

sub changes_table
{
	my ($select) = @_;
	my $name = 'ch_' . ++$nbatch;
	$primary->safe_psql('postgres', "CREATE TABLE $name AS $select");
	return $name;
}
sub apply_sql { return "SELECT changes FROM zipper_lake.apply_changes('ix', '$_[0]')"; }

sub apply
{
	my ($select, $what) = @_;
	my $n = $primary->safe_psql('postgres', apply_sql(changes_table($select)));
	cmp_ok($n, '>', 0, "apply: $what");
	return;
}

my $tags = q{concat_ws(',', 'k' || g % 7, CASE WHEN g % 3 = 0 THEN 'gold' END, CASE WHEN g % 4 = 0 THEN 'eu' END)};

# A commit that wrote WAL first flushes all WAL written so far, that of the
# open transactions too (the tail of theirs would be lost otherwise):
# recovery replays all they did.
sub crash
{
	my @sessions = @_;
	$primary->safe_psql('postgres', 'INSERT INTO wal_flush VALUES (1)');
	$primary->stop('immediate');
	eval { $_->quit } for @sessions;    # their server is gone
	$primary->start;
	return;
}

# wait until a session sleeps in slow_id() while running $command
sub wait_for_sleep
{
	my ($command) = @_;
	$primary->poll_query_until('postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '$command%'})
	  or die "$command did not reach slow_id()";
	return;
}

# --- history written, indexes created, more written --------------------------
apply(qq{SELECT g AS id, g % 20 AS branch, g % 997 AS amount, $tags AS tags,
       timestamptz '2026-01-01 00:00+00' + (g % 24) * interval '1 hour' AS change_time, NULL::text AS op
  FROM generate_series(1, 1500) g}, 'first versions of 1500 keys');
$primary->safe_psql('postgres', q{
CREATE INDEX ix_branch ON ix (branch);
CREATE INDEX ix_id ON ix USING hash (id);
CREATE INDEX ix_period ON ix USING gist (tstzrange(valid_from, valid_to));
CREATE INDEX ix_tags ON ix USING gin (string_to_array(tags, ','));
CREATE INDEX ix_closed ON ix (amount) WHERE valid_to <> 'infinity';
});
apply(qq{SELECT g AS id, (g + 1) % 20 AS branch, g % 997 + 1 AS amount, $tags AS tags,
       timestamptz '2026-01-02 00:00+00' + (g % 24) * interval '1 hour' AS change_time, NULL::text AS op
  FROM generate_series(3, 1500, 3) g}, 'a third of the keys change on 01-02');
is($primary->safe_psql('postgres', $indexes_sql), 'ix_branch, ix_closed, ix_id, ix_period, ix_tags',
	'five indexes');
is($primary->safe_psql('postgres', q{
SELECT string_agg(DISTINCT format, ',') FROM zipper_lake.inspect('ix') WHERE partition_end <> 'infinity'}),
	'columnar', 'closed versions are columnar history');
my $ref = check_paths($primary, 'before any crash');
my $content = $primary->safe_psql('postgres', $content_sql);
like($content, qr/^2000 /, '1500 open versions and 500 closed ones');

# --- a. crash during CREATE INDEX ---------------------------------------------
# an open transaction with an index of each type, built; a CREATE INDEX in
# the middle of its build (both hold ShareLock, which do not conflict)
my $bg_tx = $primary->background_psql('postgres', on_error_stop => 1);
$bg_tx->query_safe(q{BEGIN});
$bg_tx->query_safe(q{CREATE INDEX ix_tx_btree ON ix (amount, branch)});
$bg_tx->query_safe(q{CREATE INDEX ix_tx_hash ON ix USING hash (branch)});
$bg_tx->query_safe(q{CREATE INDEX ix_tx_gist ON ix USING gist (tstzrange(valid_from, valid_to, '[]'))});
$bg_tx->query_safe(q{CREATE INDEX ix_tx_gin ON ix USING gin ((ARRAY[branch, amount]))});
is($bg_tx->query_safe(q{SELECT count(*) FROM pg_class WHERE relname LIKE 'ix\_tx\_%'}), '4',
	'a: the open transaction has built four indexes');
my $bg_build = $primary->background_psql('postgres', on_error_stop => 0);
$bg_build->query_until(qr/started/, q{
SET zl_test.slow = on;
\echo started
CREATE INDEX ix_slow ON ix (slow_id(id));
});
wait_for_sleep('CREATE INDEX ix_slow');
is($primary->safe_psql('postgres', q{SELECT command || ': ' || phase FROM pg_stat_progress_create_index}),
	'CREATE INDEX: building index: scanning table', 'a: CREATE INDEX is building at the crash');
crash($bg_tx, $bg_build);

is($primary->safe_psql('postgres', $indexes_sql), 'ix_branch, ix_closed, ix_id, ix_period, ix_tags',
	'a: after the crash, no index of the open transaction nor the interrupted build');
is($primary->safe_psql('postgres', $content_sql), $content, 'a: the table reads the same');
check_paths($primary, 'a: after a crash during CREATE INDEX', $ref);

# CREATE INDEX CONCURRENTLY stopped in its build: the index stays, invalid
$bg_build = $primary->background_psql('postgres', on_error_stop => 0);
$bg_build->query_until(qr/started/, q{
SET zl_test.slow = on;
\echo started
CREATE INDEX CONCURRENTLY ix_slow ON ix (slow_id(id));
});
wait_for_sleep('CREATE INDEX CONCURRENTLY ix_slow');
is($primary->safe_psql('postgres', q{SELECT command || ': ' || phase FROM pg_stat_progress_create_index}),
	'CREATE INDEX CONCURRENTLY: building index: scanning table',
	'a: CREATE INDEX CONCURRENTLY is building at the crash');
crash($bg_build);

is($primary->safe_psql('postgres', $indexes_sql),
	'ix_branch, ix_closed, ix_id, ix_period, ix_slow (invalid), ix_tags',
	'a: after the crash, the concurrent build left its index invalid');
is($primary->safe_psql('postgres', $content_sql), $content, 'a: the table reads the same');
check_paths($primary, 'a: after a crash during CREATE INDEX CONCURRENTLY', $ref);
is($primary->safe_psql('postgres', q{SET enable_seqscan = off; SET zipper_lake.enable_pruning = off;
SELECT scans('slow_id(id) = 500')}), 'Seq Scan on ix', 'a: the planner does not use the invalid index');
# a write while the index is invalid (and not ready: writes skip it), then REINDEX
apply(qq{SELECT g AS id, (g + 2) % 20 AS branch, g % 997 + 2 AS amount, $tags AS tags,
       timestamptz '2026-01-03 00:00+00' + (g % 24) * interval '1 hour' AS change_time, NULL::text AS op
  FROM generate_series(5, 1500, 5) g}, 'a fifth of the keys change on 01-03');
$primary->safe_psql('postgres', 'REINDEX INDEX ix_slow');
$ready{ix_slow} = 1;
is($primary->safe_psql('postgres', $indexes_sql),
	'ix_branch, ix_closed, ix_id, ix_period, ix_slow, ix_tags', 'a: REINDEX made the index valid');
$ref = check_paths($primary, 'a: after REINDEX of the invalid index');

# --- b. crash during an apply -------------------------------------------------
my $redo = $primary->safe_psql('postgres', $redo_sql);
# committed, with no checkpoint before the crash: late changes (into
# columnar history and before first versions), deletes, new keys
apply(qq{SELECT g AS id, 40 + g % 3 AS branch, 500 + g % 97 AS amount, 'late,' || $tags AS tags,
       timestamptz '2026-01-01 12:00+00' + (g % 10) * interval '1 minute' AS change_time, NULL::text AS op
  FROM generate_series(7, 1500, 7) g}, 'b: late changes');
apply(qq{SELECT g AS id, NULL::int AS branch, NULL::int AS amount, NULL::text AS tags,
       timestamptz '2026-01-04 00:00+00' AS change_time, 'D' AS op FROM generate_series(1401, 1450) g
UNION ALL
SELECT g, g % 20, g % 997, $tags, timestamptz '2026-01-04 00:00+00' + (g % 24) * interval '1 hour', NULL
  FROM generate_series(1501, 1600) g}, 'b: deletes and new keys');
is($primary->safe_psql('postgres', q{SELECT count(*) FROM zipper_lake.inspect('ix') WHERE masked_rows > 0
   AND format = 'columnar' AND partition_end <> 'infinity'}) > 0, 1,
	'b: the late changes masked rows of columnar history');
$ref = check_paths($primary, 'b: before the crash');
$content = $primary->safe_psql('postgres', $content_sql);

# uncommitted: an index created in the transaction, then an apply whose
# rows (branch 99) every index takes in, and masks of the rows it replaces
my $lost = changes_table(qq{SELECT g AS id, 99 AS branch, g % 997 AS amount, 'lost,gold,eu' AS tags,
       timestamptz '2026-01-05 00:00+00' AS change_time, NULL::text AS op FROM generate_series(1, 1600, 2) g
UNION ALL
SELECT g, 99, 7, 'lost', timestamptz '2026-01-01 18:00+00', NULL FROM generate_series(11, 1600, 22) g});
my $extra_before = $primary->safe_psql('postgres', $hash_extra_sql);
$bg_tx = $primary->background_psql('postgres', on_error_stop => 1);
$bg_tx->query_safe(q{BEGIN});
$bg_tx->query_safe(q{CREATE INDEX ix_lost ON ix (tags)});
is($bg_tx->query_safe(apply_sql($lost)), '873', 'b: the open transaction applies its batch');
is($bg_tx->query_safe(q{SELECT count(*) FROM ix WHERE branch = 99}), '873',
	'b: the open transaction sees its rows');
my $extra_during = $primary->safe_psql('postgres', $hash_extra_sql);
cmp_ok($extra_during, '>=', $extra_before + 873,
	'b: the open transaction has entered its rows into the hash index');
is($primary->safe_psql('postgres', $redo_sql), $redo, 'b: no checkpoint since the committed batches');
crash($bg_tx);

is($primary->safe_psql('postgres', $indexes_sql),
	'ix_branch, ix_closed, ix_id, ix_period, ix_slow, ix_tags', 'b: after the crash, no index ix_lost');
is($primary->safe_psql('postgres', $content_sql), $content, 'b: after the crash, the committed rows');
is($primary->safe_psql('postgres', $hash_extra_sql), $extra_during,
	'b: after the crash, the hash index still holds the entries of the lost rows');
check_paths($primary, 'b: after a crash during an apply', $ref);
$primary->safe_psql('postgres', 'VACUUM ix');
is($primary->safe_psql('postgres', $hash_extra_sql), '0',
	'b: VACUUM removed the entries of the lost rows and of the replaced ones');
check_paths($primary, 'b: after VACUUM', $ref);

# --- c. crash during rewrites -------------------------------------------------
$redo = $primary->safe_psql('postgres', $redo_sql);
# committed: VACUUM FULL, a column retyped, an apply into the new files
$primary->safe_psql('postgres', 'VACUUM FULL ix');
$primary->safe_psql('postgres', 'ALTER TABLE ix ALTER COLUMN amount TYPE bigint');
is($primary->safe_psql('postgres', $content_sql), $content, 'c: VACUUM FULL and ALTER TYPE keep the rows');
apply(qq{SELECT g AS id, (g + 3) % 20 AS branch, g % 997 + 3 AS amount, $tags AS tags,
       timestamptz '2026-01-05 00:00+00' + (g % 24) * interval '1 hour' AS change_time, NULL::text AS op
  FROM generate_series(1, 1600, 4) g}, 'c: a quarter of the keys change on 01-05, after the rewrites');
$ref = check_paths($primary, 'c: before the crash');
$content = $primary->safe_psql('postgres', $content_sql);

# uncommitted: the column retyped again, and an apply
$lost = changes_table(qq{SELECT g AS id, 99 AS branch, 0.5 + g AS amount, 'lost' AS tags,
       timestamptz '2026-01-06 00:00+00' AS change_time, NULL::text AS op FROM generate_series(1, 1600, 3) g});
$bg_tx = $primary->background_psql('postgres', on_error_stop => 1);
$bg_tx->query_safe(q{SET client_min_messages = warning});
$bg_tx->query_safe(q{BEGIN});
$bg_tx->query_safe(q{ALTER TABLE ix ALTER COLUMN amount TYPE numeric});
is($bg_tx->query_safe(apply_sql($lost)), '534', 'c: the open transaction applies its batch');
is($bg_tx->query_safe(q{SELECT count(*) FROM ix WHERE amount <> trunc(amount)}),
	$bg_tx->query_safe(q{SELECT count(*) FROM ix WHERE branch = 99}),
	'c: the open transaction sees its rows with the retyped column');
is($primary->safe_psql('postgres', $redo_sql), $redo, 'c: no checkpoint since the committed rewrites');
crash($bg_tx);

is($primary->safe_psql('postgres', q{SELECT format_type(atttypid, atttypmod) FROM pg_attribute
   WHERE attrelid = 'ix'::regclass AND attname = 'amount'}), 'bigint',
	'c: after the crash, the committed column type');
is($primary->safe_psql('postgres', $content_sql), $content, 'c: after the crash, the committed rows');
check_paths($primary, 'c: after a crash during ALTER TYPE', $ref);

# VACUUM FULL stopped while it rebuilds the indexes of the new file
my $filenode = $primary->safe_psql('postgres', q{SELECT pg_relation_filenode('ix')});
$bg_build = $primary->background_psql('postgres', on_error_stop => 0);
$bg_build->query_until(qr/started/, q{
SET zl_test.slow = on;
\echo started
VACUUM FULL ix;
});
wait_for_sleep('VACUUM FULL ix');
is($primary->safe_psql('postgres', q{SELECT command || ': ' || phase FROM pg_stat_progress_cluster}),
	'VACUUM FULL: rebuilding index', 'c: VACUUM FULL is rebuilding the indexes at the crash');
crash($bg_build);

is($primary->safe_psql('postgres', q{SELECT pg_relation_filenode('ix')}), $filenode,
	'c: after the crash, the table keeps its file');
is($primary->safe_psql('postgres', $content_sql), $content, 'c: after the crash, the same rows');
check_paths($primary, 'c: after a crash during VACUUM FULL', $ref);

# --- d. the standby -----------------------------------------------------------
apply(qq{SELECT g AS id, (g + 4) % 20 AS branch, g % 997 + 4 AS amount, $tags AS tags,
       timestamptz '2026-01-06 00:00+00' + (g % 24) * interval '1 hour' AS change_time, NULL::text AS op
  FROM generate_series(2, 1600, 6) g}, 'd: a sixth of the keys change on 01-06');
$primary->safe_psql('postgres', 'VACUUM ix');
is($primary->safe_psql('postgres', $hash_extra_sql), '0', 'd: VACUUM removed the entries of replaced rows');
$primary->safe_psql('postgres', q{CREATE INDEX ix_tags_eq ON ix (tags)});
$ready{ix_tags_eq} = 1;
apply(qq{SELECT g AS id, 3 AS branch, g % 997 + 5 AS amount, 'k3,gold' AS tags,
       timestamptz '2026-01-07 00:00+00' AS change_time, NULL::text AS op
  FROM generate_series(4, 1600, 9) g}, 'd: a ninth of the keys change on 01-07');
my $primary_answers = check_paths($primary, 'd: primary');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $indexes_sql), $primary->safe_psql('postgres', $indexes_sql),
	'd: the standby has the same indexes');
is($standby->safe_psql('postgres', $content_sql), $primary->safe_psql('postgres', $content_sql),
	'd: the standby has the same rows');
check_paths($standby, 'd: standby', $primary_answers);

$standby->stop;
$primary->stop;
done_testing();
