/* zipper_lake 0.1: zipper tables in their own table access method */

\echo Use "CREATE EXTENSION zipper_lake" to load this file. \quit

-- ---------------------------------------------------------------------------
-- The table access method
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake.tableam_handler(internal)
RETURNS table_am_handler
AS 'MODULE_PATHNAME', 'zipper_lake_tableam_handler'
LANGUAGE C;

CREATE ACCESS METHOD zipper_lake TYPE TABLE HANDLER zipper_lake.tableam_handler;
COMMENT ON ACCESS METHOD zipper_lake IS 'end-date partitioned valid-time (zipper) tables';

-- ---------------------------------------------------------------------------
-- Metadata (see src/zl_metadata.c).  Only the extension owner writes it;
-- the access method and the functions write it on the caller's behalf.
-- ---------------------------------------------------------------------------

CREATE SEQUENCE zipper_lake.id_seq;

CREATE TABLE zipper_lake.registration (
    tbl                 regclass PRIMARY KEY,
    key                 name[] NOT NULL,
    valid_from          name NOT NULL,
    valid_to            name NOT NULL,
    partition_unit      text NOT NULL,
    history_group_span  interval NOT NULL,
    current_group_span  interval NOT NULL,
    max_subgroups       int NOT NULL,
    open_end            timestamptz NOT NULL,
    time_zone           text NOT NULL
);
-- registrations survive pg_dump; storage metadata is rebuilt by reloading rows
SELECT pg_catalog.pg_extension_config_dump('zipper_lake.registration', '');

-- one row per relfilenode of a zipper table (the metapage holds storage_id)
CREATE TABLE zipper_lake.storage (
    storage_id  bigint PRIMARY KEY,
    relid       oid NOT NULL
);
CREATE INDEX storage_relid_idx ON zipper_lake.storage (relid);

-- one row per immutable sub-group; partition_end NULL = not placed yet
CREATE TABLE zipper_lake.subgroup (
    storage_id      bigint NOT NULL,
    subgroup_id     bigint NOT NULL,
    file_group      bigint NOT NULL,
    rollover_seq    int NOT NULL,
    partition_end   date,
    window_start    timestamptz,
    first_start     timestamptz,
    last_start      timestamptz,
    row_count       bigint NOT NULL,
    first_block     bigint NOT NULL,
    blocks          int NOT NULL,
    key_directory   bytea,          -- current partition: sorted (key hash, position) pairs
    PRIMARY KEY (storage_id, subgroup_id)
);
-- random hashes do not compress: store out of line without trying
ALTER TABLE zipper_lake.subgroup ALTER COLUMN key_directory SET STORAGE EXTERNAL;
CREATE INDEX subgroup_pruning_idx
    ON zipper_lake.subgroup (storage_id, partition_end, first_start);
CREATE INDEX subgroup_window_idx
    ON zipper_lake.subgroup (storage_id, partition_end, window_start);

-- append-only deletion masks: row positions of a sub-group, one row per statement
CREATE TABLE zipper_lake.mask (
    storage_id   bigint NOT NULL,
    subgroup_id  bigint NOT NULL,
    positions    int[] NOT NULL   -- row positions (see src/zl_scan.c)
);
CREATE INDEX mask_subgroup_idx ON zipper_lake.mask (storage_id, subgroup_id);

-- block ranges of deleted sub-groups (see src/zl_freespace.c): reusable once
-- no snapshot can still see the sub-group that transaction freed_by deleted
CREATE TABLE zipper_lake.free_extent (
    storage_id   bigint NOT NULL,
    first_block  bigint NOT NULL,
    blocks       int NOT NULL CHECK (blocks > 0),
    freed_by     xid8 NOT NULL,
    PRIMARY KEY (storage_id, first_block)
);

-- registrations are configuration, readable by all; sub-group metadata holds
-- start times of the data, so it is read through inspect(), which checks
-- the caller's SELECT privilege on the table
REVOKE ALL ON zipper_lake.registration, zipper_lake.storage,
              zipper_lake.subgroup, zipper_lake.mask, zipper_lake.free_extent FROM PUBLIC;
