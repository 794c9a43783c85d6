-- Pruned reads against an independent reference: a history is generated
-- as versions; the heap table ref_heap is loaded with them directly, and
-- the zipper table ref_zl is built from the changes that make them, applied
-- day by day with some of them late.  Every predicate shape (README,
-- Pruning) is then compared with the heap, with non-empty answers.
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- Per key, events at strictly increasing times (every 5 to 17 hours, some
-- exactly at midnight, some a microsecond before): an upsert of value v, or
-- a delete.  Neighbouring events never repeat a value and deletes never
-- follow deletes, so every upsert begins a version of its own.  Some
-- upserts (see late) arrive two days late, each between two upserts that
-- arrive in time, so that they split the version they fall into.
CREATE FUNCTION ref_events() RETURNS TABLE (id int, j int, t timestamptz, is_delete boolean, v int, late boolean)
LANGUAGE sql IMMUTABLE AS $$
  SELECT k, j,
         '2026-04-01 00:00+00'::timestamptz + (j * 11 + k * j % 7) * interval '1 hour'
           - CASE WHEN (k + j) % 9 = 0 THEN interval '1 microsecond' ELSE interval '0' END,
         j > 0 AND (k * 7 + j) % 5 = 0,
         (k + j) % 3,
         k % 2 = 0 AND j % 6 = 3 AND (k * 7 + j) % 5 NOT IN (0, 1)
    FROM generate_series(1, 24) k, generate_series(0, 30 + k % 10) j
$$;
-- the versions: an upsert lasts until the key's next event
CREATE FUNCTION ref_versions() RETURNS TABLE (id int, v int, valid_from timestamptz, valid_to timestamptz)
LANGUAGE sql IMMUTABLE AS $$
  SELECT id, v, t, nxt FROM (
    SELECT id, v, t, is_delete, coalesce(lead(t) OVER (PARTITION BY id ORDER BY j), 'infinity') AS nxt
      FROM ref_events()) e
   WHERE NOT is_delete
$$;
SELECT count(*) AS events, count(*) FILTER (WHERE is_delete) AS deletes, count(*) FILTER (WHERE late) AS late,
       count(*) FILTER (WHERE t = date_trunc('day', t)) AS at_midnight,
       count(*) FILTER (WHERE t = date_trunc('day', t) + interval '1 day - 1 microsecond') AS just_before_midnight
  FROM ref_events();

