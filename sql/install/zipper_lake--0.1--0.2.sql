/* zipper_lake 0.1 -> 0.2 (cumulative; a fresh CREATE EXTENSION runs 0.1 then this) */

\echo Use "ALTER EXTENSION zipper_lake UPDATE TO '0.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- register(): every check in C (src/api/zl_register.c), one place; the 0.1
-- PL/pgSQL validator and its internal _register() go.
-- ---------------------------------------------------------------------------

-- late_horizon (README "Late data") is new: a new signature
DROP FUNCTION zipper_lake.register(regclass, text[], name, name, text, interval,
    interval, int, timestamptz, text);
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
    time_zone text DEFAULT 'UTC',
    late_horizon interval DEFAULT NULL,
    track_columns text[] DEFAULT NULL,
    history_format text DEFAULT 'columnar')
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_register'
LANGUAGE C;

DROP FUNCTION zipper_lake._register(regclass, name[], name, name, text, interval,
    interval, int, timestamptz, text);

-- create_table(): in C too (src/api/zl_create.c).  A NULL option means
-- register()'s default, and only the options given are passed on, so
-- register()'s signature is the one place defaults are written.  It names
-- everything qualified: 0.1's SQL version let an operator a user put in
-- public run with the rights of whoever called it.
DROP FUNCTION zipper_lake._create_table(text[], regclass, name, name, text, interval,
    interval, int, timestamptz, text);
DROP FUNCTION zipper_lake.create_table(text, regclass, name, name, text, interval,
    interval, int, timestamptz, text);
CREATE FUNCTION zipper_lake.create_table(
    name text,
    source regclass,
    valid_from name DEFAULT NULL,
    valid_to name DEFAULT NULL,
    partition_unit text DEFAULT NULL,
    history_group_span interval DEFAULT NULL,
    current_group_span interval DEFAULT NULL,
    max_subgroups int DEFAULT NULL,
    open_end timestamptz DEFAULT NULL,
    time_zone text DEFAULT NULL,
    late_horizon interval DEFAULT NULL,
    track_columns text[] DEFAULT NULL,
    history_format text DEFAULT NULL,
    partitions int DEFAULT NULL)      -- README "Scaling out"
RETURNS regclass
AS 'MODULE_PATHNAME', 'zipper_lake_create_table'
LANGUAGE C;

-- ---------------------------------------------------------------------------
-- apply_changes(): op => NULL means "the column op if the changes have one";
-- a column named explicitly must exist.
-- apply_snapshot(): an empty image is an error unless allow_empty => true.
-- Both: ignore_nulls and missing_columns (README "Partial changes").
-- ---------------------------------------------------------------------------