GRANT SELECT ON zipper_lake.registration TO PUBLIC;
REVOKE ALL ON SEQUENCE zipper_lake.id_seq FROM PUBLIC;
GRANT USAGE ON SCHEMA zipper_lake TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Registration
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake._register(tbl regclass, key name[], valid_from name,
    valid_to name, partition_unit text, history_group_span interval,
    current_group_span interval, max_subgroups int, open_end timestamptz,
    time_zone text)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_register_row'
LANGUAGE C;

CREATE FUNCTION zipper_lake._place_unplaced()
RETURNS trigger
AS 'MODULE_PATHNAME', 'zipper_lake_place_unplaced_trigger'
LANGUAGE C;

REVOKE ALL ON FUNCTION zipper_lake._place_unplaced() FROM PUBLIC;

CREATE TRIGGER registration_places_rows
    AFTER INSERT ON zipper_lake.registration
    FOR EACH ROW EXECUTE FUNCTION zipper_lake._place_unplaced();

CREATE FUNCTION zipper_lake._storage_id(tbl regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_storage_id'
LANGUAGE C STRICT;

CREATE FUNCTION zipper_lake.register(
    tbl regclass,
    key text[],
    valid_from name DEFAULT 'valid_from',
    valid_to name DEFAULT 'valid_to',
    partition_unit text DEFAULT 'day',
    history_group_span interval DEFAULT '1 day',
    current_group_span interval DEFAULT '1 day',
    max_subgroups int DEFAULT 32,
    open_end timestamptz DEFAULT 'infinity',
    time_zone text DEFAULT 'UTC')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    am name;
    col text;
    from_type regtype;
    to_type regtype;
    span interval;
BEGIN
    SELECT a.amname INTO am FROM pg_class c JOIN pg_am a ON a.oid = c.relam
     WHERE c.oid = tbl;
    IF am IS DISTINCT FROM 'zipper_lake' THEN
        RAISE EXCEPTION 'table % does not use the zipper_lake access method', tbl
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = format('Its access method is %s.', coalesce(am::text, 'none')),
                  HINT = 'Create it with CREATE TABLE ... USING zipper_lake, or with zipper_lake.create_table().';
    END IF;
    IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Only the owner of a table registers it.';
    END IF;
    IF EXISTS (SELECT 1 FROM zipper_lake.registration r WHERE r.tbl = register.tbl) THEN
        RAISE EXCEPTION 'table % is already registered', tbl
            USING ERRCODE = 'duplicate_object',
                  HINT = 'A table is registered once, when it is created.';
    END IF;
    IF key IS NULL OR cardinality(key) = 0 THEN
        RAISE EXCEPTION 'key of table % is empty', tbl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the business key columns, e.g. key => ARRAY[''id''].';
    END IF;
    IF (SELECT count(DISTINCT k) FROM unnest(key) k) <> cardinality(key) THEN
        RAISE EXCEPTION 'key of table % names a column twice', tbl
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Key is %s.', key::text),
                  HINT = 'List each key column once.';
    END IF;
    FOREACH col IN ARRAY key || ARRAY[valid_from::text, valid_to::text] LOOP
        IF col IS NULL OR NOT EXISTS (SELECT 1 FROM pg_attribute
                       WHERE attrelid = tbl AND attname = col AND attnum > 0
                         AND NOT attisdropped) THEN
            RAISE EXCEPTION 'column "%" of table % does not exist', col, tbl
                USING ERRCODE = 'undefined_column',
                      HINT = 'Name existing columns for the key and the period.';
        END IF;
    END LOOP;
    IF valid_from = valid_to OR valid_from::text = ANY (key) OR valid_to::text = ANY (key) THEN
        RAISE EXCEPTION 'period columns of table % must be two columns outside the key', tbl
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Key is %s, valid_from is %s, valid_to is %s.', key::text, valid_from, valid_to),
                  HINT = 'Use distinct columns for valid_from and valid_to.';
    END IF;
    SELECT atttypid::regtype INTO from_type FROM pg_attribute WHERE attrelid = tbl AND attname = valid_from;
    SELECT atttypid::regtype INTO to_type FROM pg_attribute WHERE attrelid = tbl AND attname = valid_to;
    IF from_type <> to_type OR from_type NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
        RAISE EXCEPTION 'period columns of table % have unsupported types', tbl
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = format('Column %s is %s and column %s is %s.', valid_from, from_type, valid_to, to_type),
                  HINT = 'Both period columns must be timestamptz, both timestamp or both date.';
    END IF;
    IF partition_unit IS NULL OR partition_unit NOT IN ('day', 'month', 'year') THEN
        RAISE EXCEPTION 'invalid partition unit "%"', partition_unit
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''day'', ''month'' or ''year''.';
    END IF;
    FOREACH span IN ARRAY ARRAY[history_group_span, current_group_span] LOOP
        IF span IS NULL OR span <= interval '0'
           OR (extract(month FROM span) <> 0 OR extract(year FROM span) <> 0)
              AND span <> justify_days(date_trunc('month', span))
           OR (extract(month FROM span) <> 0 OR extract(year FROM span) <> 0) AND (extract(day FROM span) <> 0 OR span::time <> '00:00')
           OR span < interval '0' THEN
            RAISE EXCEPTION 'invalid group span "%"', span
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A group span is a positive number of months or years, or a positive length in days and time, not both.';
        END IF;
    END LOOP;
    IF max_subgroups IS NULL OR max_subgroups < 1 THEN
        RAISE EXCEPTION 'invalid max_subgroups %', max_subgroups
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A file group holds at least one sub-group.';
    END IF;
    IF open_end IS NULL OR open_end = '-infinity' THEN
        RAISE EXCEPTION 'invalid open end %', open_end
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''infinity'' or a far-future time such as ''9999-12-31''.';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'invalid time zone "%"', time_zone
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('%s is not in pg_timezone_names (abbreviations such as CEST are not time zones).', time_zone),
                  HINT = 'Use a name from pg_timezone_names, such as ''UTC'' or ''Asia/Shanghai''.';
    END IF;
    -- timestamp and date tables keep the open end as its wall-clock value at
    -- UTC, so it reads the same whatever the session's TimeZone
    IF from_type <> 'timestamptz'::regtype AND isfinite(open_end) THEN
        open_end := CASE WHEN from_type = 'date'::regtype
                         THEN (open_end::date)::timestamp
                         ELSE open_end::timestamp END AT TIME ZONE 'UTC';
    END IF;

    PERFORM zipper_lake._register(tbl, key::name[], valid_from, valid_to,
        partition_unit, history_group_span, current_group_span, max_subgroups,
        open_end, time_zone);
END
$$;

CREATE FUNCTION zipper_lake._create_table(
    qualified_name text[], source regclass, valid_from name, valid_to name,
    partition_unit text, history_group_span interval, current_group_span interval,
    max_subgroups int, open_end timestamptz, time_zone text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key text[];
    qualified text;
    created regclass;
BEGIN
    SELECT array_agg(a.attname::text ORDER BY k.ord) INTO key
      FROM pg_constraint c
      CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
     WHERE c.conrelid = source AND c.contype = 'p';
    IF key IS NULL THEN
        RAISE EXCEPTION 'source table % has no primary key', source
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'Add a primary key to the source, or create the table yourself and call zipper_lake.register().';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = source AND attnum > 0
                  AND NOT attisdropped AND attname IN (valid_from, valid_to)) THEN
        RAISE EXCEPTION 'source table % already has a column named % or %', source, valid_from, valid_to
            USING ERRCODE = 'duplicate_column',
                  HINT = 'Pass other period column names with valid_from => and valid_to =>.';
    END IF;
    SELECT string_agg(quote_ident(part), '.') INTO qualified FROM unnest(qualified_name) part;

    EXECUTE format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING COMMENTS,'
                   ' %I timestamptz NOT NULL, %I timestamptz NOT NULL) USING zipper_lake',
                   qualified, source, valid_from, valid_to);
    created := qualified::regclass;
    PERFORM zipper_lake.register(created, key, valid_from, valid_to, partition_unit,
        history_group_span, current_group_span, max_subgroups, open_end, time_zone);
    RETURN created;
