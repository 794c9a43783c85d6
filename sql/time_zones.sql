-- Partitions are local dates of valid_to in the table's time zone, and
-- pruning widens instant ranges by a day because local dates need not be
-- in the order of the instants (README, Pruning).  In Sitka, when Alaska
-- changed hands, the clocks went from 1867-10-19 15:30 (+14:58:47) back to
-- 1867-10-18 15:30 (-09:01:13): a whole day.  So partition 1867-10-18
-- holds valid_to instants on both sides of 1867-10-19 (UTC), and so does
-- partition 1867-10-19.  Every read is compared with a heap table loaded
-- from the same generator, with pruning on and off.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- the instants where Sitka's local date changes around the transition
CREATE TABLE sitka_edge (t timestamptz, what text);
INSERT INTO sitka_edge VALUES
  ('1867-10-17 09:01:13+00', 'local 10-18 00:00 (+14:58:47)'),
  ('1867-10-18 09:01:13+00', 'local 10-19 00:00 (+14:58:47)'),
  ('1867-10-19 00:31:13+00', 'transition: local 10-19 15:30 -> 10-18 15:30'),
  ('1867-10-19 09:01:13+00', 'local 10-19 00:00 (-09:01:13)'),
  ('1867-10-20 09:01:13+00', 'local 10-20 00:00 (-09:01:13)');
SELECT t, what, (t - interval '1 microsecond') AT TIME ZONE 'America/Sitka' AS local_before,
       t AT TIME ZONE 'America/Sitka' AS local_at
  FROM sitka_edge ORDER BY t;

