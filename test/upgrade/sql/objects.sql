-- the extension's objects, as a fresh installation and an upgraded one must both have them
SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'zipper_lake') ORDER BY 1;
SELECT p.oid::regprocedure, p.provolatile, p.proparallel, p.prorows, p.prosecdef, p.proconfig,
       pg_get_expr(p.proargdefaults, 0), p.proacl, obj_description(p.oid, 'pg_proc')
  FROM pg_proc p WHERE p.pronamespace = 'zipper_lake'::regnamespace ORDER BY p.oid::regprocedure::text;
SELECT evtname, evtevent, evtenabled, evttags FROM pg_event_trigger ORDER BY 1;