CREATE TABLE ref_heap AS SELECT * FROM ref_versions();
CREATE TABLE ref_zl (id int, v int, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ref_zl', ARRAY['id'], max_subgroups => 3);
CREATE TABLE ref_changes (id int, v int, change_time timestamptz, op text);
DO $$
DECLARE
  day date;
BEGIN
  FOR day IN SELECT generate_series('2026-03-31'::date, '2026-04-24', '1 day') LOOP
    TRUNCATE ref_changes;
    INSERT INTO ref_changes
      SELECT id, v, t, CASE WHEN is_delete THEN 'D' ELSE 'U' END FROM ref_events()
       WHERE (t AT TIME ZONE 'UTC')::date + CASE WHEN late THEN 2 ELSE 0 END = day;
    PERFORM zipper_lake.apply_changes('ref_zl', 'ref_changes');
  END LOOP;
END $$;
-- the apply gives exactly the generated versions
SELECT (SELECT count(*) FROM ref_heap) AS versions,
       (SELECT count(*) FROM ((TABLE ref_zl EXCEPT ALL TABLE ref_heap) UNION ALL
                              (TABLE ref_heap EXCEPT ALL TABLE ref_zl)) d) AS differences;
SELECT count(*) FROM zipper_lake.verify('ref_zl');
SELECT count(DISTINCT partition_end) AS partitions, count(DISTINCT file_group) AS file_groups,
       count(*) AS sub_groups, sum(masked_rows) > 0 AS has_masks
  FROM zipper_lake.inspect('ref_zl');

-- probe times: every midnight of the history (partition edges) and every
-- twelfth event time, each also a microsecond before and after
CREATE TABLE ref_probe AS
  SELECT DISTINCT t + d AS t
    FROM (SELECT generate_series('2026-03-31 00:00+00'::timestamptz, '2026-04-24 00:00+00', '1 day') AS t
          UNION ALL
          SELECT t FROM ref_events() WHERE (id + j) % 12 = 0) x,
         unnest(ARRAY[interval '0', interval '-1 microsecond', interval '1 microsecond']) d;
SELECT count(*) AS probes FROM ref_probe;

-- For each probe p (an outer reference of a lateral subquery: the bounds
-- are parameters, new at every rescan), the zipper side zl_from and the
-- heap side heap_from (by default zl_from on ref_heap) must give the same
-- count and the same sum of row hashes.  zipper_scan: the zipper side
-- became a ZipperScan with bounds (a time from the outer query keeps the
-- read helpers in their function form, which prunes too).
CREATE FUNCTION ref_compare(probe_query text, zl_from text, heap_from text DEFAULT NULL,
    OUT probes bigint, OUT answer_rows bigint, OUT empty_answers bigint,
    OUT mismatches bigint, OUT zipper_scan boolean)
LANGUAGE plpgsql AS $$
DECLARE
  q text := 'SELECT p.*, a.* FROM (%s) p, LATERAL (SELECT count(*) AS n, sum(hash_record(r)) AS h FROM %s) a';
  zq text := format(q, probe_query, zl_from);
  hq text := format(q, probe_query, coalesce(heap_from, replace(zl_from, 'ref_zl', 'ref_heap')));
  diff text := 'SELECT count(*) FROM ((TABLE z EXCEPT ALL TABLE h) UNION ALL (TABLE h EXCEPT ALL TABLE z)) d';
  line text;
BEGIN
  zipper_scan := false;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || zq LOOP
    zipper_scan := zipper_scan OR line LIKE '%Zipper Bounds:%';
  END LOOP;
  EXECUTE format('WITH z AS MATERIALIZED (%s), h AS MATERIALIZED (%s)
                  SELECT (SELECT count(*) FROM z), (SELECT sum(n) FROM z), (SELECT count(*) FROM z WHERE n = 0), (%s)',
                 zq, hq, diff)
    INTO probes, answer_rows, empty_answers, mismatches;
END $$;

-- the helpers
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'zipper_lake.as_of(NULL::ref_zl, p.t) r',
                          'ref_heap r WHERE r.valid_from <= p.t AND r.valid_to > p.t');
SELECT * FROM ref_compare('SELECT 1', 'zipper_lake.current(NULL::ref_zl) r',
                          'ref_heap r WHERE r.valid_to = ''infinity''');
SELECT * FROM ref_compare('SELECT t, w FROM ref_probe, unnest(ARRAY[interval ''1 microsecond'', interval ''1 day'']) w',
                          'zipper_lake.changes(NULL::ref_zl, p.t, p.t + p.w) r',
                          'ref_heap r WHERE (r.valid_from >= p.t AND r.valid_from < p.t + p.w)
                                         OR (r.valid_to >= p.t AND r.valid_to < p.t + p.w AND r.valid_to <> ''infinity'')');
-- plain SQL: each comparison on each column
SELECT op, col, c.*
  FROM unnest(ARRAY['<', '<=', '=', '>=', '>']) op, unnest(ARRAY['valid_from', 'valid_to']) col,
       LATERAL ref_compare('SELECT t FROM ref_probe', format('ref_zl r WHERE r.%I %s p.t', col, op)) c
 ORDER BY col, op;
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.valid_from <= p.t AND r.valid_to > p.t');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE p.t >= r.valid_from AND p.t < r.valid_to AND r.v <> 1');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.valid_from BETWEEN p.t AND p.t + interval ''20 hours''');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.valid_to BETWEEN p.t - interval ''1 day'' AND p.t');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.valid_from < p.t AND r.valid_to >= p.t + interval ''2 days''');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.valid_from >= p.t AND r.valid_to <= p.t + interval ''2 days''');
SELECT * FROM ref_compare('SELECT t FROM ref_probe', 'ref_zl r WHERE r.id = 7 AND r.valid_from = p.t');
-- the OR shape: versions that began or ended in a window
SELECT * FROM ref_compare('SELECT t FROM ref_probe',
                          'ref_zl r WHERE (r.valid_from >= p.t AND r.valid_from < p.t + interval ''6 hours'')
                                       OR (r.valid_to >= p.t AND r.valid_to < p.t + interval ''6 hours'')');
SELECT * FROM ref_compare('SELECT t FROM ref_probe',
                          'ref_zl r WHERE r.valid_from = p.t OR r.valid_to <= p.t - interval ''10 days''');

