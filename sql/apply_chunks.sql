-- A batch larger than work_mem is applied a chunk of keys at a time
-- (README "Guarantees", memory): the result and the counts are those of
-- the batch applied at once.  work_mem = 64kB makes chunks of a few dozen
-- keys; the same batches go into a second table with the default.
SET timezone = 'UTC';
CREATE TABLE ac_small (id int, v int, pad text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
CREATE TABLE ac_large (LIKE ac_small) USING zipper_lake;
SELECT zipper_lake.register('ac_small', ARRAY['id']);
SELECT zipper_lake.register('ac_large', ARRAY['id']);
-- in-order upserts, then late changes, deletes and no-ops, then an image
CREATE TABLE ac_c1 AS
SELECT k AS id, k % 7 AS v, repeat('x', 50) AS pad,
       timestamptz '2026-01-01' + (k % 5) * interval '1 hour' AS change_time, 'I'::text AS op
  FROM generate_series(1, 3000) k;
CREATE TABLE ac_c2 AS
SELECT k % 3000 + 1 AS id, k % 3 AS v, repeat('y', 50) AS pad,
       timestamptz '2025-12-31' + (k % 11) * interval '5 hours' + (k / 3000) * interval '1 minute' AS change_time,
       CASE WHEN k % 13 = 0 THEN 'D' ELSE 'U' END AS op
  FROM generate_series(1, 5000) k;
CREATE TABLE ac_img AS SELECT id, v + 1 AS v, pad FROM ac_c1 WHERE id % 4 <> 0;
CREATE TABLE ac_empty (id int, v int, pad text);
CREATE TABLE ac_counts (tbl text, step int, changes bigint, inserted bigint, closed bigint,
                        deleted bigint, unchanged bigint, late bigint);
-- what differs between a table applied at 64kB and one applied with the default
CREATE FUNCTION ac_differences(small text, large text)
RETURNS TABLE (counts_differ bigint, small_not_large bigint, large_not_small bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        SELECT (SELECT count(*) FROM (SELECT step, changes, inserted, closed, deleted, unchanged, late
                                        FROM ac_counts WHERE tbl = %1$L
                                      EXCEPT SELECT step, changes, inserted, closed, deleted, unchanged, late
                                        FROM ac_counts WHERE tbl = %2$L) d),
               (SELECT count(*) FROM (TABLE %1$I EXCEPT ALL TABLE %2$I) d),
               (SELECT count(*) FROM (TABLE %2$I EXCEPT ALL TABLE %1$I) d)$q$, small, large);
END $$;
CREATE FUNCTION ac_apply(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ac_counts SELECT tbl, 1, * FROM zipper_lake.apply_changes(tbl::regclass, 'ac_c1');
    INSERT INTO ac_counts SELECT tbl, 2, * FROM zipper_lake.apply_changes(tbl::regclass, 'ac_c2');
    INSERT INTO ac_counts SELECT tbl, 3, * FROM zipper_lake.apply_snapshot(tbl::regclass, 'ac_img', '2026-01-02');
    INSERT INTO ac_counts SELECT tbl, 4, * FROM zipper_lake.apply_snapshot(tbl::regclass, 'ac_empty', '2026-01-03',
                                                                         allow_empty => true);
END $$;
SET work_mem = '64kB';
SELECT ac_apply('ac_small');
RESET work_mem;
SELECT ac_apply('ac_large');
-- the same counts, the same versions, healthy
SELECT * FROM ac_differences('ac_small', 'ac_large');
SELECT step, changes, inserted, closed, deleted, unchanged, late FROM ac_counts WHERE tbl = 'ac_large' ORDER BY step;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to = 'infinity') AS open FROM ac_small;
SELECT * FROM zipper_lake.verify('ac_small');
DROP TABLE ac_small, ac_large, ac_c1, ac_c2, ac_img, ac_empty;
DROP FUNCTION ac_apply(text);

-- Partial changes (ignore_nulls, missing_columns => 'keep'), a dropped
-- column and CDC events with unchanged TOAST values: held in memory with
-- the default work_mem, moved into the sort past 64kB — the same result.
CREATE TABLE ap_small (id int, gone int, name text, amount int,
                       valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
CREATE TABLE ap_large (id int, gone int, name text, amount int,
                       valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
ALTER TABLE ap_small DROP COLUMN gone;
ALTER TABLE ap_large DROP COLUMN gone;
SELECT zipper_lake.register('ap_small', ARRAY['id']);
SELECT zipper_lake.register('ap_large', ARRAY['id']);
CREATE TABLE ap_c1 AS
SELECT k AS id, 'n' || k AS name, k AS amount,
       timestamptz '2026-01-01' + (k % 5) * interval '1 hour' AS change_time, 'U'::text AS op
  FROM generate_series(1, 2000) k;
CREATE TABLE ap_c2 AS
SELECT k % 2000 + 1 AS id, CASE WHEN k % 3 <> 0 THEN 'm' || k END AS name,
       CASE WHEN k % 5 <> 0 THEN k % 7 END AS amount,
       timestamptz '2026-01-01 12:00' + (k % 11) * interval '1 hour' + (k / 2000) * interval '1 minute' AS change_time,
       CASE WHEN k % 17 = 0 THEN 'D' ELSE 'U' END AS op
  FROM generate_series(1, 3000) k;
CREATE TABLE ap_c3 AS
SELECT k % 2000 + 1 AS id, k % 9 AS amount,
       timestamptz '2026-01-02' + (k % 13) * interval '1 hour' AS change_time, 'U'::text AS op
  FROM generate_series(1, 2500) k;
-- 1767398400000 ms = 2026-01-03 00:00 UTC
CREATE TABLE ap_ev AS
SELECT jsonb_build_object('before', NULL,
         'after', jsonb_build_object('id', k % 2000 + 1, 'amount', k,
                                     'name', CASE WHEN k % 4 = 0 THEN '__debezium_unavailable_value' ELSE 'e' || k END),
         'source', jsonb_build_object('ts_ms', 1767398400000 + k * 1000, 'lsn', k, 'table', 'account'),
         'op', 'u', 'ts_ms', 1767398400000 + k * 1000) AS event
  FROM generate_series(1, 2500) k;
CREATE FUNCTION ap_apply(tbl text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ac_counts SELECT tbl, 1, * FROM zipper_lake.apply_changes(tbl::regclass, 'ap_c1');
    INSERT INTO ac_counts SELECT tbl, 2, * FROM zipper_lake.apply_changes(tbl::regclass, 'ap_c2', ignore_nulls => true);
    INSERT INTO ac_counts SELECT tbl, 3, * FROM zipper_lake.apply_changes(tbl::regclass, 'ap_c3',
                                                                        missing_columns => 'keep');
    INSERT INTO ac_counts SELECT tbl, 4, changes, inserted, closed, deleted, unchanged, late
      FROM zipper_lake.apply_events(tbl::regclass, 'ap_ev', 'debezium');
END $$;
SET work_mem = '64kB';
SELECT ap_apply('ap_small');
RESET work_mem;
SELECT ap_apply('ap_large');
SELECT * FROM ac_differences('ap_small', 'ap_large');
SELECT step, changes, inserted, closed, deleted, unchanged, late FROM ac_counts WHERE tbl = 'ap_large' ORDER BY step;
-- partial changes kept what they did not give
SELECT count(*) AS versions, count(*) FILTER (WHERE name LIKE 'm%') AS kept_or_given_m,
       count(*) FILTER (WHERE name IS NULL) AS null_names
  FROM ap_small;
SELECT * FROM zipper_lake.verify('ap_small');
DROP TABLE ap_small, ap_large, ap_c1, ap_c2, ap_c3, ap_ev, ac_counts;
DROP FUNCTION ap_apply(text);
DROP FUNCTION ac_differences(text, text);