-- Versions of 12 keys from 1867-10-16 to 1867-10-22: each key's versions
-- change every 47 minutes (shifted by key), and keys 3, 6, 9 and 12 also at
-- every edge above and a microsecond either side; every fifth span is a
-- gap; the last version is open.
CREATE FUNCTION sitka_gen() RETURNS TABLE (id int, v int, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql IMMUTABLE AS $$
  SELECT id, n % 4, t, nxt FROM (
    SELECT id, t, row_number() OVER (PARTITION BY id ORDER BY t) AS n,
           coalesce(lead(t) OVER (PARTITION BY id ORDER BY t), 'infinity') AS nxt
      FROM (SELECT k AS id, g + k * interval '4 minutes' AS t
              FROM generate_series(1, 12) k,
                   generate_series('1867-10-16 00:00+00'::timestamptz, '1867-10-22 00:00+00', '47 minutes') g
            UNION
            SELECT k, e.t + d
              FROM generate_series(3, 12, 3) k, sitka_edge e,
                   unnest(ARRAY[interval '0', interval '-1 microsecond', interval '1 microsecond']) d) times) s
   WHERE (id + n) % 5 <> 0
$$;
CREATE TABLE sitka (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('sitka', ARRAY['id'], time_zone => 'America/Sitka', max_subgroups => 2);
INSERT INTO sitka SELECT * FROM sitka_gen();
CREATE TABLE sitka_heap AS SELECT * FROM sitka_gen();
SELECT count(*) FROM zipper_lake.verify('sitka');
-- each of the two partitions holds valid_to instants from both sides of
-- the transition
SELECT p.partition_end, p.row_count,
       (SELECT count(*) FROM sitka_heap h WHERE h.valid_to < '1867-10-19 00:31:13+00'
           AND (h.valid_to AT TIME ZONE 'America/Sitka')::date = p.partition_end) AS ending_before_transition,
       (SELECT count(*) FROM sitka_heap h WHERE h.valid_to >= '1867-10-19 00:31:13+00' AND h.valid_to <> 'infinity'
           AND (h.valid_to AT TIME ZONE 'America/Sitka')::date = p.partition_end) AS ending_after_transition
  FROM (SELECT partition_end, sum(row_count) AS row_count FROM zipper_lake.inspect('sitka')
         WHERE partition_end IN ('1867-10-18', '1867-10-19') GROUP BY 1) p
 ORDER BY 1;
SELECT count(DISTINCT partition_end) AS partitions, count(*) AS sub_groups FROM zipper_lake.inspect('sitka');

-- probe times: every hour, and each edge and a microsecond either side
CREATE TABLE sitka_probe AS
  SELECT generate_series('1867-10-16 00:00+00'::timestamptz, '1867-10-22 00:00+00', '1 hour') AS t
  UNION
  SELECT e.t + d FROM sitka_edge e, unnest(ARRAY[interval '0', interval '-1 microsecond', interval '1 microsecond']) d;
SELECT count(*) AS probes FROM sitka_probe;

-- For each probe time (the constant %1$L of the queries), a query of the
-- zipper table and one of the heap must give the same count and sum of row
-- hashes, with pruning on and off.  kept_fewer: the probes whose pruned
-- scan kept fewer partitions than the table has (EXPLAIN).
CREATE FUNCTION sitka_compare(zl_query text, heap_query text,
    OUT probes bigint, OUT answer_rows bigint, OUT mismatches bigint, OUT unpruned_mismatches bigint,
    OUT kept_fewer bigint)
LANGUAGE plpgsql AS $$
DECLARE
  t timestamptz;
  zn bigint; zh bigint; un bigint; uh bigint; hn bigint; hh bigint;
  line text;
  q text;
BEGIN
  probes := 0; answer_rows := 0; mismatches := 0; unpruned_mismatches := 0; kept_fewer := 0;
  FOR t IN SELECT p.t FROM sitka_probe p ORDER BY p.t LOOP
    q := format('SELECT count(*), sum(hash_record(r)) FROM (%s) r', format(zl_query, t));
    EXECUTE q INTO zn, zh;
    PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
    EXECUTE q INTO un, uh;
    PERFORM set_config('zipper_lake.enable_pruning', 'on', true);
    EXECUTE format('SELECT count(*), sum(hash_record(r)) FROM (%s) r', format(heap_query, t)) INTO hn, hh;
    probes := probes + 1;
    answer_rows := answer_rows + zn;
    mismatches := mismatches + (zn IS DISTINCT FROM hn OR zh IS DISTINCT FROM hh)::int;
    unpruned_mismatches := unpruned_mismatches + (un IS DISTINCT FROM hn OR uh IS DISTINCT FROM hh)::int;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || format(zl_query, t) LOOP
      IF line ~ 'Partitions: \d+ of \d+' THEN
        kept_fewer := kept_fewer + ((regexp_match(line, '(\d+) of'))[1]::int <
                                    (regexp_match(line, 'of (\d+)'))[1]::int)::int;
      END IF;
    END LOOP;
  END LOOP;
END $$;

-- the helpers
SELECT * FROM sitka_compare('SELECT * FROM zipper_lake.as_of(NULL::sitka, %L)',
                            'SELECT * FROM sitka_heap WHERE valid_from <= %1$L AND valid_to > %1$L');
SELECT * FROM sitka_compare('SELECT * FROM zipper_lake.changes(NULL::sitka, %L, %1$L::timestamptz + interval ''2 hours'')',
                            'SELECT * FROM sitka_heap WHERE (valid_from >= %1$L AND valid_from < %1$L::timestamptz + interval ''2 hours'')
                                OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''2 hours'' AND valid_to <> ''infinity'')');
SELECT * FROM sitka_compare('SELECT * FROM zipper_lake.changes(NULL::sitka, %L, %1$L::timestamptz + interval ''1 day'')',
                            'SELECT * FROM sitka_heap WHERE (valid_from >= %1$L AND valid_from < %1$L::timestamptz + interval ''1 day'')
                                OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''1 day'' AND valid_to <> ''infinity'')');
-- plain SQL: each comparison on valid_to, whose dates are the partitions
SELECT op, c.*
  FROM unnest(ARRAY['<', '<=', '=', '>=', '>']) op,
       LATERAL sitka_compare(format('SELECT * FROM sitka WHERE valid_to %s %%L', op),
                             format('SELECT * FROM sitka_heap WHERE valid_to %s %%L', op)) c
 ORDER BY op;
SELECT * FROM sitka_compare('SELECT * FROM sitka WHERE valid_to BETWEEN %L AND %1$L::timestamptz + interval ''3 hours''',
                            'SELECT * FROM sitka_heap WHERE valid_to BETWEEN %L AND %1$L::timestamptz + interval ''3 hours''');
SELECT * FROM sitka_compare('SELECT * FROM sitka WHERE valid_to > %L AND valid_to < %1$L::timestamptz + interval ''1 day''',
                            'SELECT * FROM sitka_heap WHERE valid_to > %L AND valid_to < %1$L::timestamptz + interval ''1 day''');
SELECT * FROM sitka_compare('SELECT * FROM sitka WHERE valid_from <= %L AND valid_to > %1$L',
                            'SELECT * FROM sitka_heap WHERE valid_from <= %L AND valid_to > %1$L');
SELECT * FROM sitka_compare('SELECT * FROM sitka WHERE valid_from >= %L AND valid_from < %1$L::timestamptz + interval ''1 hour''',
                            'SELECT * FROM sitka_heap WHERE valid_from >= %L AND valid_from < %1$L::timestamptz + interval ''1 hour''');
SELECT * FROM sitka_compare('SELECT * FROM sitka WHERE (valid_from >= %L AND valid_from < %1$L::timestamptz + interval ''30 minutes'')
                                OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''30 minutes'')',
                            'SELECT * FROM sitka_heap WHERE (valid_from >= %L AND valid_from < %1$L::timestamptz + interval ''30 minutes'')
                                OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''30 minutes'')');
-- the instant of the transition, as the pruned scan sees it
EXPLAIN (COSTS OFF) SELECT * FROM sitka WHERE valid_to >= '1867-10-19 00:31:13+00' AND valid_to < '1867-10-19 01:00+00';
SELECT id, v, valid_from, valid_to FROM sitka
 WHERE valid_to >= '1867-10-19 00:31:13+00' AND valid_to < '1867-10-19 01:00+00' ORDER BY id, valid_from;