-- The same shapes with constants and with stable expressions in the query
-- text, run one probe at a time: the query on ref_zl (time %1$L) and on
-- ref_heap must give the same count and sum of row hashes.
CREATE FUNCTION ref_compare_text(times timestamptz[], zl_query text, heap_query text,
    OUT probes bigint, OUT answer_rows bigint, OUT empty_answers bigint, OUT mismatches bigint, OUT zipper_scan boolean)
LANGUAGE plpgsql AS $$
DECLARE
  t timestamptz;
  zn bigint; zh bigint; hn bigint; hh bigint;
  line text;
BEGIN
  probes := 0; answer_rows := 0; empty_answers := 0; mismatches := 0; zipper_scan := true;
  FOREACH t IN ARRAY times LOOP
    PERFORM set_config('ref.t', t::text, true);
    EXECUTE format('SELECT count(*), sum(hash_record(r)) FROM (%s) r', format(zl_query, t)) INTO zn, zh;
    EXECUTE format('SELECT count(*), sum(hash_record(r)) FROM (%s) r', format(heap_query, t)) INTO hn, hh;
    probes := probes + 1;
    answer_rows := answer_rows + zn;
    empty_answers := empty_answers + (zn = 0)::int;
    mismatches := mismatches + (zn IS DISTINCT FROM hn OR zh IS DISTINCT FROM hh)::int;
    line := NULL;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || format(zl_query, t) LOOP
      EXIT WHEN line LIKE '%Zipper Bounds:%';
    END LOOP;
    zipper_scan := zipper_scan AND line LIKE '%Zipper Bounds:%';
  END LOOP;
END $$;
-- the midnights, and every twenty-fourth event time
CREATE TABLE ref_text_probe AS
  SELECT array_agg(t ORDER BY t) AS times
    FROM (SELECT generate_series('2026-03-31 00:00+00'::timestamptz, '2026-04-24 00:00+00', '1 day') AS t
          UNION
          SELECT t FROM ref_events() WHERE (id + j) % 24 = 0) x;
SELECT cardinality(times) AS text_probes FROM ref_text_probe;
-- constants
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM zipper_lake.as_of(NULL::ref_zl, %L)',
                           'SELECT * FROM ref_heap WHERE valid_from <= %1$L AND valid_to > %1$L') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM zipper_lake.changes(NULL::ref_zl, %1$L, %1$L::timestamptz + interval ''7 hours'')',
                           'SELECT * FROM ref_heap WHERE (valid_from >= %1$L AND valid_from < %1$L::timestamptz + interval ''7 hours'')
                              OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''7 hours'' AND valid_to <> ''infinity'')') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM ref_zl WHERE valid_to BETWEEN %1$L AND %1$L::timestamptz + interval ''1 day''',
                           'SELECT * FROM ref_heap WHERE valid_to BETWEEN %1$L AND %1$L::timestamptz + interval ''1 day''') c;