END
$$;

-- resolves an unqualified name in the caller's schema, then creates safely
CREATE FUNCTION zipper_lake.create_table(
    name text,
    source regclass,
    valid_from name DEFAULT 'valid_from',
    valid_to name DEFAULT 'valid_to',
    partition_unit text DEFAULT 'day',
    history_group_span interval DEFAULT '1 day',
    current_group_span interval DEFAULT '1 day',
    max_subgroups int DEFAULT 32,
    open_end timestamptz DEFAULT 'infinity',
    time_zone text DEFAULT 'UTC')
RETURNS regclass
LANGUAGE sql
AS $$
    SELECT zipper_lake._create_table(
        CASE WHEN pg_catalog.cardinality(pg_catalog.parse_ident(name)) = 1
             THEN ARRAY[pg_catalog.current_schema()::text] || pg_catalog.parse_ident(name)
             ELSE pg_catalog.parse_ident(name) END,
        source, valid_from, valid_to, partition_unit, history_group_span,
        current_group_span, max_subgroups, open_end, time_zone)
$$;

-- ---------------------------------------------------------------------------
-- Inspecting
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake.inspect(tbl regclass)
RETURNS TABLE (partition_end date, file_group bigint, sub_group bigint,
               window_start timestamptz, first_start timestamptz,
               last_start timestamptz, row_count bigint, masked_rows bigint,
               first_block bigint, blocks int)
