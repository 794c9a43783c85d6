-- No privilege escalation through the search path (README "Guarantees"):
-- an ordinary user's operators and functions in public never run inside
-- the extension's functions, even for a superuser whose search_path puts
-- public before pg_catalog.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
CREATE ROLE regress_zl_mallory;
CREATE TABLE public.pwned (who name, what text);
GRANT INSERT ON public.pwned TO regress_zl_mallory;
GRANT CREATE ON SCHEMA public TO regress_zl_mallory;
SET ROLE regress_zl_mallory;
-- each records who ran it, then behaves like the built-in it shadows
CREATE FUNCTION public.evil_concat(text[], text[]) RETURNS text[] LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, '||'); RETURN $1 OPERATOR(pg_catalog.||) $2; END $$;
CREATE OPERATOR public.|| (LEFTARG = text[], RIGHTARG = text[], FUNCTION = public.evil_concat);
CREATE FUNCTION public.evil_int_eq(int, int) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'int ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.evil_int_eq);
CREATE FUNCTION public.evil_text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'text ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.evil_text_eq);
CREATE FUNCTION public.evil_name_eq(name, name) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'name ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = name, FUNCTION = public.evil_name_eq);
CREATE FUNCTION public.evil_oid_eq(oid, oid) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'oid ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.evil_oid_eq);
CREATE FUNCTION public.cardinality(anyarray) RETURNS int LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'cardinality'); RETURN pg_catalog.cardinality($1); END $$;
CREATE FUNCTION public.parse_ident(text, boolean DEFAULT true) RETURNS text[] LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'parse_ident'); RETURN pg_catalog.parse_ident($1, $2); END $$;
CREATE FUNCTION public.format(text, VARIADIC "any") RETURNS text LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'format'); RETURN ''; END $$;
CREATE FUNCTION public.quote_ident(text) RETURNS text LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.pwned VALUES (current_user, 'quote_ident'); RETURN pg_catalog.quote_ident($1); END $$;
RESET ROLE;

-- the superuser works with public first in the path
SET search_path = public, pg_catalog;
CREATE TABLE hs_src (id int PRIMARY KEY, name text);
SELECT zipper_lake.create_table('hs_hist', 'hs_src');
CREATE TABLE hs_hist2 (id int, name text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL) USING zipper_lake;
SELECT zipper_lake.register('hs_hist2', ARRAY['id'], max_subgroups => 4, time_zone => 'Asia/Shanghai');
CREATE TABLE hs_ch (id int, name text, change_time timestamptz, op text);
INSERT INTO hs_ch VALUES (1, 'a', '2024-01-01', 'I'), (2, 'b', '2024-01-01', 'I'), (1, 'c', '2024-01-02', 'U');
SELECT * FROM zipper_lake.apply_changes('hs_hist', 'hs_ch');
SELECT * FROM zipper_lake.apply_changes('hs_hist2', 'hs_ch', op => 'op');
CREATE TABLE hs_image (id int, name text);
INSERT INTO hs_image VALUES (1, 'c'), (3, 'd');
SELECT * FROM zipper_lake.apply_snapshot('hs_hist', 'hs_image', '2024-01-03');
SELECT count(*) FROM zipper_lake.as_of(NULL::hs_hist, '2024-01-02 12:00');
SELECT count(*) FROM zipper_lake.current(NULL::hs_hist);
SELECT count(*) FROM zipper_lake.changes(NULL::hs_hist, '2024-01-01', '2024-01-04');
SELECT count(*) FROM hs_hist WHERE valid_from <= '2024-01-02' AND valid_to > '2024-01-02';
SELECT count(*) FROM zipper_lake.inspect('hs_hist');
SELECT * FROM zipper_lake.verify('hs_hist');
SELECT zipper_lake.reclaim('hs_hist');
ALTER TABLE hs_hist ADD COLUMN note text;
DROP TABLE hs_hist2;
RESET search_path;

-- nothing of the user's ran
SELECT * FROM public.pwned;

-- every SQL or PL/pgSQL function of the extension pins search_path
SELECT p.oid::regprocedure
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'zipper_lake'
  JOIN pg_language l ON l.oid = p.prolang
 WHERE l.lanname IN ('sql', 'plpgsql')
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
 ORDER BY 1;

DROP TABLE hs_hist, hs_src, hs_ch, hs_image;
DROP OWNED BY regress_zl_mallory;
DROP TABLE public.pwned;
REVOKE CREATE ON SCHEMA public FROM regress_zl_mallory;
DROP ROLE regress_zl_mallory;
