-- SCROLL cursors over zipper tables: every FETCH form, in both directions,
-- returns what the same cursor over a heap table returns.
SET timezone = 'UTC';

-- sub-groups of several pages (300-byte rows), history and open versions,
-- and masked rows: apply_changes masks the versions it closes
CREATE TABLE sc (id int, v int, pad text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('sc', ARRAY['id']);
CREATE TABLE sc_ch (id int, v int, pad text, change_time timestamptz, op text);
-- the reference: the same versions in a heap table, changed by hand
CREATE TABLE sc_ref (LIKE sc);

-- per key: [day 1, day 2) v1, [day 2, day 3) v2, [day 3, open) v3
CREATE VIEW sc_load AS
  SELECT k AS id, s AS v, repeat(chr(97 + k % 26), 300) AS pad,
         CASE s WHEN 1 THEN '2026-03-01'::timestamptz + k * interval '7 minutes'
                WHEN 2 THEN '2026-03-02'::timestamptz + k * interval '5 minutes'
                ELSE '2026-03-03'::timestamptz + k * interval '3 minutes' END AS valid_from,
         CASE s WHEN 1 THEN '2026-03-02'::timestamptz + k * interval '5 minutes'
                WHEN 2 THEN '2026-03-03'::timestamptz + k * interval '3 minutes'
                ELSE 'infinity' END AS valid_to
    FROM generate_series(1, 120) k, generate_series(1, 3) s;
INSERT INTO sc SELECT * FROM sc_load;
INSERT INTO sc_ref SELECT * FROM sc_load;

-- on day 5 every fourth key changes and every sixth (from 1) is deleted
INSERT INTO sc_ch SELECT k, 4, repeat('n', 300), '2026-03-05', CASE WHEN k % 4 = 0 THEN 'U' ELSE 'D' END
  FROM generate_series(1, 120) k WHERE k % 4 = 0 OR k % 6 = 1;
SELECT * FROM zipper_lake.apply_changes('sc', 'sc_ch');
UPDATE sc_ref SET valid_to = '2026-03-05' WHERE valid_to = 'infinity' AND (id % 4 = 0 OR id % 6 = 1);
INSERT INTO sc_ref SELECT id, v, pad, change_time, 'infinity' FROM sc_ch WHERE op = 'U';
-- on day 6 the keys 5, 15, 25 ... change (25, 55, 85 and 115 come back)
TRUNCATE sc_ch;
INSERT INTO sc_ch SELECT k, 5, repeat('m', 300), '2026-03-06', 'U' FROM generate_series(5, 120, 10) k;
SELECT * FROM zipper_lake.apply_changes('sc', 'sc_ch');
UPDATE sc_ref SET valid_to = '2026-03-06' WHERE valid_to = 'infinity' AND id % 10 = 5;
INSERT INTO sc_ref SELECT id, v, pad, change_time, 'infinity' FROM sc_ch;

SELECT partition_end, first_start, last_start, row_count, masked_rows, blocks
  FROM zipper_lake.inspect('sc') ORDER BY partition_end, first_start, row_count;
SELECT count(*) AS differences
  FROM ((SELECT * FROM sc EXCEPT ALL SELECT * FROM sc_ref)
        UNION ALL (SELECT * FROM sc_ref EXCEPT ALL SELECT * FROM sc)) d;

-- A zipper table's scan order is deterministic: sub-groups in the order
-- they were written, rows in the order they are stored.  sc_heap holds the
-- reference rows (not the zipper table's) laid out in that order, so that
-- a heap cursor is the reference for every FETCH.
CREATE TABLE sc_heap AS
  SELECT r.* FROM (SELECT row_number() OVER () AS n, id, valid_from FROM sc) z
    JOIN sc_ref r USING (id, valid_from) ORDER BY z.n;
SELECT (SELECT count(*) FROM sc_heap) AS heap_rows, (SELECT count(*) FROM sc_ref) AS reference_rows;

CREATE FUNCTION fetch_rows(cur text, how text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN EXECUTE format('FETCH %s FROM %I', how, cur) LOOP
    RETURN NEXT r::text;
  END LOOP;
END $$;

-- MOVE through PL/pgSQL, which reports how many rows it moved over
CREATE FUNCTION move_rows(cur refcursor, how text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  CASE
    WHEN how = 'FORWARD ALL' THEN MOVE FORWARD ALL FROM cur;
    WHEN how = 'BACKWARD ALL' THEN MOVE BACKWARD ALL FROM cur;
    WHEN how LIKE 'ABSOLUTE %' THEN MOVE ABSOLUTE substr(how, 10)::int FROM cur;
  END CASE;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

-- The same steps on a cursor over sc and one over sc_heap, both declared
-- from a query with %s for the table: the ids of the rows each step returns
-- (first and last of many) and whether both cursors returned the same rows
-- in the same order.  FIRST, and ABSOLUTE n far back, rewind the scan (a
-- rescan); MOVE BACKWARD ALL only rewinds; the other backward steps walk
-- back row by row.  Then two zigzags turn at every row (so at every page
-- and sub-group edge): from the start FORWARD 2, BACKWARD 1, ... and from
-- the end BACKWARD 2, FORWARD 1, ...  pruning_at_run => false turns
-- pruning off after the cursors are planned.
CREATE FUNCTION compare_fetches(query text, pruning_at_run boolean DEFAULT true)
RETURNS TABLE (step int, command text, ids text, same boolean) LANGUAGE plpgsql AS $$
DECLARE
  steps text[] := ARRAY['NEXT', '5', 'BACKWARD 2', 'PRIOR', 'FORWARD 3', 'RELATIVE 0',
    'RELATIVE 4', 'RELATIVE -6', 'FIRST', 'PRIOR', 'PRIOR', 'NEXT', 'ABSOLUTE 40',
    'ABSOLUTE 30', 'ABSOLUTE 12', 'ABSOLUTE -3', 'LAST', 'NEXT', 'PRIOR', 'FORWARD ALL',
    'BACKWARD 3', 'MOVE BACKWARD ALL', 'FORWARD 2', 'MOVE FORWARD ALL', 'BACKWARD ALL',
    'FIRST', 'ALL', 'ABSOLUTE 0', 'BACKWARD 1', 'RELATIVE 2', 'MOVE ABSOLUTE -1', 'PRIOR'];
  z text[];
  h text[];
  moved_z bigint;
  moved_h bigint;
  zs text[];
  hs text[];
  ahead text;
  back text;
BEGIN
  EXECUTE 'DECLARE zc SCROLL CURSOR FOR ' || format(query, 'sc');
  EXECUTE 'DECLARE hc SCROLL CURSOR FOR ' || format(query, 'sc_heap');
  IF NOT pruning_at_run THEN
    PERFORM set_config('zipper_lake.enable_pruning', 'off', true);
  END IF;
  FOR i IN 1 .. cardinality(steps) LOOP
    step := i;
    command := steps[i];
    IF steps[i] LIKE 'MOVE %' THEN
      moved_z := move_rows('zc', substr(steps[i], 6));
      moved_h := move_rows('hc', substr(steps[i], 6));
      ids := format('moved %s', moved_z);
      same := moved_z = moved_h;
    ELSE
      z := ARRAY(SELECT fetch_rows('zc', steps[i]));
      h := ARRAY(SELECT fetch_rows('hc', steps[i]));
      ids := CASE WHEN cardinality(z) <= 6
                  THEN array_to_string(ARRAY(SELECT split_part(ltrim(x, '('), ',', 1) FROM unnest(z) x), ',')
                  ELSE format('%s .. %s (%s rows)', split_part(ltrim(z[1], '('), ',', 1),
                              split_part(ltrim(z[cardinality(z)], '('), ',', 1), cardinality(z)) END;
      same := z = h;
    END IF;
    RETURN NEXT;
  END LOOP;
  FOR turn IN 1 .. 2 LOOP
    step := step + 1;
    IF turn = 1 THEN
      PERFORM fetch_rows('zc', 'ABSOLUTE 0'), fetch_rows('hc', 'ABSOLUTE 0');
      ahead := 'FORWARD 2';
      back := 'BACKWARD 1';
    ELSE
      PERFORM move_rows('zc', 'FORWARD ALL'), move_rows('hc', 'FORWARD ALL');
      ahead := 'BACKWARD 2';
      back := 'FORWARD 1';
    END IF;
    command := format('zigzag %s, %s', ahead, back);
    z := '{}';
    h := '{}';
    LOOP
      zs := ARRAY(SELECT fetch_rows('zc', ahead));
      hs := ARRAY(SELECT fetch_rows('hc', ahead));
      z := z || zs;
      h := h || hs;
      EXIT WHEN cardinality(zs) < 2 OR cardinality(hs) < 2;
      z := z || ARRAY(SELECT fetch_rows('zc', back));
      h := h || ARRAY(SELECT fetch_rows('hc', back));
    END LOOP;
    ids := format('%s rows', cardinality(z));
    same := z = h;
    RETURN NEXT;
  END LOOP;
  EXECUTE 'CLOSE zc';
  EXECUTE 'CLOSE hc';
END $$;

-- the plan of the cursor over sc
CREATE FUNCTION cursor_plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) DECLARE zc SCROLL CURSOR FOR ' || format(query, 'sc');
END $$;

-- a plain sequential scan, over every sub-group and past the masked rows
SELECT * FROM cursor_plan('SELECT * FROM %s');
SELECT * FROM compare_fetches('SELECT * FROM %s');

-- a ZipperScan goes backward itself (no Material node), through sub-groups
-- returned without row checks (as of day 4: the open versions of day 3)
SELECT * FROM cursor_plan($$SELECT id, v, valid_from, valid_to FROM %s
                             WHERE valid_from <= '2026-03-04' AND valid_to > '2026-03-04'$$);
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE valid_from <= '2026-03-04' AND valid_to > '2026-03-04'$$);

-- a valid_from range in the middle of a sub-group of six pages: each
-- direction enters it at the page the range begins on (binary search) and
-- stops at the first row past the range
SELECT * FROM cursor_plan($$SELECT id, v, valid_from, valid_to FROM %s
                             WHERE valid_from BETWEEN '2026-03-01 05:00' AND '2026-03-01 09:00'$$);
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE valid_from BETWEEN '2026-03-01 05:00' AND '2026-03-01 09:00'$$);

-- rows checked one by one in the current sub-group with masked rows, next
-- to whole sub-groups
SELECT * FROM cursor_plan($$SELECT id, v, valid_from, valid_to FROM %s
                             WHERE valid_from >= '2026-03-03 02:00' AND valid_to > '2026-03-04'$$);
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE valid_from >= '2026-03-03 02:00' AND valid_to > '2026-03-04'$$);