AS 'MODULE_PATHNAME', 'zipper_lake_inspect'
LANGUAGE C STRICT STABLE;

CREATE FUNCTION zipper_lake._verify_storage(tbl regclass)
RETURNS TABLE (check_name text, detail text)
AS 'MODULE_PATHNAME', 'zipper_lake_verify_storage'
LANGUAGE C STRICT;

-- blocks written by aborted transactions become free extents (owner only)
CREATE FUNCTION zipper_lake.reclaim(tbl regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_reclaim'
LANGUAGE C STRICT;

CREATE FUNCTION zipper_lake.verify(tbl regclass)
RETURNS TABLE (check_name text, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reg zipper_lake.registration;
    keys text;
    period_type regtype;
    open_end text;
BEGIN
    RETURN QUERY SELECT * FROM zipper_lake._verify_storage(tbl);
    SELECT * INTO reg FROM zipper_lake.registration r WHERE r.tbl = verify.tbl;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT string_agg(quote_ident(k), ', ') INTO keys FROM unnest(reg.key) k;
    -- the open end in the column's own type (register() keeps timestamp and
    -- date open ends as their wall-clock value at UTC)
    SELECT atttypid::regtype INTO period_type FROM pg_attribute
     WHERE attrelid = tbl AND attname = reg.valid_to;
    open_end := CASE WHEN period_type = 'timestamptz'::regtype
                     THEN format('%L::timestamptz', reg.open_end)
                     ELSE format('%L::%s', (reg.open_end AT TIME ZONE 'UTC')::text, period_type) END;

    RETURN QUERY EXECUTE format(
        'SELECT ''overlapping versions''::text,'
        '       format(''Key (%%s)=(%%s) has [%%s, %%s) and a version from %%s.'', %L, row(%s)::text, f, t, next_f)'
        '  FROM (SELECT %s, %I AS f, %I AS t,'
        '               lead(%I) OVER (PARTITION BY %s ORDER BY %I) AS next_f'
        '          FROM %s) v'
        ' WHERE next_f < t',
        keys, keys, keys, reg.valid_from, reg.valid_to, reg.valid_from, keys,
        reg.valid_from, tbl);
    RETURN QUERY EXECUTE format(
        'SELECT ''several open versions''::text,'
        '       format(''Key (%%s)=(%%s) has %%s open versions.'', %L, row(%s)::text, n)'
        '  FROM (SELECT %s, count(*) AS n FROM %s WHERE %I = %s'
        '         GROUP BY %s HAVING count(*) > 1) v',
        keys, keys, keys, tbl, reg.valid_to, open_end, keys);
END
$$;

-- ---------------------------------------------------------------------------
-- Cleanup of dropped tables
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake._drop_metadata()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    dropped oid;
BEGIN
    FOR dropped IN SELECT objid FROM pg_event_trigger_dropped_objects()
                    WHERE classid = 'pg_class'::regclass AND objsubid = 0 LOOP
        DELETE FROM zipper_lake.mask m USING zipper_lake.storage s
         WHERE m.storage_id = s.storage_id AND s.relid = dropped;
        DELETE FROM zipper_lake.subgroup g USING zipper_lake.storage s
         WHERE g.storage_id = s.storage_id AND s.relid = dropped;
        DELETE FROM zipper_lake.free_extent f USING zipper_lake.storage s
         WHERE f.storage_id = s.storage_id AND s.relid = dropped;
        DELETE FROM zipper_lake.storage WHERE relid = dropped;
        DELETE FROM zipper_lake.registration WHERE tbl = dropped;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION zipper_lake._drop_metadata() FROM PUBLIC;

CREATE EVENT TRIGGER zipper_lake_drop_metadata ON sql_drop
    EXECUTE FUNCTION zipper_lake._drop_metadata();

-- registered key and period columns may not be renamed, dropped or retyped
CREATE FUNCTION zipper_lake._check_registered_columns()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reg zipper_lake.registration;
    col name;
BEGIN
    -- the altered tables and, as ALTER TABLE recurses, every table inheriting from them
    FOR reg IN WITH RECURSIVE altered(relid) AS (
                   SELECT objid FROM pg_event_trigger_ddl_commands()
                    WHERE classid = 'pg_class'::regclass
                   UNION
                   SELECT i.inhrelid FROM pg_inherits i JOIN altered a ON i.inhparent = a.relid)
               SELECT r.* FROM zipper_lake.registration r JOIN altered a ON a.relid = r.tbl LOOP
        FOREACH col IN ARRAY reg.key || ARRAY[reg.valid_from, reg.valid_to] LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_attribute
                            WHERE attrelid = reg.tbl AND attname = col AND NOT attisdropped) THEN
                RAISE EXCEPTION 'column "%" of zipper table % is registered', col, reg.tbl
                    USING ERRCODE = 'dependent_objects_still_exist',
                          DETAIL = 'Key and period columns are named in zipper_lake.registration.',
                          HINT = 'Keep the key and period columns as they are; add or change other columns.';
            END IF;
        END LOOP;
    END LOOP;
