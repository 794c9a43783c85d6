/*
 * test/random/fold_reference.sql — reference implementation of the fold: the
 * history a zipper table must hold whatever the batching (the contract of
 * the next release, specified in test/random/README.md, "The fold"), in plain
 * PL/pgSQL on an ordinary heap table.  Needs reference.sql (schema zl_ref)
 * loaded first: it validates and normalizes batches with
 * zl_ref.normalize_batch and returns zl_ref.counts.
 *
 * Design: clarity over speed.  Every change ever applied is kept in a log
 * (a heap table per target), and after every application the history of
 * every key it changes (a snapshot with deletes: every key) is recomputed
 * from the whole log, key by key, by literally folding the key's changes in
 * fold order, starting from "absent":
 *
 *   change      state before            step
 *   upsert v    absent                  a version with v begins at t
 *   upsert v    holding w <> v (from a) [a, t) with w ends; one with v begins
 *   upsert v    holding v               nothing (no-op)
 *   delete      holding w (from a)      [a, t) with w ends
 *   delete      absent                  nothing
 *
 * A partial change (README "Change semantics", "Partial changes":
 * ignore_nulls, missing_columns => 'keep') is an upsert that keeps some
 * value columns: before its step, its kept columns take the values of the
 * state before it (NULL when absent), so v above is the state after it:
 * its given columns over the state before it in fold order.  Two changes at
 * one instant so compose, and a partial change that gives what is held is
 * a no-op.
 *
 * Tracked columns (README "Tracked columns"; register's track_columns, NULL:
 * every value column): "equal values" above means equal tracked values, so
 * an upsert that leaves the tracked values as held is the no-op step, yet the
 * key now holds the state after it (its untracked values too: the next
 * partial change keeps them).  A version shows the state after the last
 * instant before it ends: when it ends at t, the state held when the fold
 * reached t (the change rows cur_id and settled below are those states).
 * Without untracked columns these are the version's values throughout.
 *
 * Fold order: change_time, then seq (NULL after every seq), then the
 * application number.  Two rules make "only the last change at an instant
 * shapes the history there": a version that ends where it began ([t, t)) is
 * never written, and a version that begins at t with the values of the
 * version that ended at t is that version going on (it is taken back), so
 * adjacent versions never have equal values.  The version held at the end
 * stays open (valid_to = open end).
 *
 * Tables (schema zl_fold):
 *   targets      one row per registered target: key, open end, its log, the
 *                number of applications so far;
 *   snapshots    one row per apply_snapshot (application number, time,
 *                deletes) and per truncate of a batch (op T: deletes, its
 *                seq; it deletes every key, those of its batch too);
 *   log_<oid>    the log of one target: the key and value columns (the
 *                target's types), zl_id, zl_app (application number),
 *                zl_time, zl_seq, zl_upsert, zl_keep (the value columns an
 *                upsert keeps, '{}' for a full change and every delete;
 *                their values are NULL in the log); the distinct normalized
 *                changes of every application (identical duplicates within
 *                one batch collapsed; a delete's values are NULL).  A snapshot's image
 *                rows are logged as its upserts.  "Every key missing from
 *                the image is deleted" is not logged row by row: when the
 *                log is folded, each snapshot with deletes adds a delete at
 *                its time, seq NULL, its application number, for every key
 *                of the log that has no row of that snapshot -- also for keys
 *                that first appear in later applications.
 *
 * Counts (zl_ref.counts; definitions in test/random/README.md, "Counts of
 * the fold"), for the changes of the application being made only, each by
 * its own step in the fold of the log including the application:
 *   changes    rows read (a snapshot: image rows);
 *   inserted   upserts that are not no-ops;
 *   deleted    deletes that end a version;
 *   unchanged  no-op upserts, deletes of an absent key, identical duplicates
 *              within the batch;
 *   closed     inserted or deleted changes that end the version the key held
 *              at the open end (the change comes after every change applied
 *              to the key before), except an upsert replacing a version
 *              that began at its own instant;
 *   late       changes -- identical re-applications excepted -- whose
 *              (change_time, seq) precedes the newest change applied to the
 *              key before this application; identical means equal to the
 *              change applied before that held its instant (the same
 *              columns kept, the same values given).
 * A change that a change applied before follows at its own instant (a
 * higher seq there) counts as unchanged only, never late: zipper_lake
 * remembers only the winner of an instant.  (If that winner is partial, the
 * change still shapes the instant: the winner's given columns over it.)
 * Counted values are states: a partial change's step compares the state
 * after it with the one before it.
 * A snapshot's delete of a missing key counts only when it deletes something.
 *
 * Functions:
 *   zl_fold.register(target, key, open_end, track_columns)
 *                                             start an (empty) target's log
 *   zl_fold.apply_changes(target, changes, change_time, op, seq,
 *                         ignore_nulls, missing_columns)
 *   zl_fold.apply_snapshot(target, snapshot, snapshot_time, deletes,
 *                          ignore_nulls, missing_columns)
 * Conventions as in reference.sql (period columns valid_from / valid_to of
 * type timestamptz, timestamp or date; times handled as timestamptz under
 * TimeZone UTC; names starting with zl_ are internal).
 *
 * Load with:  psql -f test/random/reference.sql -f test/random/fold_reference.sql
 */