-- versions that began or ended on day 5: ORed bounds, no early stop
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE (valid_from >= '2026-03-05' AND valid_from < '2026-03-06')
                                   OR (valid_to >= '2026-03-05' AND valid_to < '2026-03-06')$$);

-- pruning off when the ZipperScan runs: every sub-group checked row by row
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE valid_from BETWEEN '2026-03-01 05:00' AND '2026-03-03 01:00'$$,
                              pruning_at_run => false);

-- and when it is planned: a sequential scan with a filter
SET zipper_lake.enable_pruning = off;
SELECT * FROM cursor_plan($$SELECT id, v, valid_from, valid_to FROM %s
                             WHERE valid_from <= '2026-03-04' AND valid_to > '2026-03-04'$$);
SELECT * FROM compare_fetches($$SELECT id, v, valid_from, valid_to FROM %s
                                WHERE valid_from <= '2026-03-04' AND valid_to > '2026-03-04'$$);
RESET zipper_lake.enable_pruning;

-- an empty result, both ways
BEGIN;
DECLARE zc SCROLL CURSOR FOR SELECT id FROM sc WHERE valid_to < '2026-01-01';
FETCH LAST FROM zc;
FETCH BACKWARD ALL FROM zc;
FETCH ALL FROM zc;
COMMIT;
