/*
 * test/random/reference.sql — schema zl_ref: the helpers fold_reference.sql
 * builds on (column lists, zl_ref.normalize_batch, the type zl_ref.counts),
 * and zl_ref.apply_changes, which applies one batch of changes to the
 * history stored in an ordinary heap table, in plain PL/pgSQL.  The history
 * that gives is the fold of every change applied (test/random/README.md,
 * "The fold") while no change precedes, in fold order, a change applied to
 * its key in an earlier batch, and may differ from it otherwise.  The
 * regression test pruning (sql/pruning.sql) compares a zipper table with
 * it; the randomized comparison test (random_compare.py) compares zipper_lake
 * with the fold (fold_reference.sql).
 *
 * Design: clarity over speed.  Nothing here knows about partitions, file groups
 * or the table access method; apply_changes applies the batch one change at
 * a time to the key's stored versions:
 *
 *   change at t   key's state at t                result
 *   upsert v      inside [a,b) with value v       nothing (no-op)
 *   upsert v      inside [a,b) with value w <> v  [a,t) keeps w (dropped if a = t), new [t,b) with v
 *   upsert v      gap, next version starts at n   new [t,n) with v (n = open end if none)
 *   delete        inside [a,b)                    [a,t) kept (dropped if a = t), [t,b) becomes a gap
 *   delete        gap                             nothing
 *   then: merge adjacent versions (x.valid_to = y.valid_from) whose value
 *         columns are all IS NOT DISTINCT FROM equal, until none are left.
 *
 * It returns counts (type zl_ref.counts), counted change by change as the
 * rules are applied:
 *   changes    rows of the changes relation;
 *   inserted   upserts that are not no-ops (rows 2 and 3 of the table), also
 *              when the new version at once merges with a neighbour;
 *   closed     an upsert inside an open version [a, open end) with a < t (the
 *              version gets the end t), or a delete inside an open version
 *              (also when a = t: the key loses its open version).  A
 *              same-instant upsert (a = t) replaces the open version and is
 *              not counted;
 *   deleted    deletes inside a version (row 4);
 *   unchanged  no-op upserts (row 1), deletes in a gap (row 5), and identical
 *              duplicates collapsed in step 1;
 *   late       changes (of any kind, after collapsing duplicates) whose time
 *              is before the valid_from of the key's newest version at the
 *              moment the change is applied.
 *
 * apply_changes works in four steps:
 *   1. (zl_ref.normalize_batch, shared with fold_reference.sql) validate and
 *      normalize the batch into temp table zl_ref_batch: key and
 *      value columns cast to the target's types, change time as timestamptz, op
 *      reduced to a boolean (true = upsert, false = delete; a delete's values are
 *      irrelevant and stored as NULL), the value columns an upsert keeps
 *      (zl_keep, see below), exact duplicates collapsed (DISTINCT),
 *      two *different* changes for the same (key, time[, seq]) rejected; every
 *      change numbered by (key, change_time, seq) order (zl_ord) and every key
 *      numbered (zl_key_no);
 *   2. move all versions of the affected keys out of the target into temp table
 *      zl_ref_old (one DELETE; the target needs no index);
 *   3. for each affected key: copy its versions into the tiny work table
 *      zl_ref_cur, apply its changes one by one with the rules above (each a
 *      few dynamic statements built with format(%I) from the column lists),
 *      then append the result to zl_ref_new;
 *   4. insert zl_ref_new back into the target.
 * Any error aborts the statement, so a rejected batch changes nothing.
 *
 * Conventions and limits (all the test driver needs):
 *   * the period columns are named valid_from / valid_to, of type timestamptz,
 *     timestamp or date (the target's own); the open end is the argument
 *     open_end ('infinity' by default).  Internally every time is a
 *     timestamptz and the functions run with TimeZone = UTC, so timestamp and
 *     date values convert to and from it without gaps or repeats (no DST);
 *   * value columns = every target column except the key and period columns;
 *     the changes table must have all of them (and the key columns and the
 *     change-time column); the op column may be absent (= all upserts); a seq
 *     column, when named, must exist.  NULL seq values sort last;
 *   * partial changes (README "Change semantics", "Partial changes"):
 *     normalize_batch also takes ignore_nulls (a NULL value of an upsert
 *     keeps the column) and missing_columns ('error', 'null' or 'keep': what
 *     a value column the changes lack means) and lists the columns each
 *     upsert keeps in zl_keep (text[], in attribute order; '{}' for a full
 *     change and for every delete), their values being NULL.  Only
 *     fold_reference.sql folds partial changes; apply_changes here takes
 *     full changes only;
 *   * value types need an equality operator (IS NOT DISTINCT FROM);
 *   * temp tables and columns whose names start with zl_ref_ / zl_ are used
 *     internally; the target must not have columns named like that.
 *
 * Read helpers are plain queries, used as such by the driver:
 *   as of t:             SELECT * FROM tbl WHERE valid_from <= t AND valid_to > t
 *   changes in [f, u):   SELECT * FROM tbl
 *                        WHERE (valid_from >= f AND valid_from < u)
 *                           OR (valid_to   >= f AND valid_to   < u)
 *
 * Load with:  psql -f test/random/reference.sql   (drops and recreates zl_ref)
 */

