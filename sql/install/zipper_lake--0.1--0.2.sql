/* zipper_lake 0.1 -> 0.2 (cumulative; a fresh CREATE EXTENSION runs 0.1 then this) */

\echo Use "ALTER EXTENSION zipper_lake UPDATE TO '0.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- create_table(): every operator and function schema-qualified.  It cannot
-- pin search_path (an unqualified name is created in the caller's
-- current_schema()), so nothing in it may resolve through the caller's path:
-- an operator an ordinary user put in public would otherwise run with the
-- rights of whoever calls create_table.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION zipper_lake.create_table(
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
        CASE WHEN pg_catalog.cardinality(pg_catalog.parse_ident(name)) OPERATOR(pg_catalog.=) 1
             THEN ARRAY[pg_catalog.current_schema()::pg_catalog.text]
                  OPERATOR(pg_catalog.||) pg_catalog.parse_ident(name)
             ELSE pg_catalog.parse_ident(name) END,
        source, valid_from, valid_to, partition_unit, history_group_span,
        current_group_span, max_subgroups, open_end, time_zone)
$$;

-- ---------------------------------------------------------------------------
-- register(): every check in C (src/zl_register.c), one place; the 0.1
-- PL/pgSQL validator and its internal _register() go.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION zipper_lake.register(
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
AS 'MODULE_PATHNAME', 'zipper_lake_register'
LANGUAGE C;

DROP FUNCTION zipper_lake._register(regclass, name[], name, name, text, interval,
    interval, int, timestamptz, text);

-- _create_table(): null arguments named as such
CREATE OR REPLACE FUNCTION zipper_lake._create_table(
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
    IF qualified_name IS NULL OR source IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN source IS NULL THEN 'source table' ELSE 'table name' END
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass the new table''s name and the source table, e.g. zipper_lake.create_table(''account_hist'', ''account'').';
    END IF;
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

-- ---------------------------------------------------------------------------
-- apply_changes(): op => NULL means "the column op if the changes have one";
-- a column named explicitly must exist.
-- apply_snapshot(): an empty image is an error unless allow_empty => true.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION zipper_lake.apply_changes(
    tbl regclass,
    changes regclass,
    change_time name DEFAULT 'change_time',
    op name DEFAULT NULL,
    seq name DEFAULT NULL)
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_changes'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

DROP FUNCTION zipper_lake.apply_snapshot(regclass, regclass, timestamptz, boolean);
CREATE FUNCTION zipper_lake.apply_snapshot(
    tbl regclass,
    snapshot regclass,
    snapshot_time timestamptz,
    deletes boolean DEFAULT true,
    allow_empty boolean DEFAULT false)
RETURNS TABLE (changes bigint, inserted bigint, closed bigint, deleted bigint,
               unchanged bigint, late bigint)
AS 'MODULE_PATHNAME', 'zipper_lake_apply_snapshot'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------
-- verify(): reads only the table itself, not its inheritance children
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
        '          FROM ONLY %s) v'
        ' WHERE next_f < t',
        keys, keys, keys, reg.valid_from, reg.valid_to, reg.valid_from, keys,
        reg.valid_from, tbl);
    RETURN QUERY EXECUTE format(
        'SELECT ''several open versions''::text,'
        '       format(''Key (%%s)=(%%s) has %%s open versions.'', %L, row(%s)::text, n)'
        '  FROM (SELECT %s, count(*) AS n FROM ONLY %s WHERE %I = %s'
        '         GROUP BY %s HAVING count(*) > 1) v',
        keys, keys, keys, tbl, reg.valid_to, open_end, keys);
END
$$;

-- ---------------------------------------------------------------------------
-- DDL: one C path (src/zl_ddl.c, an object access hook) forgets the metadata
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
