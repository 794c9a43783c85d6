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