DROP SCHEMA IF EXISTS zl_fold CASCADE;
CREATE SCHEMA zl_fold;

CREATE TABLE zl_fold.targets (
    tbl      regclass PRIMARY KEY,
    key      text[] NOT NULL,
    open_end timestamptz NOT NULL,
    track    text[],                        -- tracked value columns (NULL: all)
    log      regclass NOT NULL,
    apps     bigint NOT NULL DEFAULT 0      -- applications so far
);

CREATE TABLE zl_fold.snapshots (
    tbl           regclass,
    app           bigint,
    snapshot_time timestamptz NOT NULL,
    deletes       boolean NOT NULL,
    seq           bigint,                   -- a truncate's (NULL: none)
    truncate      boolean NOT NULL DEFAULT false  -- deletes every key, also keys of its batch
);

-- Whether (t1, s1) comes before (t2, s2) in fold order, applications aside:
-- an earlier time, or the same time and a seq where the other has a larger
-- one or none (changes without seq come after all changes with seq).
CREATE FUNCTION zl_fold.precedes(t1 timestamptz, s1 bigint, t2 timestamptz, s2 bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT t1 < t2 OR (t1 = t2 AND s1 IS NOT NULL AND (s2 IS NULL OR s1 < s2))
$$;

/*
 * Register an empty heap table as a fold target: its history will be the fold
 * of its log, which starts empty.  Registering it again starts over.
 */
CREATE FUNCTION zl_fold.register(target regclass, key text[],
                                 open_end timestamptz DEFAULT 'infinity',
                                 track_columns text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
AS $fn$
DECLARE
    log  text := format('zl_fold.%I', 'log_' || target::oid);
    cols text[];
    n    bigint;
BEGIN
    SELECT array_agg(col::text) INTO cols FROM zl_ref.columns_of(target);
    IF key IS NULL OR cardinality(key) = 0 OR NOT cols @> key
       OR NOT cols @> ARRAY['valid_from', 'valid_to'] THEN
        RAISE EXCEPTION 'zl_fold: % needs the key columns % and valid_from, valid_to', target, key;
    END IF;
    IF track_columns IS NOT NULL AND (cardinality(track_columns) = 0
       OR NOT zl_ref.value_columns(target, key) @> track_columns) THEN
        RAISE EXCEPTION 'zl_fold: track_columns % are not value columns of %', track_columns, target;
    END IF;
    EXECUTE format('SELECT count(*) FROM %s', target) INTO n;
    IF n > 0 THEN
        RAISE EXCEPTION 'zl_fold: % must be empty when registered (its history is the fold of its log)',
            target;
    END IF;

    DELETE FROM zl_fold.targets WHERE tbl = target;
    DELETE FROM zl_fold.snapshots WHERE tbl = target;
    EXECUTE format('DROP TABLE IF EXISTS %s', log);
    EXECUTE format('CREATE TABLE %s AS SELECT %s FROM %s WITH NO DATA',
                   log, zl_ref.col_list(key || zl_ref.value_columns(target, key)), target);
    EXECUTE format('ALTER TABLE %s ADD zl_id bigint GENERATED ALWAYS AS IDENTITY,
                    ADD zl_app bigint NOT NULL, ADD zl_time timestamptz NOT NULL,
                    ADD zl_seq bigint, ADD zl_upsert boolean NOT NULL,
                    ADD zl_keep text[] NOT NULL', log);
    INSERT INTO zl_fold.targets (tbl, key, open_end, track, log)
    VALUES (target, key, open_end, track_columns, log::regclass);
END
$fn$;

-- The registration of a target.
CREATE FUNCTION zl_fold.target_of(target regclass)
RETURNS zl_fold.targets
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    t zl_fold.targets;
BEGIN
    SELECT * INTO t FROM zl_fold.targets WHERE tbl = target;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'zl_fold: % is not registered', target;
    END IF;
    RETURN t;
END
$fn$;

/*
 * Append the normalized batch (temp table zl_ref_batch, which is dropped) to
 * the target's log as a new application; a snapshot also gets its row in
 * zl_fold.snapshots.  Returns the application number.
 */
CREATE FUNCTION zl_fold.record(target regclass, snapshot_time timestamptz, deletes boolean)
RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    t   zl_fold.targets;
    kvl text;
BEGIN
    t := zl_fold.target_of(target);
    UPDATE zl_fold.targets SET apps = apps + 1 WHERE tbl = target RETURNING * INTO t;
    IF snapshot_time IS NOT NULL THEN
        INSERT INTO zl_fold.snapshots VALUES (target, t.apps, snapshot_time, deletes);
    END IF;
    IF to_regclass('pg_temp.zl_fold_truncates') IS NOT NULL THEN
        INSERT INTO zl_fold.snapshots
        SELECT target, t.apps, tr.zl_time, true, tr.zl_seq, true FROM pg_temp.zl_fold_truncates tr;
        DROP TABLE pg_temp.zl_fold_truncates;
    END IF;
    kvl := zl_ref.col_list(t.key || zl_ref.value_columns(target, t.key));
    EXECUTE format('INSERT INTO %s (%s, zl_app, zl_time, zl_seq, zl_upsert, zl_keep)
                    SELECT %s, $1, zl_time, zl_seq, zl_upsert, zl_keep FROM zl_ref_batch',
                   t.log, kvl, kvl)
      USING t.apps;
    DROP TABLE pg_temp.zl_ref_batch;
    RETURN t.apps;
END
$fn$;

/*
 * README "Lifecycle": erase the keys a relation lists (key columns by name)
 * -- their changes leave the log and their versions the target, so they
 * start again from "absent", as keys never seen before (a snapshot with
 * deletes then deletes them at its time like any key missing from it).
 */
CREATE FUNCTION zl_fold.erase(target regclass, keys regclass)
RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    t   zl_fold.targets;
    kl  text;
BEGIN
    t := zl_fold.target_of(target);
    kl := zl_ref.col_list(t.key);
    EXECUTE format('DELETE FROM %s WHERE (%s) IN (SELECT %s FROM %s)', t.log, kl, kl, keys);
    EXECUTE format('DELETE FROM %s WHERE (%s) IN (SELECT %s FROM %s)', target, kl, kl, keys);
END
$fn$;

/*
 * Recompute from the log the history of every key that application app
 * changes (the fold described at the top; the history of a key is the fold
 * of its own changes, so no other key's changes), and count what the
 * changes of app do (rows_read: the rows the application read).
 */
CREATE FUNCTION zl_fold.refold(target regclass, app bigint, rows_read bigint)
RETURNS zl_ref.counts
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
SET jit = off                        -- thousands of tiny queries
SET TimeZone = 'UTC'                 -- timestamp/date <-> timestamptz without DST
AS $fn$
DECLARE
    t        zl_fold.targets;
    kvl      text;          -- key and value column list
    vcols    text[];        -- value columns
    same     text;          -- "x's tracked values IS NOT DISTINCT FROM y's"
    same_given text;        -- "x and y keep the same columns and give the same values"
    equals   text;          -- whether log rows $1 and $2 have equal tracked values
    fill     text;          -- log row $1 takes its kept columns from log row $2 (NULL: absent)
    write    text;          -- write a version: values of log row $1, period [$2, $3)
    k        bigint;        -- the key being folded (zl_key_no)
    ch       record;        -- one change: zl_id (NULL: a snapshot's delete), zl_app, zl_time, zl_seq, zl_upsert, zl_keep
    present  boolean;       -- the key holds a version ...
    cur_id   bigint;        -- ... now in the state after this log row ...
    cur_from timestamptz;   -- ... since this time
    settled  bigint;        -- the state after the instant before this one (NULL: absent)
    last_t   timestamptz;   -- the instant of the last change folded
    p_id     bigint;        -- the last version that ended, not yet written (the row it shows)
    p_from   timestamptz;
    p_to     timestamptz;
    equal    boolean;       -- an upsert of the values held
    n_time   timestamptz;   -- the newest change of the key before app
    n_seq    bigint;
    has_old  boolean;       -- the key had changes before app
    opened   boolean;       -- the change comes after all of them
    cnt      bigint;
    res      zl_ref.counts := ROW(rows_read, 0, 0, 0, 0, 0);
BEGIN
    t := zl_fold.target_of(target);
    vcols := zl_ref.value_columns(target, t.key);
    kvl := zl_ref.col_list(t.key || vcols);
    same := zl_ref.same_values(coalesce(t.track, vcols));
    same_given := 'x.zl_keep = y.zl_keep' || coalesce((
        SELECT string_agg(format(' AND (%L = ANY (y.zl_keep) OR x.%I IS NOT DISTINCT FROM y.%I)', c, c, c), '')
          FROM unnest(vcols) AS c), '');
    equals := format('SELECT %s FROM zl_fold_changes x, zl_fold_changes y
                      WHERE x.zl_id = $1 AND y.zl_id = $2', same);
    fill := format('UPDATE zl_fold_changes c SET %s WHERE c.zl_id = $1', (
        SELECT string_agg(format('%I = CASE WHEN %L = ANY (c.zl_keep)
                                       THEN (SELECT s.%I FROM zl_fold_changes s WHERE s.zl_id = $2)
                                       ELSE c.%I END', c, c, c, c), ', ')
          FROM unnest(vcols) AS c));
    write := format('INSERT INTO %s (%s, valid_from, valid_to)
                     SELECT %s, $2, $3 FROM zl_fold_changes WHERE zl_id = $1', target, kvl, kvl);

    -- identical duplicates within the batch were collapsed before logging
    -- (its truncates are no rows of the log)
    EXECUTE format('SELECT $1 - count(*) FROM %s WHERE zl_app = $2', t.log)
       INTO res.unchanged USING rows_read, app;
    res.unchanged := res.unchanged - (SELECT count(*) FROM zl_fold.snapshots s
                                       WHERE s.tbl = target AND s.app = refold.app AND s.truncate);

    -- every change of the log, keys numbered, and the deletes of the
    -- snapshots with deletes: one for every key with no row in the image
    DROP TABLE IF EXISTS pg_temp.zl_fold_changes;
    EXECUTE format('CREATE TEMP TABLE zl_fold_changes AS
                    SELECT dense_rank() OVER (ORDER BY %s) AS zl_key_no, l.* FROM %s l',
                   zl_ref.col_list(t.key), t.log);
    EXECUTE format(
        'INSERT INTO zl_fold_changes (zl_key_no, %s, zl_app, zl_time, zl_seq, zl_upsert, zl_keep)
         SELECT k.zl_key_no, %s, s.app, s.snapshot_time, s.seq, false, ''{}''
         FROM (SELECT DISTINCT zl_key_no, %s FROM zl_fold_changes) k, zl_fold.snapshots s
         WHERE s.tbl = $1 AND s.deletes
           AND (s.truncate OR NOT EXISTS (SELECT FROM zl_fold_changes c
                                          WHERE c.zl_key_no = k.zl_key_no AND c.zl_app = s.app))',
        zl_ref.col_list(t.key), zl_ref.col_list(t.key, 'k'), zl_ref.col_list(t.key))
      USING target;
    -- (every statement on zl_fold_changes is dynamic: its columns differ from
    -- call to call, and none of them can clash with a PL/pgSQL variable)
    EXECUTE 'CREATE INDEX ON zl_fold_changes (zl_key_no)';
    EXECUTE 'CREATE INDEX ON zl_fold_changes (zl_id)';
    EXECUTE 'ANALYZE zl_fold_changes';

    -- only the keys that app changes: they have a change of app (a snapshot
    -- with deletes has one of every key now); their versions are written anew
    EXECUTE 'DELETE FROM zl_fold_changes c
             WHERE NOT EXISTS (SELECT FROM zl_fold_changes x
                               WHERE x.zl_key_no = c.zl_key_no AND x.zl_app = $1)'
      USING app;
    EXECUTE format('DELETE FROM %s t USING (SELECT DISTINCT %s FROM zl_fold_changes) k WHERE %s',
                   target, zl_ref.col_list(t.key), zl_ref.key_match(t.key, 't', 'k'));

    FOR k IN EXECUTE 'SELECT DISTINCT zl_key_no FROM zl_fold_changes ORDER BY 1' LOOP
        -- the newest change applied to the key before this application
        EXECUTE 'SELECT zl_time, zl_seq FROM zl_fold_changes WHERE zl_key_no = $1 AND zl_app < $2
                 ORDER BY zl_time DESC, zl_seq DESC NULLS FIRST LIMIT 1'
           INTO n_time, n_seq USING k, app;
        GET DIAGNOSTICS cnt = ROW_COUNT;
        has_old := cnt > 0;

        present := false;
        p_id := NULL;
        last_t := NULL;
        FOR ch IN EXECUTE 'SELECT zl_id, zl_app, zl_time, zl_seq, zl_upsert, zl_keep FROM zl_fold_changes
                           WHERE zl_key_no = $1
                           ORDER BY zl_time, zl_seq NULLS LAST, zl_app'     -- fold order
                   USING k
        LOOP
            IF last_t IS NULL OR ch.zl_time > last_t THEN
                settled := CASE WHEN present THEN cur_id END;
                last_t := ch.zl_time;
            END IF;

            -- a partial change: its kept columns take the values held
            -- (NULL when absent), so that its row holds the state after it
            IF ch.zl_upsert AND cardinality(ch.zl_keep) > 0 THEN
                EXECUTE fill USING ch.zl_id, CASE WHEN present THEN cur_id END;
            END IF;

            equal := false;
            IF present AND ch.zl_upsert THEN
                EXECUTE equals INTO equal USING cur_id, ch.zl_id;
            END IF;

            ------------------------------------------------ the counts
            -- (a snapshot's delete of a missing key only when it deletes)
            IF ch.zl_app = app AND (ch.zl_id IS NOT NULL OR present) THEN
                -- a change applied before follows it at its instant: it shapes nothing
                EXECUTE 'SELECT count(*) FROM zl_fold_changes x
                         WHERE x.zl_key_no = $1 AND x.zl_app < $2 AND x.zl_time = $3
                           AND zl_fold.precedes($3, $4, x.zl_time, x.zl_seq)'
                   INTO cnt USING k, app, ch.zl_time, ch.zl_seq;
                opened := NOT has_old
                          OR NOT zl_fold.precedes(ch.zl_time, ch.zl_seq, n_time, n_seq);
                IF cnt > 0 THEN
                    -- (a truncate's delete so deletes nothing: it counts nowhere)
                    IF ch.zl_id IS NOT NULL THEN
                        res.unchanged := res.unchanged + 1;
                    END IF;
                ELSIF equal OR (NOT ch.zl_upsert AND NOT present) THEN
                    res.unchanged := res.unchanged + 1;
                ELSIF ch.zl_upsert THEN
                    res.inserted := res.inserted + 1;
                    IF present AND opened AND cur_from < ch.zl_time THEN
                        res.closed := res.closed + 1;
                    END IF;
                ELSE
                    res.deleted := res.deleted + 1;
                    IF opened THEN
                        res.closed := res.closed + 1;
                    END IF;
                END IF;
                IF NOT opened AND cnt = 0 THEN
                    -- late, unless it is identical to the change applied before
                    -- that held its instant (the last one there in fold order):
                    -- the same columns kept and the same values given (both
                    -- rows are filled by now, given columns are as logged)
                    EXECUTE format(
                        'SELECT count(*) FROM (SELECT * FROM zl_fold_changes w
                                                WHERE w.zl_key_no = $1 AND w.zl_app < $2 AND w.zl_time = $3
                                                ORDER BY w.zl_seq DESC NULLS FIRST, w.zl_app DESC LIMIT 1) x
                         WHERE x.zl_seq IS NOT DISTINCT FROM $4 AND x.zl_upsert = $5
                           AND (NOT $5 OR EXISTS (SELECT FROM zl_fold_changes y
                                                  WHERE y.zl_id = $6 AND %s))', same_given)
                       INTO cnt USING k, app, ch.zl_time, ch.zl_seq, ch.zl_upsert, ch.zl_id;
                    IF cnt = 0 THEN
                        res.late := res.late + 1;
                    END IF;
                END IF;
            END IF;

            -------------------------------------------- the fold step
            IF equal THEN
                -- the version goes on, in the state after this change
                cur_id := ch.zl_id;
            ELSIF ch.zl_upsert OR present THEN
                -- the version held ends at t (never written if it began at
                -- t), showing the state after its last instant, one before t
                IF present AND cur_from < ch.zl_time THEN
                    IF p_id IS NOT NULL THEN
                        EXECUTE write USING p_id, p_from, p_to;
                    END IF;
                    p_id := settled;
                    p_from := cur_from;
                    p_to := ch.zl_time;
                END IF;
                present := ch.zl_upsert;
                IF present THEN
                    -- a version begins at t: the one that ended at t if it has these values
                    equal := false;
                    IF p_id IS NOT NULL AND p_to = ch.zl_time THEN
                        EXECUTE equals INTO equal USING p_id, ch.zl_id;
                    END IF;
                    cur_id := ch.zl_id;
                    IF equal THEN
                        cur_from := p_from;
                        p_id := NULL;
                    ELSE
                        cur_from := ch.zl_time;
                    END IF;
                END IF;
            END IF;
        END LOOP;

        IF p_id IS NOT NULL THEN
            EXECUTE write USING p_id, p_from, p_to;
        END IF;
        IF present THEN
            EXECUTE write USING cur_id, cur_from, t.open_end;
        END IF;
    END LOOP;

    DROP TABLE pg_temp.zl_fold_changes;
    RETURN res;
END
$fn$;

/*
 * The truncates of a batch (op T or truncate, any case; README "Change
 * semantics") into pg_temp.zl_fold_truncates (distinct times and seqs),
 * the other changes into pg_temp.zl_fold_rest; returns how many truncate
 * rows were read.  The caller applies zl_fold_rest instead of the batch.
 */
CREATE FUNCTION zl_fold.split_truncates(changes regclass, change_time name, op name, seq name)
RETURNS bigint
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
SET TimeZone = 'UTC'                 -- timestamp/date <-> timestamptz as normalize_batch
AS $fn$
DECLARE
    is_truncate text;
    n bigint;
BEGIN
    DROP TABLE IF EXISTS pg_temp.zl_fold_truncates;
    DROP TABLE IF EXISTS pg_temp.zl_fold_rest;
    IF op IS NULL OR NOT op::text = ANY (SELECT col::text FROM zl_ref.columns_of(changes)) THEN
        EXECUTE format('CREATE TEMP TABLE zl_fold_rest AS SELECT * FROM %s', changes);
        RETURN 0;
    END IF;
    is_truncate := format('lower(%I::text) IN (''t'', ''truncate'')', op);
    EXECUTE format('CREATE TEMP TABLE zl_fold_truncates AS
                    SELECT DISTINCT %I::timestamptz AS zl_time, %s AS zl_seq FROM %s WHERE %s',
                   change_time, CASE WHEN seq IS NULL THEN 'NULL::bigint'
                                     ELSE format('%I::bigint', seq) END, changes, is_truncate);
    EXECUTE format('SELECT count(*) FROM %s WHERE %s', changes, is_truncate) INTO n;
    EXECUTE format('CREATE TEMP TABLE zl_fold_rest AS SELECT * FROM %s WHERE NOT coalesce(%s, false)',
                   changes, is_truncate);
    RETURN n;
END
$fn$;

-- apply_changes: the batch (validated as zl_ref.apply_changes does) joins
-- the log; its truncates are deletes of every key (zl_fold.snapshots).
CREATE FUNCTION zl_fold.apply_changes(
    target regclass,
    changes regclass,
    change_time name DEFAULT 'change_time',
    op name DEFAULT 'op',
    seq name DEFAULT NULL,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS zl_ref.counts
LANGUAGE plpgsql AS $fn$
DECLARE
    t     zl_fold.targets;
    nread bigint;
    ntruncates bigint;
BEGIN
    t := zl_fold.target_of(target);
    ntruncates := zl_fold.split_truncates(changes, change_time, op, seq);
    nread := zl_ref.normalize_batch(target, 'pg_temp.zl_fold_rest'::regclass, t.key, change_time,
                                    op, seq, t.open_end, ignore_nulls, missing_columns);
    DROP TABLE pg_temp.zl_fold_rest;
    RETURN zl_fold.refold(target, zl_fold.record(target, NULL, NULL), nread + ntruncates);
END
$fn$;

/*
 * apply_snapshot: every image row is an upsert at snapshot_time (two
 * different rows of one key are an error, identical ones collapse); with
 * deletes, every key missing from the image is deleted then (see the log
 * above).  ignore_nulls and missing_columns as for apply_changes.
 */
CREATE FUNCTION zl_fold.apply_snapshot(
    target regclass,
    snapshot regclass,
    snapshot_time timestamptz,
    deletes boolean DEFAULT true,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS zl_ref.counts
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
AS $fn$
DECLARE
    t     zl_fold.targets;
    nread bigint;
BEGIN
    t := zl_fold.target_of(target);
    DROP TABLE IF EXISTS pg_temp.zl_fold_image;
    -- the image's key and value columns (normalize_batch judges what it lacks)
    EXECUTE format('CREATE TEMP TABLE zl_fold_image AS SELECT %s, $1 AS zl_fold_time FROM %s',
                   (SELECT string_agg(quote_ident(c), ', ' ORDER BY i)
                      FROM unnest(t.key || zl_ref.value_columns(target, t.key)) WITH ORDINALITY AS u(c, i)
                     WHERE c IN (SELECT col::text FROM zl_ref.columns_of(snapshot))), snapshot)
      USING snapshot_time;
    nread := zl_ref.normalize_batch(target, 'pg_temp.zl_fold_image'::regclass, t.key,
                                    'zl_fold_time', NULL, NULL, t.open_end,
                                    ignore_nulls, missing_columns);
    DROP TABLE pg_temp.zl_fold_image;
    RETURN zl_fold.refold(target, zl_fold.record(target, snapshot_time, deletes), nread);
END
$fn$;