END
$$;

CREATE EVENT TRIGGER zipper_lake_registered_columns ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION zipper_lake._check_registered_columns();

-- ---------------------------------------------------------------------------
-- Applying changes (see src/zl_apply.c)
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake.apply_changes(
    tbl regclass,
    changes regclass,
    change_time name DEFAULT 'change_time',
    op name DEFAULT 'op',
    seq name DEFAULT NULL)
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_changes'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION zipper_lake.apply_snapshot(
    tbl regclass,
    snapshot regclass,
    snapshot_time timestamptz,
    deletes boolean DEFAULT true)
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_snapshot'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------
-- Reading (see src/zl_read.c); NULL::table names the table and the row type
-- ---------------------------------------------------------------------------

-- the NULL check of the helpers' time arguments, kept when they are inlined
CREATE FUNCTION zipper_lake._time_arg(t timestamptz, what text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'zipper_lake_time_arg'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION zipper_lake.as_of(tbl anyelement, at timestamptz)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'zipper_lake_as_of'
LANGUAGE C STABLE;

CREATE FUNCTION zipper_lake.current(tbl anyelement)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'zipper_lake_current'
LANGUAGE C STABLE;

CREATE FUNCTION zipper_lake.changes(tbl anyelement, from_time timestamptz, to_time timestamptz)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'zipper_lake_changes'
LANGUAGE C STABLE;
