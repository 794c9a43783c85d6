-- JSON text of events is read without converting it to jsonb
-- (src/apply/events/zl_events_json.c): it decodes as the same event as jsonb does, and
-- what is not JSON is refused as jsonb input refuses it
SET timezone = 'UTC';

CREATE TABLE ev_json_t (id int, name text, qty numeric, tags text[], doc jsonb, note text,
                        valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)
  USING zipper_lake;
SELECT zipper_lake.register('ev_json_t', ARRAY['id']);

-- Maxwell events (the simplest shape) written in many ways
CREATE TABLE ev_json_text (event text);
INSERT INTO ev_json_text VALUES
-- escapes, \u escapes (a surrogate pair too), in values and in keys
($${"type":"insert","ts":1704189600,"data":{"id":1,"name":"tab\there \"quoted\" back\\slash \/ \u00e9 \ud83d\ude00 \b\f\n\r","n\u0061me2":"x"}}$$),
($${"type":"insert","ts":1704189600,"data":{"\u0069d":2,"name":"key with an escape"}}$$),
-- whitespace everywhere
(E' \t\r\n{ "type" : "insert" ,\n "ts" : 1704189600 , "data" : { "id" : 3 , "name" : " spaced " } } \n'),
-- numbers: exponents and negative zero are written as jsonb writes them
($${"type":"insert","ts":1704189600,"data":{"id":4,"qty":1.50,"note":1E+2}}$$),
($${"type":"insert","ts":1704189600,"data":{"id":5,"qty":-0,"note":-1.5e-3}}$$),
($${"type":"insert","ts":1.7041896E+9,"data":{"id":6,"qty":12345678901234567890.123456789}}$$),
-- nested arrays and objects: an array literal for an array column, JSON for others
($${"type":"insert","ts":1704189600,"data":{"id":7,"tags":["a",["b","c"],null,"",{"k":1},1.0,true],"doc":{"a":[1,{"b":null}],"c":"d"},"note":["x"]}}$$),
($${"type":"insert","ts":1704189600,"data":{"id":8,"tags":[],"doc":[],"note":{}}}$$),
-- duplicate keys: the last one counts (as in jsonb)
($${"type":"insert","ts":1704189600,"type":"update","data":{"id":9,"name":"first","name":"last"},"old":{}}$$),
-- fields that are no columns may hold anything
($${"type":"insert","ts":1704189600,"data":{"id":10,"other":{"deep":[[[[{"x":"\u0041"}]]]]},"more":[1,2,3]}}$$),
-- JSON null and a SQL NULL: tombstones
('null'),
(NULL);

SELECT op, change_time, sub_seq, event_ref, columns,
       CASE WHEN event_ref = 'ctid (0,1)' THEN NULL ELSE vals END AS vals
  FROM zipper_lake._decode_events('ev_json_t', 'ev_json_text', 'maxwell')
 ORDER BY event_ref;
-- (escapes decoded; shown as code points)
SELECT array_agg(ascii(c) ORDER BY o)
  FROM zipper_lake._decode_events('ev_json_t', 'ev_json_text', 'maxwell') e,
       regexp_split_to_table(e.vals[2], '') WITH ORDINALITY AS x(c, o)
 WHERE e.event_ref = 'ctid (0,1)';

-- the same events as jsonb give the same changes
CREATE TABLE ev_json_jsonb (event jsonb);
INSERT INTO ev_json_jsonb SELECT event::jsonb FROM ev_json_text ORDER BY ctid;
SELECT (SELECT array_agg(e::text ORDER BY e::text)
          FROM zipper_lake._decode_events('ev_json_t', 'ev_json_text', 'maxwell') e)
     = (SELECT array_agg(e::text ORDER BY e::text)
          FROM zipper_lake._decode_events('ev_json_t', 'ev_json_jsonb', 'maxwell') e) AS same;

-- What is not JSON: each is refused here as jsonb refuses it
CREATE TABLE ev_json_bad (n int, event text);
INSERT INTO ev_json_bad VALUES
(1, ''), (2, '   '), (3, '{'), (4, '{"type":"insert"'), (5, '{"type":"insert",}'),
(6, '{"type" "insert"}'), (7, '{type:"insert"}'), (8, '{"a":01}'), (9, '{"a":1.}'),
(10, '{"a":.5}'), (11, '{"a":-}'), (12, '{"a":+1}'), (13, '{"a":1e}'), (14, '{"a":tru}'),
(15, '{"a":truex}'), (16, '{"a":"x"} x'), (17, '{"a":"unterminated}'), (18, '{"a":"\x"}'),
(19, '{"a":"\u12"}'), (20, '{"a":"\u0000"}'), (21, '{"a":"\udc00"}'), (22, '{"a":"\ud800x"}'),
(23, E'{"a":"tab\there"}'), (24, '{"a":[1,2}'), (25, '{"a":[1,,2]}'), (26, '[1]]'),
(27, '{"a":nul}'), (28, '{"a":1}{"b":2}');
CREATE FUNCTION ev_json_try(n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    ours text;
    theirs text;
BEGIN
    EXECUTE format('CREATE TEMP TABLE ev_json_one AS SELECT event FROM ev_json_bad WHERE n = %s', n);
    BEGIN
        PERFORM * FROM zipper_lake._decode_events('ev_json_t', 'ev_json_one', 'maxwell');
        ours := 'accepted';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS ours = PG_EXCEPTION_DETAIL;
        ours := SQLSTATE || ' ' || ours;
    END;
    BEGIN
        PERFORM event::jsonb FROM ev_json_one;
        theirs := 'accepted';
    EXCEPTION WHEN OTHERS THEN
        theirs := SQLSTATE;
    END;
    DROP TABLE ev_json_one;
    RETURN ours || ' / jsonb: ' || theirs;
END $$;
SELECT n, event, ev_json_try(n) FROM ev_json_bad ORDER BY n;