DROP SCHEMA IF EXISTS zl_ref CASCADE;
CREATE SCHEMA zl_ref;

-- What apply_changes here and in fold_reference.sql, and apply_snapshot
-- there, return (README "Change semantics").
CREATE TYPE zl_ref.counts AS (
    changes bigint, inserted bigint, closed bigint,
    deleted bigint, unchanged bigint, late bigint);

-- Columns of a relation in attribute order with their SQL types.
CREATE FUNCTION zl_ref.columns_of(rel regclass)
RETURNS TABLE (col name, typ text)
LANGUAGE sql STABLE AS $$
    SELECT attname, format_type(atttypid, atttypmod)
    FROM pg_attribute
    WHERE attrelid = rel AND attnum > 0 AND NOT attisdropped
    ORDER BY attnum
$$;

-- 'a, b, c' or, with a qualifier, 'x.a, x.b, x.c' (identifiers quoted).
CREATE FUNCTION zl_ref.col_list(cols text[], qual text DEFAULT NULL)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(string_agg(
               CASE WHEN qual IS NULL THEN quote_ident(c)
                    ELSE qual || '.' || quote_ident(c) END,
               ', ' ORDER BY i), '')
    FROM unnest(cols) WITH ORDINALITY AS u(c, i)
$$;

-- 'x.a = y.a AND x.b = y.b' (keys are never NULL, so plain equality).
CREATE FUNCTION zl_ref.key_match(cols text[], x text, y text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg(format('%s.%I = %s.%I', x, c, y, c), ' AND ' ORDER BY i)
    FROM unnest(cols) WITH ORDINALITY AS u(c, i)
$$;

-- README "Change semantics" op spellings: true = upsert, false = delete, NULL = unknown op.
CREATE FUNCTION zl_ref.op_is_upsert(op text)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN op IS NULL THEN true
        WHEN lower(op) IN ('i', 'u', 'c', 'r', 'insert', 'update', 'upsert') THEN true
        WHEN lower(op) IN ('d', 'delete') THEN false
    END
$$;

-- Value columns of a target: all but the key and period columns, in attribute order.
CREATE FUNCTION zl_ref.value_columns(target regclass, key text[])
RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(col::text ORDER BY ord), '{}')
    FROM zl_ref.columns_of(target) WITH ORDINALITY AS c(col, typ, ord)
    WHERE col::text <> ALL (key || ARRAY['valid_from', 'valid_to'])
$$;

-- "x's values IS NOT DISTINCT FROM y's values" for two rows aliased x and y
-- (ROW() IS NOT DISTINCT FROM ROW() is true, so zero value columns work too).
CREATE FUNCTION zl_ref.same_values(vcols text[])
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('ROW(%s) IS NOT DISTINCT FROM ROW(%s)',
                  zl_ref.col_list(vcols, 'x'), zl_ref.col_list(vcols, 'y'))
$$;

/*
 * Step 1 of apply_changes (see the top of this file), also used by
 * fold_reference.sql: checks the columns of target and changes, validates the
 * batch and leaves it normalized in temp table zl_ref_batch (key and value
 * columns, zl_time, zl_upsert, zl_seq, zl_keep, zl_ord, zl_key_no).
 * ignore_nulls and missing_columns: see "partial changes" at the top.
 * Returns the number of rows read.
 */