DROP FUNCTION zipper_lake.apply_changes(regclass, regclass, name, name, name);
CREATE FUNCTION zipper_lake.apply_changes(
    tbl regclass,
    changes regclass,
    change_time name DEFAULT 'change_time',
    op name DEFAULT NULL,
    seq name DEFAULT NULL,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_changes_v2'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

DROP FUNCTION zipper_lake.apply_snapshot(regclass, regclass, timestamptz, boolean);
CREATE FUNCTION zipper_lake.apply_snapshot(
    tbl regclass,
    snapshot regclass,
    snapshot_time timestamptz,
    deletes boolean DEFAULT true,
    allow_empty boolean DEFAULT false,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_snapshot_v2'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------
-- verify(): reads only the table itself, not its inheritance children, and
-- reports adjacent versions with equal values (0.1 loaded them unmerged)
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION zipper_lake.verify(tbl regclass)
RETURNS TABLE (check_name text, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reg zipper_lake.registration;
    keys text;
    period_type regtype;
    open_end text;
    value_cols text;
    value_equal text;
    value_lags text;
    key_texts text;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = tbl) = 'p' THEN
        -- a zipper parent (README "Scaling out"): every leaf, named first
        -- (a shard, a foreign partition, is verified on its server)
        RETURN QUERY SELECT 'partition not registered'::text, format('Partition %s.', i.inhrelid::regclass)
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = tbl
           AND c.relkind <> 'f'
           AND NOT EXISTS (SELECT FROM zipper_lake.registration r WHERE r.tbl = i.inhrelid);
        RETURN QUERY SELECT v.check_name, format('%s: %s', i.inhrelid::regclass, v.detail)
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
               zipper_lake.verify(i.inhrelid::regclass) v
         WHERE i.inhparent = tbl
           AND (c.relkind = 'f' OR EXISTS (SELECT FROM zipper_lake.registration r WHERE r.tbl = i.inhrelid));
        RETURN;
    END IF;
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = tbl) = 'f' THEN
        RETURN QUERY SELECT * FROM zipper_lake._verify_storage(tbl);
        RETURN;
    END IF;
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
        '       format(''Key (%%s)=%%s has [%%s, %%s) and a version from %%s.'', %L, row(%s)::text,'
        '              zl_f, zl_t, zl_next_f)'
        '  FROM (SELECT %s, %I AS zl_f, %I AS zl_t,'
        '               lead(%I) OVER (PARTITION BY %s ORDER BY %I) AS zl_next_f'
        '          FROM ONLY %s) v'
        ' WHERE zl_next_f < zl_t',
        keys, keys, keys, reg.valid_from, reg.valid_to, reg.valid_from, keys,
        reg.valid_from, tbl);
    RETURN QUERY EXECUTE format(
        'SELECT ''several open versions''::text,'
        '       format(''Key (%%s)=%%s has %%s open versions.'', %L, row(%s)::text, zl_n)'
        '  FROM (SELECT %s, count(*) AS zl_n FROM ONLY %s WHERE %I = %s'
        '         GROUP BY %s HAVING count(*) > 1) v',
        keys, keys, keys, tbl, reg.valid_to, open_end, keys);

    -- adjacent versions of a key with equal values never occur: every value
    -- column compared with the type's = where the type has one, else as text
    -- (aliases zl_* keep clear of the table's own column names)
    SELECT string_agg(format('%I', a.attname), ', ' ORDER BY a.attnum),
           string_agg(CASE WHEN to_regoperator(format('=(%s,%s)', a.atttypid::regtype, a.atttypid::regtype)) IS NOT NULL
                           THEN format('%1$I IS NOT DISTINCT FROM zl_prev_%2$s', a.attname, a.attnum)
                           ELSE format('%1$I::text IS NOT DISTINCT FROM zl_prev_%2$s::text', a.attname, a.attnum) END,
                      ' AND ' ORDER BY a.attnum),
           string_agg(format('lag(%I) OVER zl_w AS zl_prev_%s', a.attname, a.attnum), ', ' ORDER BY a.attnum)
      INTO value_cols, value_equal, value_lags
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND a.attname <> ALL (reg.key) AND a.attname NOT IN (reg.valid_from, reg.valid_to);
    RETURN QUERY EXECUTE format(
        'SELECT ''adjacent equal versions''::text,'
        '       format(''Key (%%s)=%%s has [%%s, %%s) and [%%s, %%s) with equal values.'', %L, row(%s)::text,'
        '              zl_prev_from, zl_from, zl_from, zl_to)'
        '  FROM (SELECT %s, %I AS zl_from, %I AS zl_to, lag(%I) OVER zl_w AS zl_prev_from,'
        '               lag(%I) OVER zl_w AS zl_prev_to%s%s%s%s'
        '          FROM ONLY %s WINDOW zl_w AS (PARTITION BY %s ORDER BY %I)) zl_rows'
        ' WHERE zl_prev_to = zl_from%s',
        keys, keys, keys, reg.valid_from, reg.valid_to, reg.valid_from, reg.valid_to,
        CASE WHEN value_cols IS NULL THEN '' ELSE ', ' END, coalesce(value_cols, ''),
        CASE WHEN value_cols IS NULL THEN '' ELSE ', ' END, coalesce(value_lags, ''),
        tbl, keys, reg.valid_from,
        CASE WHEN value_equal IS NULL THEN '' ELSE ' AND ' || value_equal END);

    -- the change record against the versions (README "Change semantics"):
    -- a remembered upsert lies inside a version of its key, a remembered
    -- delete in a gap
    SELECT string_agg(format('%I::text', k), ', ') INTO key_texts FROM unnest(reg.key) k;
    RETURN QUERY EXECUTE format(
        'SELECT ''change record contradicts versions''::text,'
        '       format(''Key (%%s)=(%%s): the change record remembers %%s at %%s, but %%s.'', %L,'
        '              array_to_string(r.key, '', ''),'
        '              CASE WHEN r.is_delete THEN ''a delete'' ELSE ''an upsert'' END, r.instant,'
        '              CASE WHEN r.is_delete THEN ''a version holds that instant'''
        '                   ELSE ''no version holds it'' END)'
        '  FROM zipper_lake._record_instants(%L) WITH ORDINALITY r'
        '  LEFT JOIN (SELECT ARRAY[%s] AS zl_key, %I AS zl_from, %I AS zl_to FROM ONLY %s) v'
        '    ON v.zl_key = r.key AND v.zl_from <= r.instant::%s AND r.instant::%s < v.zl_to'
        ' GROUP BY r.ordinality, r.key, r.instant, r.is_delete'
        ' HAVING r.is_delete = (count(v.zl_key) > 0)',
        keys, tbl, key_texts, reg.valid_from, reg.valid_to, tbl, period_type, period_type);
END
$$;

-- ---------------------------------------------------------------------------
-- DDL: one C path (src/hooks/zl_ddl.c, an object access hook) forgets the metadata
-- of dropped or converted tables and guards registered columns, whatever the
-- route (also under session_replication_role = replica).  The event trigger
-- below only makes sure the library, and with it the hook, is loaded before
-- any DDL command runs; 0.1's PL/pgSQL event triggers go.
-- ---------------------------------------------------------------------------

DROP EVENT TRIGGER zipper_lake_drop_metadata;
DROP FUNCTION zipper_lake._drop_metadata();
DROP EVENT TRIGGER zipper_lake_registered_columns;
DROP FUNCTION zipper_lake._check_registered_columns();

CREATE FUNCTION zipper_lake._load_hooks()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'zipper_lake_load_hooks'
LANGUAGE C;
REVOKE ALL ON FUNCTION zipper_lake._load_hooks() FROM PUBLIC;

CREATE EVENT TRIGGER zipper_lake_load_hooks ON ddl_command_start
    EXECUTE FUNCTION zipper_lake._load_hooks();
ALTER EVENT TRIGGER zipper_lake_load_hooks ENABLE ALWAYS;
-- at the end of a command: registered columns it dropped without their table
CREATE EVENT TRIGGER zipper_lake_column_drops ON ddl_command_end
    EXECUTE FUNCTION zipper_lake._load_hooks();
ALTER EVENT TRIGGER zipper_lake_column_drops ENABLE ALWAYS;

-- ---------------------------------------------------------------------------
-- Labels: volatility (inspect() and verify() flush the transaction's
-- pending rows first, so they are not STABLE), parallel safety (every
-- function that reads or writes zipper tables runs in the leader only, or
-- not in parallel mode at all), row estimates of set-returning functions;
-- internal functions no user path needs are not executable by PUBLIC
-- (_time_arg() and _verify_storage() are: inlined plans and verify() call
-- them as the querying user).
-- ---------------------------------------------------------------------------

ALTER FUNCTION zipper_lake.register(regclass, text[], name, name, text, interval, interval, int, timestamptz, text, interval, text[], text)
    VOLATILE PARALLEL UNSAFE;
ALTER FUNCTION zipper_lake.create_table(text, regclass, name, name, text, interval, interval, int, timestamptz, text, interval, text[], text, int)
    VOLATILE PARALLEL UNSAFE;
ALTER FUNCTION zipper_lake.apply_changes(regclass, regclass, name, name, name, boolean, text)
    VOLATILE PARALLEL UNSAFE ROWS 1;
ALTER FUNCTION zipper_lake.apply_snapshot(regclass, regclass, timestamptz, boolean, boolean, boolean, text)
    VOLATILE PARALLEL UNSAFE ROWS 1;
-- inspect() tells each sub-group's format and, for columnar ones, its
-- compressed and raw bytes (README "Storage formats")
DROP FUNCTION zipper_lake.inspect(regclass);
CREATE FUNCTION zipper_lake.inspect(tbl regclass)
RETURNS TABLE (partition_end date, file_group bigint, sub_group bigint,
               window_start timestamptz, first_start timestamptz,
               last_start timestamptz, row_count bigint, masked_rows bigint,
               first_block bigint, blocks int, format text,
               compressed_bytes bigint, raw_bytes bigint,
               leaf regclass)      -- README "Scaling out"
AS 'MODULE_PATHNAME', 'zipper_lake_inspect'
LANGUAGE C STRICT;
ALTER FUNCTION zipper_lake.inspect(regclass) VOLATILE PARALLEL UNSAFE ROWS 100;
ALTER FUNCTION zipper_lake._verify_storage(regclass) VOLATILE PARALLEL UNSAFE ROWS 10;
ALTER FUNCTION zipper_lake.verify(regclass) VOLATILE PARALLEL UNSAFE ROWS 10;
ALTER FUNCTION zipper_lake.reclaim(regclass) VOLATILE PARALLEL UNSAFE;
ALTER FUNCTION zipper_lake.as_of(anyelement, timestamptz) STABLE PARALLEL RESTRICTED ROWS 1000;
ALTER FUNCTION zipper_lake.current(anyelement) STABLE PARALLEL RESTRICTED ROWS 1000;
ALTER FUNCTION zipper_lake.changes(anyelement, timestamptz, timestamptz) STABLE PARALLEL RESTRICTED ROWS 1000;
ALTER FUNCTION zipper_lake._time_arg(timestamptz, text) IMMUTABLE PARALLEL SAFE;
ALTER FUNCTION zipper_lake._storage_id(regclass) STABLE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION zipper_lake.tableam_handler(internal) FROM PUBLIC;
REVOKE ALL ON FUNCTION zipper_lake._storage_id(regclass) FROM PUBLIC;

COMMENT ON FUNCTION zipper_lake.register(regclass, text[], name, name, text, interval, interval, int, timestamptz, text, interval, text[], text) IS
    'registers a zipper_lake table: its key, period columns and layout (owner only)';
COMMENT ON FUNCTION zipper_lake.create_table(text, regclass, name, name, text, interval, interval, int, timestamptz, text, interval, text[], text, int) IS
    'creates and registers a zipper table with the columns and primary key of a source table';
COMMENT ON FUNCTION zipper_lake.apply_changes(regclass, regclass, name, name, name, boolean, text) IS
    'applies a batch of changes, each at its own change time, to a zipper table';
COMMENT ON FUNCTION zipper_lake.apply_snapshot(regclass, regclass, timestamptz, boolean, boolean, boolean, text) IS
    'applies a full image of the source taken at a time: changed rows upserted, missing keys deleted';
COMMENT ON FUNCTION zipper_lake.as_of(anyelement, timestamptz) IS
    'the versions valid at a time (valid_from <= at < valid_to)';
COMMENT ON FUNCTION zipper_lake.current(anyelement) IS
    'the open versions';
COMMENT ON FUNCTION zipper_lake.changes(anyelement, timestamptz, timestamptz) IS
    'the versions that began or ended in [from_time, to_time)';
COMMENT ON FUNCTION zipper_lake.inspect(regclass) IS
    'one row per sub-group: partition, file group, window, first/last start, rows, masked rows, blocks';
COMMENT ON FUNCTION zipper_lake.verify(regclass) IS
    'checks the invariants of a zipper table; no rows means healthy';
COMMENT ON FUNCTION zipper_lake.reclaim(regclass) IS
    'makes blocks written by aborted transactions reusable, or leaves trailing ones to VACUUM (owner only)';
COMMENT ON FUNCTION zipper_lake.tableam_handler(internal) IS
    'table access method handler of zipper_lake';
COMMENT ON FUNCTION zipper_lake._time_arg(timestamptz, text) IS
    'internal: the null check of the read helpers'' time arguments, kept when they are inlined';
COMMENT ON FUNCTION zipper_lake._verify_storage(regclass) IS
    'internal: the storage checks of verify()';
COMMENT ON FUNCTION zipper_lake._storage_id(regclass) IS
    'internal: the storage id in a zipper table''s metapage';
COMMENT ON FUNCTION zipper_lake._place_unplaced() IS
    'internal: places rows loaded before a table was registered';
COMMENT ON FUNCTION zipper_lake._load_hooks() IS
    'internal: loads the library, and with it the DDL hook, before DDL commands';

-- ---------------------------------------------------------------------------
-- The change record (README "Change semantics", src/catalog/zl_record.c): what a
-- zipper table's versions do not show, so that its history is the fold of
-- every change ever applied whatever the batching.  Both tables are
-- extension configuration: pg_dump dumps them with the table.
-- ---------------------------------------------------------------------------

ALTER TABLE zipper_lake.registration ADD COLUMN late_horizon interval;
-- README "Tracked columns": NULL = every value column
ALTER TABLE zipper_lake.registration ADD COLUMN track_columns name[];
-- README "Storage formats": the format of new history sub-groups, and of
-- each sub-group (0.1 wrote rows only)
ALTER TABLE zipper_lake.registration ADD COLUMN history_format text NOT NULL
    DEFAULT 'columnar' CHECK (history_format IN ('columnar', 'rows'));
ALTER TABLE zipper_lake.subgroup ADD COLUMN format "char" NOT NULL DEFAULT 'r'
    CHECK (format IN ('r', 'c'));
-- README "Storage": the end of a history file group's window, which spans
-- whole history_group_spans; NULL = one span from window_start (0.1's
-- history, and the current partition)
ALTER TABLE zipper_lake.subgroup ADD COLUMN window_end timestamptz;

-- immutable pieces (one per application that changed the record, oldest
-- first), cut into segments of entries in key-hash order
CREATE TABLE zipper_lake.record_segment (
    tbl       regclass NOT NULL,
    piece     bigint NOT NULL,
    segment   int NOT NULL,
    hash_lo   bigint NOT NULL,       -- key hashes of its entries (uint32)
    hash_hi   bigint NOT NULL,
    newest    timestamptz NOT NULL,  -- its newest instant (an instant, see src/common/zl_time.c)
    instants  bigint NOT NULL,
    entries   bytea NOT NULL,
    PRIMARY KEY (tbl, piece, segment)
);
-- varint-coded entries do not compress: spare each segment a failed try
ALTER TABLE zipper_lake.record_segment ALTER COLUMN entries SET STORAGE EXTERNAL;
SELECT pg_catalog.pg_extension_config_dump('zipper_lake.record_segment', '');

-- per table: the newest change time applied, and the instants of every
-- key (apply_snapshot with deletes, truncates) with their seq (NULL: none)
CREATE TABLE zipper_lake.record_head (
    tbl             regclass PRIMARY KEY,
    newest_change   timestamptz NOT NULL,
    table_instants  timestamptz[] NOT NULL,
    table_seqs      bigint[] NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('zipper_lake.record_head', '');
-- piece ids order the record: a restored database must go on after them
SELECT pg_catalog.pg_extension_config_dump('zipper_lake.id_seq', '');
REVOKE ALL ON zipper_lake.record_segment, zipper_lake.record_head FROM PUBLIC;

-- verify(): the record's instants key by key (SELECT on the table checked)
CREATE FUNCTION zipper_lake._record_instants(tbl regclass)
RETURNS TABLE (key text[], instant text, is_delete boolean, seq bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_record_instants'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake._record_instants(regclass) IS
    'Internal: the instants the change record of a zipper table remembers, for verify().';

CREATE FUNCTION zipper_lake.set_late_horizon(tbl regclass, late_horizon interval)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_set_late_horizon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.set_late_horizon(regclass, interval) IS
    'Set (or with NULL remove) the late horizon of a zipper table: older changes are refused (README "Late data").';

CREATE FUNCTION zipper_lake.set_track_columns(tbl regclass, track_columns text[])
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_set_track_columns'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.set_track_columns(regclass, text[]) IS
    'Set the columns whose changes make versions (NULL: all value columns; README "Tracked columns").';

-- README "Storage formats"
CREATE FUNCTION zipper_lake.set_history_format(tbl regclass, history_format text)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_set_history_format'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.set_history_format(regclass, text) IS
    'Set the format of history written from now on: columnar or rows (README "Storage formats").';

-- the record's size, piece by piece, for whoever may read the table: in C
-- (src/api/zl_inspect.c), which checks the caller's SELECT and row-level
-- security like inspect() before reading the record as the extension's
-- owner; no SECURITY DEFINER function, whose checks would test its owner
CREATE FUNCTION zipper_lake.inspect_record(tbl regclass)
RETURNS TABLE (piece bigint, segments bigint, hash_lo bigint, hash_hi bigint,
               newest timestamptz, instants bigint, bytes bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_inspect_record'
LANGUAGE C STRICT STABLE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.inspect_record(regclass) IS
    'The change record of a zipper table: its pieces, instants and bytes (README "Change semantics").';

-- ---------------------------------------------------------------------------
-- Change events (src/apply/events/zl_events.c): Debezium, Canal, Maxwell, GoldenGate and
-- wal2json events decoded into the changes of a zipper table, one row a
-- change (op u, d, t, or s for an event skipped).  Internal: apply_events
-- applies them.  The events are read as the caller (SELECT on them).
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake._decode_events(
    tbl regclass,
    events regclass,
    format text,
    event name DEFAULT 'event',
    seq name DEFAULT NULL,
    source_table text DEFAULT NULL)
RETURNS TABLE (op "char", change_time timestamptz, seq numeric, sub_seq int,
               event_ref text, columns text[], vals text[])
AS 'MODULE_PATHNAME', 'zipper_lake_decode_events'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake._decode_events(regclass, regclass, text, name, name, text) IS
    'Internal: the changes of a relation of change events (debezium, canal, maxwell, ogg, wal2json) for a zipper table.';

-- apply_events(): the decoded changes applied like apply_changes' (README
-- "Loading CDC events"; src/apply/events/zl_events_apply.c)
CREATE FUNCTION zipper_lake.apply_events(
    tbl regclass,
    events regclass,
    format text,
    event name DEFAULT 'event',
    seq name DEFAULT NULL,
    source_table text DEFAULT NULL,
    ignore_nulls boolean DEFAULT false,
    missing_columns text DEFAULT 'error')
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint, skipped bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_events'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.apply_events(regclass, regclass, text, name, name, text, boolean, text) IS
    'applies a batch of CDC events (debezium, canal, maxwell, ogg, wal2json) to a zipper table, each at its own time';

-- ---------------------------------------------------------------------------
-- Lifecycle (README "Lifecycle"; src/lifecycle/zl_retention.c, src/lifecycle/zl_erase.c):
-- history dropped by end date, kept for a retention period, keys erased.
-- ---------------------------------------------------------------------------

-- the latest drop_history cut (an instant): versions that ended by then are
-- gone and changes at or before it are refused; NULL: none
ALTER TABLE zipper_lake.registration ADD COLUMN history_cut timestamptz;
-- set_retention(): history that ended longer ago is dropped by VACUUM
ALTER TABLE zipper_lake.registration ADD COLUMN retention interval
    CHECK (retention > interval '0');

CREATE FUNCTION zipper_lake.drop_history(tbl regclass, ended_before timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_drop_history'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.drop_history(regclass, timestamptz) IS
    'Remove every version that ended at or before a time (whole end-date partitions at once); later changes before it are refused (README "Lifecycle").';

CREATE FUNCTION zipper_lake.set_retention(tbl regclass, keep interval)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_set_retention'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.set_retention(regclass, interval) IS
    'Keep history for a period (NULL: forever); VACUUM drops what ended longer ago (README "Lifecycle").';

CREATE FUNCTION zipper_lake.erase(tbl regclass, keys regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_erase'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake.erase(regclass, regclass) IS
    'Remove every version and change record of the keys a relation lists; VACUUM then wipes their bytes (README "Lifecycle").';

-- ---------------------------------------------------------------------------
-- What a table costs, part by part (README "Monitoring and troubleshooting").
-- ---------------------------------------------------------------------------
CREATE FUNCTION zipper_lake.inspect_bytes(tbl regclass)
RETURNS TABLE (kind text, part text, bytes bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_inspect_bytes'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE ROWS 9;
COMMENT ON FUNCTION zipper_lake.inspect_bytes(regclass) IS
    'the bytes of a table''s file (sub-groups, free extents, other pages) and of its catalog rows, part by part';

-- ---------------------------------------------------------------------------
-- Mask rows store their positions compact (src/catalog/zl_maskcodec.c): a
-- bytea of varints -- how many, the first, then each gap to the next less
-- one, ascending and distinct -- instead of an int[] of 4 bytes a position.
-- ---------------------------------------------------------------------------
CREATE FUNCTION zipper_lake._upgrade_mask_positions(positions int[])
RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    sorted int[] := ARRAY(SELECT DISTINCT p FROM unnest(positions) p ORDER BY p);
    result bytea := ''::bytea;
    previous bigint := -1;
    v bigint;
BEGIN
    FOR i IN 0 .. coalesce(array_length(sorted, 1), 0) LOOP
        v := CASE WHEN i = 0 THEN coalesce(array_length(sorted, 1), 0)
                  ELSE sorted[i] - previous - 1 END;
        IF i > 0 THEN
            previous := sorted[i];
        END IF;
        WHILE v >= 128 LOOP         -- seven bits a byte, lowest first
            result := result || set_byte('\x00'::bytea, 0, (v % 128 + 128)::int);
            v := v / 128;
        END LOOP;
        result := result || set_byte('\x00'::bytea, 0, v::int);
    END LOOP;
    RETURN result;
END $$;
ALTER TABLE zipper_lake.mask
    ALTER COLUMN positions TYPE bytea USING zipper_lake._upgrade_mask_positions(positions);
DROP FUNCTION zipper_lake._upgrade_mask_positions(int[]);

-- ---------------------------------------------------------------------------
-- README "Row identifiers": every sub-group owns a range of TID blocks from
-- first_tid_block on, never given again: a row sub-group one a block, a
-- columnar one one per 291 rows (MaxHeapTuplesPerPage), at least one.  The
-- sub-groups written before are numbered in order here; the table's
-- metapage counts on from the last of them (zl_storage_take_tid_blocks).
-- ---------------------------------------------------------------------------
ALTER TABLE zipper_lake.subgroup ADD COLUMN first_tid_block bigint;
UPDATE zipper_lake.subgroup s SET first_tid_block = n.first_tid_block
  FROM (SELECT storage_id, subgroup_id,
               coalesce(sum(tid_blocks) OVER (PARTITION BY storage_id ORDER BY subgroup_id
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                   AS first_tid_block
          FROM (SELECT storage_id, subgroup_id,
                       greatest(CASE format WHEN 'c' THEN (row_count + 290) / 291 ELSE blocks END, 1)
                           AS tid_blocks
                  FROM zipper_lake.subgroup) t) n
 WHERE s.storage_id = n.storage_id AND s.subgroup_id = n.subgroup_id;
ALTER TABLE zipper_lake.subgroup ALTER COLUMN first_tid_block SET NOT NULL;
-- A row by TID outside MVCC (a unique index's check asks under a dirty
-- snapshot, README "Indexes") finds the sub-group owning its TID block here.
CREATE INDEX subgroup_tid_idx ON zipper_lake.subgroup (storage_id, first_tid_block);

-- ---------------------------------------------------------------------------
-- Zipper parents (README "Scaling out"): resolve() settles the prepared
-- transactions that applies in background workers, and transactions that
-- used shards, left after a crash.  shard_transaction logs, in each
-- transaction that used a shard, the name of the transaction it prepared
-- there (src/remote): a visible row means "commit it".  Transient state,
-- not dumped: resolve() before a dump.
-- ---------------------------------------------------------------------------

CREATE FUNCTION zipper_lake._newest_change(tbl regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_newest_change'
LANGUAGE C STRICT STABLE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake._newest_change(regclass) IS
    'internal: the newest change applied to a zipper table, in its period columns'' terms (a zipper parent''s late horizon over shards)';

-- copy_history() (src/api/zl_copy_history.c): a zipper table's versions
-- and change record into an empty one registered the same way, either a
-- shard; how a leaf moves to a new server.  _record_rows/_record_put carry
-- the record as it is stored.
CREATE FUNCTION zipper_lake.copy_history(source regclass, target regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_copy_history'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.copy_history(regclass, regclass) IS
    'copies every version and the change record of a zipper table (or shard) into an empty one registered the same way (README "Scaling out")';
CREATE FUNCTION zipper_lake._record_rows(tbl regclass)
RETURNS TABLE (piece bigint, segment int, hash_lo bigint, hash_hi bigint, newest timestamptz,
               instants bigint, entries bytea, table_instants timestamptz[], table_seqs bigint[])
AS 'MODULE_PATHNAME', 'zipper_lake_record_rows'
LANGUAGE C STRICT STABLE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake._record_rows(regclass) IS
    'internal: the change record of a zipper table as stored (head first), for copy_history()';
CREATE FUNCTION zipper_lake._record_put(tbl regclass, piece bigint, segment int, hash_lo bigint,
    hash_hi bigint, newest timestamptz, instants bigint, entries bytea,
    table_instants timestamptz[], table_seqs bigint[])
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_record_put'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zipper_lake._record_put(regclass, bigint, int, bigint, bigint, timestamptz, bigint, bytea, timestamptz[], bigint[]) IS
    'internal: a row of _record_rows() into a zipper table''s record (owner only), for copy_history()';

CREATE TABLE zipper_lake.shard_transaction (
    gid   text PRIMARY KEY,
    umid  oid NOT NULL
);
REVOKE ALL ON zipper_lake.shard_transaction FROM PUBLIC;

CREATE FUNCTION zipper_lake.resolve()
RETURNS bigint
AS 'MODULE_PATHNAME', 'zipper_lake_resolve'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.resolve() IS
    'commits or rolls back what applies in background workers and on shards left prepared, as the transaction that decides them ended';

-- ---------------------------------------------------------------------------
-- Following a live source (README "Following a live source";
-- src/follow/): a zipper table kept by a background worker that decodes
-- the source's logical replication slot (pgoutput).  One row per followed
-- table; the connection string (it may hold a password) is readable only
-- through the view, which hides the password.  Not dumped: a restored
-- follower would consume another server's slot; call follow() again.
-- ---------------------------------------------------------------------------

CREATE TABLE zipper_lake.follower (
    tbl                  oid PRIMARY KEY,
    owner                oid NOT NULL,
    source_table         text NOT NULL,       -- schema-qualified, as the source named it
    source_relid         oid NOT NULL,        -- its oid there: what the slot's messages name
    connection           text,                -- NULL: this database
    publication          name NOT NULL,
    slot                 name NOT NULL,
    batch_changes        integer NOT NULL CHECK (batch_changes > 0),
    batch_interval       interval NOT NULL CHECK (batch_interval > '0'),
    missing_columns      text NOT NULL,
    state                text NOT NULL CHECK (state IN ('running', 'paused', 'stopped')),
    image_time           timestamptz NOT NULL,
    applied_lsn          pg_lsn NOT NULL,     -- commit LSN of the last source transaction applied
    applied_commit_time  timestamptz,         -- its commit time on the source
    caught_up_lsn        pg_lsn NOT NULL,     -- everything before it was decoded and applied
    source_lsn           pg_lsn NOT NULL,     -- the source's WAL end at the last look
    checked_at           timestamptz NOT NULL,
    transactions_applied bigint NOT NULL DEFAULT 0,
    changes_applied      bigint NOT NULL DEFAULT 0,
    last_error           text,
    last_error_time      timestamptz
);
REVOKE ALL ON zipper_lake.follower FROM PUBLIC;

CREATE FUNCTION zipper_lake._follow_connection_shown(connection text)
RETURNS text
AS 'MODULE_PATHNAME', 'zipper_lake_follow_connection_shown'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION zipper_lake._follow_connection_shown(text) IS
    'internal: a libpq connection string with its password hidden, for zipper_lake.followers';

CREATE VIEW zipper_lake.followers AS
SELECT f.tbl::regclass AS tbl,
       f.source_table,
       zipper_lake._follow_connection_shown(f.connection) AS connection,
       f.publication,
       f.slot,
       f.state,
       (SELECT l.pid FROM pg_catalog.pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 2053924463
           AND l.objid = f.tbl AND l.objsubid = 2
           AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                              WHERE d.datname = pg_catalog.current_database())) AS worker_pid,
       f.batch_changes,
       f.batch_interval,
       f.image_time,
       f.applied_lsn,
       f.applied_commit_time,
       f.caught_up_lsn,
       CASE WHEN f.connection IS NULL THEN pg_catalog.pg_current_wal_lsn() ELSE f.source_lsn END
           AS source_lsn,
       GREATEST(CASE WHEN f.connection IS NULL THEN pg_catalog.pg_current_wal_lsn()
                     ELSE f.source_lsn END - f.caught_up_lsn, 0)::bigint AS lag_bytes,
       CASE WHEN f.caught_up_lsn >= f.source_lsn THEN interval '0'
            ELSE pg_catalog.now() - COALESCE(f.applied_commit_time, f.image_time) END AS lag,
       f.checked_at,
       f.transactions_applied,
       f.changes_applied,
       -- it may quote the source's values: for those who may read the table
       CASE WHEN pg_catalog.has_table_privilege(f.tbl, 'SELECT') THEN f.last_error END AS last_error,
       f.last_error_time
  FROM zipper_lake.follower f;
GRANT SELECT ON zipper_lake.followers TO PUBLIC;
COMMENT ON VIEW zipper_lake.followers IS
    'zipper tables that follow a live source: state, progress, lag and the last error (README "Following a live source")';

CREATE FUNCTION zipper_lake.follow(
    tbl regclass,
    source_table text,
    connection text DEFAULT NULL,
    publication name DEFAULT NULL,
    batch_changes integer DEFAULT 10000,
    batch_interval interval DEFAULT '1 second',
    missing_columns text DEFAULT 'error')
RETURNS TABLE (image_time timestamptz, image_rows bigint, slot name)
AS 'MODULE_PATHNAME', 'zipper_lake_follow'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.follow(regclass, text, text, name, integer, interval, text) IS
    'keeps a zipper table following a table of this or another PostgreSQL database through logical decoding, each source transaction at its commit time (README "Following a live source")';

CREATE FUNCTION zipper_lake.pause(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_follow_pause'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.pause(regclass) IS
    'stops a follower''s worker; the source''s slot keeps what it has not applied';

CREATE FUNCTION zipper_lake.resume(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_follow_resume'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.resume(regclass) IS
    'starts a paused or stopped follower again where it left off';

CREATE FUNCTION zipper_lake.unfollow(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_unfollow'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.unfollow(regclass) IS
    'stops following: the worker ends, the slot, replication origin and a publication follow() created are dropped; the history stays';

CREATE FUNCTION zipper_lake.set_follow(
    tbl regclass,
    batch_changes integer DEFAULT NULL,
    batch_interval interval DEFAULT NULL,
    missing_columns text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'zipper_lake_set_follow'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION zipper_lake.set_follow(regclass, integer, interval, text) IS
    'changes a follower''s batch size, batch interval or missing_columns (NULL: keep); its worker takes them at its next batch';