-- stable expressions: now() and a setting, evaluated when the scan starts
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM ref_zl WHERE valid_from <= now() - (now() - %1$L) AND valid_to > now() - (now() - %1$L)',
                           'SELECT * FROM ref_heap WHERE valid_from <= %1$L AND valid_to > %1$L') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM zipper_lake.as_of(NULL::ref_zl, current_setting(''ref.t'')::timestamptz)',
                           'SELECT * FROM ref_heap WHERE valid_from <= %1$L AND valid_to > %1$L') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_text(times, 'SELECT * FROM ref_zl WHERE (valid_from >= current_setting(''ref.t'')::timestamptz
                                                               AND valid_from < current_setting(''ref.t'')::timestamptz + interval ''1 day'')
                                                           OR (valid_to >= current_setting(''ref.t'')::timestamptz
                                                               AND valid_to < current_setting(''ref.t'')::timestamptz + interval ''1 day'')',
                           'SELECT * FROM ref_heap WHERE (valid_from >= %1$L AND valid_from < %1$L::timestamptz + interval ''1 day'')
                                                      OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''1 day'')') c;
EXPLAIN (COSTS OFF) SELECT * FROM ref_zl WHERE valid_from <= now() - (now() - '2026-04-05 00:00+00') AND valid_to > now() - (now() - '2026-04-05 00:00+00');
-- prepared statements with generic plans: the parameters are bounds
SET plan_cache_mode = force_generic_plan;
PREPARE ref_at(timestamptz) AS SELECT * FROM ref_zl WHERE valid_from <= $1 AND valid_to > $1;
PREPARE ref_as_of(timestamptz) AS SELECT * FROM zipper_lake.as_of(NULL::ref_zl, $1);
PREPARE ref_changed(timestamptz, timestamptz) AS
  SELECT * FROM ref_zl WHERE (valid_from >= $1 AND valid_from < $2) OR (valid_to >= $1 AND valid_to < $2);
PREPARE ref_to_between(timestamptz, timestamptz) AS SELECT * FROM ref_zl WHERE valid_to BETWEEN $1 AND $2;
CREATE FUNCTION ref_compare_prepared(times timestamptz[], zl_execute text, heap_query text,
    OUT probes bigint, OUT answer_rows bigint, OUT empty_answers bigint, OUT mismatches bigint)
LANGUAGE plpgsql AS $$
DECLARE
  t timestamptz;
  r record;
  zn bigint; zh bigint; hn bigint; hh bigint;
BEGIN
  probes := 0; answer_rows := 0; empty_answers := 0; mismatches := 0;
  FOREACH t IN ARRAY times LOOP
    zn := 0; zh := NULL;
    FOR r IN EXECUTE 'EXECUTE ' || format(zl_execute, t) LOOP
      zn := zn + 1;
      zh := coalesce(zh, 0) + hash_record(r);
    END LOOP;
    EXECUTE format('SELECT count(*), sum(hash_record(r)) FROM (%s) r', format(heap_query, t)) INTO hn, hh;
    probes := probes + 1;
    answer_rows := answer_rows + zn;
    empty_answers := empty_answers + (zn = 0)::int;
    mismatches := mismatches + (zn IS DISTINCT FROM hn OR zh IS DISTINCT FROM hh)::int;
  END LOOP;
END $$;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_prepared(times, 'ref_at(%L)', 'SELECT * FROM ref_heap WHERE valid_from <= %1$L AND valid_to > %1$L') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_prepared(times, 'ref_as_of(%L)', 'SELECT * FROM ref_heap WHERE valid_from <= %1$L AND valid_to > %1$L') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_prepared(times, 'ref_changed(%1$L, %1$L::timestamptz + interval ''5 hours'')',
                               'SELECT * FROM ref_heap WHERE (valid_from >= %1$L AND valid_from < %1$L::timestamptz + interval ''5 hours'')
                                                          OR (valid_to >= %1$L AND valid_to < %1$L::timestamptz + interval ''5 hours'')') c;
SELECT c.* FROM ref_text_probe,
  LATERAL ref_compare_prepared(times, 'ref_to_between(%1$L, %1$L::timestamptz + interval ''12 hours'')',
                               'SELECT * FROM ref_heap WHERE valid_to BETWEEN %1$L AND %1$L::timestamptz + interval ''12 hours''') c;
EXPLAIN (COSTS OFF) EXECUTE ref_changed('2026-04-05', '2026-04-06');
RESET plan_cache_mode;