CREATE FUNCTION zl_ref.normalize_batch(
    target regclass,
    changes regclass,
    key text[],
    change_time name,
    op name,
    seq name,
    open_end timestamptz,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS bigint
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
SET TimeZone = 'UTC'                 -- timestamp/date <-> timestamptz without DST
AS $fn$
DECLARE
    tcols   text[];     -- all target columns, in attribute order
    ttypes  text[];     -- their types
    vcols   text[];     -- value columns: all but key and period columns
    ccols   text[];     -- columns of the changes relation
    has_op  boolean;
    kl      text;       -- key column list
    vl      text;       -- value column list
    casts   text := ''; -- 'ch.k::int AS k, ch.name::text AS name, ...'
    keeps   text[] := '{}'; -- per value column: the name if the upsert keeps it, else NULL
    bad     record;
    cnt     bigint;
BEGIN
    ---------------------------------------------------------------- columns
    SELECT array_agg(col::text ORDER BY ord), array_agg(typ ORDER BY ord)
      INTO tcols, ttypes
      FROM zl_ref.columns_of(target) WITH ORDINALITY AS c(col, typ, ord);
    SELECT array_agg(col::text) INTO ccols FROM zl_ref.columns_of(changes);

    IF key IS NULL OR cardinality(key) = 0 THEN
        RAISE EXCEPTION 'zl_ref: key must name at least one column';
    END IF;
    IF NOT tcols @> ARRAY['valid_from', 'valid_to'] THEN
        RAISE EXCEPTION 'zl_ref: target % needs columns valid_from and valid_to', target;
    END IF;
    IF NOT tcols @> key THEN
        RAISE EXCEPTION 'zl_ref: target % lacks a key column of %', target, key;
    END IF;
    vcols := zl_ref.value_columns(target, key);

    IF NOT ccols @> key THEN
        RAISE EXCEPTION 'zl_ref: changes % lacks a key column of %', changes, key;
    END IF;
    IF missing_columns IS NULL OR missing_columns NOT IN ('error', 'null', 'keep') THEN
        RAISE EXCEPTION 'zl_ref: missing_columns must be error, null or keep, not %', missing_columns;
    END IF;
    IF NOT ccols @> vcols AND missing_columns = 'error' THEN
        RAISE EXCEPTION 'zl_ref: changes % lacks a value column of %', changes, vcols;
    END IF;
    IF NOT change_time::text = ANY (ccols) THEN
        RAISE EXCEPTION 'zl_ref: changes % has no change-time column %', changes, change_time;
    END IF;
    IF seq IS NOT NULL AND NOT seq::text = ANY (ccols) THEN
        RAISE EXCEPTION 'zl_ref: changes % has no seq column %', changes, seq;
    END IF;
    has_op := op IS NOT NULL AND op::text = ANY (ccols);

    kl := zl_ref.col_list(key);
    vl := zl_ref.col_list(vcols);
    FOR i IN 1 .. cardinality(tcols) LOOP
        IF tcols[i] = ANY (vcols) AND NOT tcols[i] = ANY (ccols) THEN
            -- a value column the changes lack: NULL, kept with 'keep'
            casts := casts || format('NULL::%s AS %I, ', ttypes[i], tcols[i]);
            IF missing_columns = 'keep' THEN
                keeps := keeps || quote_literal(tcols[i]);
            END IF;
        ELSIF tcols[i] = ANY (key || vcols) THEN
            casts := casts || format('ch.%I::%s AS %I, ', tcols[i], ttypes[i], tcols[i]);
            IF tcols[i] = ANY (vcols) AND ignore_nulls THEN
                keeps := keeps || format('CASE WHEN ch.%I IS NULL THEN %L END', tcols[i], tcols[i]);
            END IF;
        END IF;
    END LOOP;

    ---------------------------------------------- validate and normalize
    DROP TABLE IF EXISTS pg_temp.zl_ref_raw, pg_temp.zl_ref_batch;

    EXECUTE format(
        'CREATE TEMP TABLE zl_ref_raw AS
         SELECT %s ch.%I::timestamptz AS zl_time, %s AS zl_op, %s AS zl_seq,
                array_remove(ARRAY[%s]::text[], NULL) AS zl_keep
         FROM %s ch',
        casts, change_time,
        CASE WHEN has_op THEN format('ch.%I::text', op) ELSE 'NULL::text' END,
        CASE WHEN seq IS NULL THEN 'NULL::bigint' ELSE format('ch.%I::bigint', seq) END,
        array_to_string(keeps, ', '),
        changes);

    EXECUTE format('SELECT ROW(%s)::text AS k, zl_time FROM zl_ref_raw WHERE %s LIMIT 1',
                   kl, (SELECT string_agg(format('%I IS NULL', c), ' OR ') FROM unnest(key) AS c))
       INTO bad;
    GET DIAGNOSTICS cnt = ROW_COUNT;
    IF cnt > 0 THEN
        RAISE EXCEPTION 'zl_ref: NULL key column in change % at %', bad.k, bad.zl_time;
    END IF;
    EXECUTE format('SELECT ROW(%s)::text AS k, zl_time FROM zl_ref_raw
                    WHERE zl_time IS NULL OR NOT isfinite(zl_time) OR zl_time >= $1 LIMIT 1', kl)
       INTO bad USING open_end;
    GET DIAGNOSTICS cnt = ROW_COUNT;
    IF cnt > 0 THEN
        RAISE EXCEPTION 'zl_ref: change for key % has NULL, infinite or too late change time %',
            bad.k, coalesce(bad.zl_time::text, 'NULL');
    END IF;
    EXECUTE format('SELECT ROW(%s)::text AS k, zl_time, zl_op FROM zl_ref_raw
                    WHERE zl_ref.op_is_upsert(zl_op) IS NULL LIMIT 1', kl)
       INTO bad;
    GET DIAGNOSTICS cnt = ROW_COUNT;
    IF cnt > 0 THEN
        RAISE EXCEPTION 'zl_ref: change for key % at % has unknown op "%"',
            bad.k, bad.zl_time, bad.zl_op;
    END IF;

    -- Normalized, duplicate-free changes.  A delete carries no value.
    EXECUTE format(
        'CREATE TEMP TABLE zl_ref_batch AS
         SELECT row_number() OVER (ORDER BY %s, zl_time, zl_seq) AS zl_ord,
                dense_rank() OVER (ORDER BY %s) AS zl_key_no,
                d.*
         FROM (SELECT DISTINCT %s, %s zl_time, zl_upsert, zl_seq, zl_keep
               FROM (SELECT %s, %s zl_time, zl_ref.op_is_upsert(zl_op) AS zl_upsert, zl_seq,
                            CASE WHEN zl_ref.op_is_upsert(zl_op) THEN zl_keep ELSE ''{}'' END AS zl_keep
                     FROM zl_ref_raw) r) d',
        kl, kl, kl,
        CASE WHEN vl = '' THEN '' ELSE vl || ',' END,
        kl,
        (SELECT coalesce(string_agg(format('CASE WHEN zl_ref.op_is_upsert(zl_op) THEN %I END AS %I', c, c) || ', ', ''), '')
           FROM unnest(vcols) AS c));
    EXECUTE 'CREATE INDEX ON zl_ref_batch (zl_ord)';
    EXECUTE 'CREATE INDEX ON zl_ref_batch (zl_key_no)';
    EXECUTE 'ANALYZE zl_ref_batch';

    -- Two different changes for one key and instant need a seq to order them.
    EXECUTE format('SELECT ROW(%s)::text AS k, zl_time FROM zl_ref_batch
                    GROUP BY %s, zl_time, zl_seq HAVING count(*) > 1 LIMIT 1', kl, kl)
       INTO bad;
    GET DIAGNOSTICS cnt = ROW_COUNT;
    IF cnt > 0 THEN
        RAISE EXCEPTION 'zl_ref: different changes for key % at % cannot be ordered%',
            bad.k, bad.zl_time,
            CASE WHEN seq IS NULL THEN ' (no seq column)' ELSE ' (equal seq)' END;
    END IF;

    EXECUTE 'SELECT count(*) FROM zl_ref_raw' INTO cnt;
    DROP TABLE pg_temp.zl_ref_raw;
    RETURN cnt;
END
$fn$;

CREATE FUNCTION zl_ref.apply_changes(
    target regclass,
    changes regclass,
    key text[],
    change_time name DEFAULT 'change_time',
    op name DEFAULT 'op',
    seq name DEFAULT NULL,
    open_end timestamptz DEFAULT 'infinity')
RETURNS zl_ref.counts
LANGUAGE plpgsql
SET client_min_messages = warning     -- quiet DROP TABLE IF EXISTS
SET jit = off                        -- thousands of tiny queries
SET TimeZone = 'UTC'                 -- timestamp/date <-> timestamptz without DST
AS $fn$
DECLARE
    tcols   text[];     -- all target columns, in attribute order
    vcols   text[];     -- value columns: all but key and period columns
    kl      text;       -- key column list
    same    text;       -- "x's values IS NOT DISTINCT FROM y's values"
    nkeys   bigint;
    ch      record;     -- one change: zl_ord, zl_time (t), zl_upsert
    a       timestamptz;    -- start of the version containing t
    b       timestamptz;    -- its end
    n       timestamptz;    -- start of the next version (upsert into a gap)
    equal   boolean;        -- that version already has the change's value
    inside  boolean;
    x_from  timestamptz;
    y_from  timestamptz;
    y_to    timestamptz;
    newest  timestamptz;    -- valid_from of the key's newest version
    cnt     bigint;
    res     zl_ref.counts := ROW(0, 0, 0, 0, 0, 0);
BEGIN
    ------------------------------------------------- 1. normalize the batch
    res.changes := zl_ref.normalize_batch(target, changes, key, change_time, op, seq, open_end);
    -- every row read counts; identical duplicates collapsed are unchanged
    EXECUTE 'SELECT $1 - count(*) FROM zl_ref_batch' INTO res.unchanged USING res.changes;

    SELECT array_agg(col::text ORDER BY ord) INTO tcols
      FROM zl_ref.columns_of(target) WITH ORDINALITY AS c(col, typ, ord);
    vcols := zl_ref.value_columns(target, key);
    kl := zl_ref.col_list(key);
    same := zl_ref.same_values(vcols);

    EXECUTE 'SELECT max(zl_key_no) FROM zl_ref_batch' INTO nkeys;
    IF nkeys IS NULL THEN       -- empty batch
        DROP TABLE pg_temp.zl_ref_batch;
        RETURN res;
    END IF;

    DROP TABLE IF EXISTS pg_temp.zl_ref_old, pg_temp.zl_ref_cur, pg_temp.zl_ref_new;
    -------------------------------------- 2. take the affected keys' versions out
    EXECUTE format(
        'CREATE TEMP TABLE zl_ref_old AS
         SELECT k.zl_key_no, t.*
         FROM %s t JOIN (SELECT DISTINCT zl_key_no, %s FROM zl_ref_batch) k ON %s',
        target, kl, zl_ref.key_match(key, 't', 'k'));
    EXECUTE 'CREATE INDEX ON zl_ref_old (zl_key_no)';
    EXECUTE 'ANALYZE zl_ref_old';
    EXECUTE format(
        'DELETE FROM %s t USING (SELECT DISTINCT %s FROM zl_ref_batch) k WHERE %s',
        target, kl, zl_ref.key_match(key, 't', 'k'));

    EXECUTE format('CREATE TEMP TABLE zl_ref_cur AS SELECT * FROM %s WITH NO DATA', target);
    EXECUTE format('CREATE TEMP TABLE zl_ref_new AS SELECT * FROM %s WITH NO DATA', target);

    ----------------------------------------------------- 3. key by key, change by change
    -- (every statement on the temp tables is dynamic: their columns differ from
    -- call to call, and no target column can clash with a PL/pgSQL variable)
    FOR k IN 1 .. nkeys LOOP
        EXECUTE format('INSERT INTO zl_ref_cur SELECT %s FROM zl_ref_old WHERE zl_key_no = $1',
                       zl_ref.col_list(tcols))
          USING k;

        -- the rules below assume a well-formed history
        EXECUTE 'SELECT count(*) FROM zl_ref_cur x JOIN zl_ref_cur y
                   ON x.ctid <> y.ctid AND x.valid_from < y.valid_to AND y.valid_from < x.valid_to'
           INTO cnt;
        EXECUTE 'SELECT $1 + count(*) FROM zl_ref_cur WHERE NOT valid_from < valid_to'
           INTO cnt USING cnt;
        IF cnt > 0 THEN
            RAISE EXCEPTION 'zl_ref: target % has overlapping or empty versions', target;
        END IF;

        FOR ch IN EXECUTE 'SELECT zl_ord, zl_time, zl_upsert FROM zl_ref_batch
                           WHERE zl_key_no = $1 ORDER BY zl_ord' USING k
        LOOP
            EXECUTE 'SELECT max(valid_from) FROM zl_ref_cur' INTO newest;
            IF ch.zl_time < newest THEN
                res.late := res.late + 1;
            END IF;

            -- the version containing t, if any, and whether it equals the change
            EXECUTE format(
                'SELECT x.valid_from, x.valid_to, %s
                 FROM zl_ref_cur x, zl_ref_batch y
                 WHERE y.zl_ord = $1 AND x.valid_from <= $2 AND x.valid_to > $2', same)
              INTO a, b, equal
              USING ch.zl_ord, ch.zl_time;
            GET DIAGNOSTICS cnt = ROW_COUNT;
            inside := cnt > 0;

            IF ch.zl_upsert AND inside AND equal THEN
                res.unchanged := res.unchanged + 1;
                CONTINUE;                               -- no-op
            END IF;

            IF inside THEN
                IF b = open_end AND (NOT ch.zl_upsert OR a < ch.zl_time) THEN
                    res.closed := res.closed + 1;       -- the open version ends
                END IF;
                IF NOT ch.zl_upsert THEN
                    res.deleted := res.deleted + 1;
                END IF;
                -- upsert with another value, or delete: [a,t) kept, dropped if a = t
                IF a = ch.zl_time THEN
                    EXECUTE 'DELETE FROM zl_ref_cur WHERE valid_from = $1' USING a;
                ELSE
                    EXECUTE 'UPDATE zl_ref_cur SET valid_to = $2 WHERE valid_from = $1'
                      USING a, ch.zl_time;
                END IF;
                n := b;                                 -- an upsert fills [t,b)
            ELSIF ch.zl_upsert THEN
                -- gap: an upsert fills [t, next version's start or the open end)
                EXECUTE 'SELECT coalesce(min(valid_from), $2)
                         FROM zl_ref_cur WHERE valid_from > $1'
                  INTO n USING ch.zl_time, open_end;
            ELSE
                res.unchanged := res.unchanged + 1;
                CONTINUE;                               -- delete in a gap: nothing
            END IF;

            IF ch.zl_upsert THEN
                res.inserted := res.inserted + 1;
                EXECUTE format(
                    'INSERT INTO zl_ref_cur (%s, valid_from, valid_to)
                     SELECT %s, $2, $3 FROM zl_ref_batch WHERE zl_ord = $1',
                    zl_ref.col_list(key || vcols), zl_ref.col_list(key || vcols))
                  USING ch.zl_ord, ch.zl_time, n;
            END IF;

            -- merge adjacent versions with equal values until none are left
            LOOP
                EXECUTE format(
                    'SELECT x.valid_from, y.valid_from, y.valid_to
                     FROM zl_ref_cur x JOIN zl_ref_cur y ON x.valid_to = y.valid_from
                     WHERE %s LIMIT 1', same)
                  INTO x_from, y_from, y_to;
                GET DIAGNOSTICS cnt = ROW_COUNT;
                EXIT WHEN cnt = 0;
                EXECUTE 'DELETE FROM zl_ref_cur WHERE valid_from = $1' USING y_from;
                EXECUTE 'UPDATE zl_ref_cur SET valid_to = $2 WHERE valid_from = $1'
                  USING x_from, y_to;
            END LOOP;
        END LOOP;

        EXECUTE 'INSERT INTO zl_ref_new SELECT * FROM zl_ref_cur';
        -- TRUNCATE, not DELETE: dead rows would pile up over all keys in this
        -- never-vacuumed temp table and make every statement above slower
        EXECUTE 'TRUNCATE zl_ref_cur';
    END LOOP;

    ---------------------------------------------------------- 4. put them back
    EXECUTE format('INSERT INTO %s SELECT * FROM zl_ref_new', target);

    DROP TABLE pg_temp.zl_ref_batch, pg_temp.zl_ref_old, pg_temp.zl_ref_cur, pg_temp.zl_ref_new;
    RETURN res;
END
$fn$;

COMMENT ON FUNCTION zl_ref.apply_changes(regclass, regclass, text[], name, name, name, timestamptz) IS
'one batch applied to the history stored in a heap table, change by change (test use only)';
