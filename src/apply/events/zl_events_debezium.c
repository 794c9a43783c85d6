/*-------------------------------------------------------------------------
 *
 * zl_events_debezium.c
 *	  Debezium change events.
 *
 * An event is {"before", "after", "source", "op", "ts_ms"}, or the same
 * as "payload" next to a "schema" whose logical types say how values are
 * encoded (decoded once while consecutive events carry the same schema).
 * op c, r (snapshot read), u, d, t; m (messages) and tombstones are
 * skipped.  Time: source.ts_ms, else the envelope's ts_ms (milliseconds).
 * Position: source.lsn (PostgreSQL), file/pos/row (MySQL), change_lsn
 * (SQL Server) or scn (Oracle), see debezium_position.  A value Debezium
 * could not read (an unchanged TOAST value) is kept.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

#include "utils/memutils.h"

/* Debezium's value of a column it could not read (an unchanged TOAST value) */
#define DEBEZIUM_UNAVAILABLE		"__debezium_unavailable_value"
/* the same as bytes, base64-encoded (bytea columns) */
#define DEBEZIUM_UNAVAILABLE_B64	"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="

/* Debezium's placeholder of a value it could not read (unchanged TOAST) */
bool
zl_ev_debezium_unavailable(ZLJson *v, const ValueType *type)
{
	if (v->type == ZL_JSON_STRING)
	{
		if (v->len == strlen(DEBEZIUM_UNAVAILABLE) &&
			memcmp(v->str, DEBEZIUM_UNAVAILABLE, v->len) == 0)
			return true;
		return type != NULL && type->kind == KIND_BYTES &&
			v->len == strlen(DEBEZIUM_UNAVAILABLE_B64) &&
			memcmp(v->str, DEBEZIUM_UNAVAILABLE_B64, v->len) == 0;
	}
	/* an array column: an array of just the placeholder */
	if (v->type == ZL_JSON_ARRAY && zl_json_size(v) == 1)
	{
		ZLJson	   *e = zl_json_item(v, 0);

		return e->type == ZL_JSON_STRING && zl_ev_debezium_unavailable(e, NULL);
	}
	return false;
}

/* is s exactly n hexadecimal digits? */
static bool
hex_digits(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (!isxdigit((unsigned char) s[i]))
			return false;
	return true;
}

/*
 * Debezium's position of a change in its source, by connector:
 * PostgreSQL's lsn; MySQL's binlog file number, pos and row as
 * file * 2^43 + pos * 2^11 + row (one 63-bit number); SQL Server's change_lsn
 * ("xxxxxxxx:xxxxxxxx:xxxx", hex) as one number; Oracle's scn.  NULL if
 * the source has none of them; one that is not a position (a fraction,
 * a malformed string, a binlog position beyond 63 bits) is an error, never
 * left out: a change without a position would win its instant.
 */
static Numeric
debezium_position(EventDecoder *d, ZLJson *source)
{
	ZLJson	   *n;
	char	   *s;

	if ((n = zl_ev_get_number(d, source, "lsn")) != NULL)
	{
		if (!zl_numeric_is_integer(zl_json_number(n)))
			zl_ev_not_an_integer(d, n, "source.lsn");
		return zl_json_number(n);
	}
	if ((n = zl_ev_get_number(d, source, "pos")) != NULL)
	{
		char	   *file = zl_ev_get_string(d, source, "file", false);
		char	   *dot = file != NULL ? strrchr(file, '.') : NULL;
		ZLJson	   *row = zl_ev_get_number(d, source, "row");
		int64		pos = zl_ev_number_int64(d, n, "source.pos");
		int64		r = row != NULL ? zl_ev_number_int64(d, row, "source.row") : 0;
		int64		f;

		if (dot == NULL || !zl_ev_all_digits(dot + 1, 7))
			zl_ev_malformed(d, psprintf("has source.pos but source.file %s%s%s; a binlog file name ending in its number (mysql-bin.000003) was expected.",
								  file ? "\"" : "", file ? file : "null", file ? "\"" : ""));
		f = strtol(dot + 1, NULL, 10);
		/* one 63-bit number: file (20 bits), pos (32), row (11) */
		if (f >= (1 << 20) || pos < 0 || pos >= (INT64CONST(1) << 32) ||
			r < 0 || r >= (1 << 11))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("event position out of range"),
					 errdetail("Event %s has source.file \"%s\", pos " INT64_FORMAT " and row " INT64_FORMAT "; their position is file number (below 2^20) * 2^43 + pos (below 2^32) * 2^11 + row (below 2^11).",
							   d->ref, file, pos, r),
					 errhint("Pass seq => a column that orders the events; nothing was applied.")));
		return zl_ev_uint64_numeric(((uint64) f << 43) | ((uint64) pos << 11) | (uint64) r);
	}
	if ((s = zl_ev_get_string(d, source, "change_lsn", false)) != NULL)
	{
		unsigned int a,
					b,
					c;

		if (strlen(s) != 22 || s[8] != ':' || s[17] != ':' ||
			!hex_digits(s, 8) || !hex_digits(s + 9, 8) || !hex_digits(s + 18, 4) ||
			sscanf(s, "%8x:%8x:%4x", &a, &b, &c) != 3)
			zl_ev_malformed(d, psprintf("has source.change_lsn \"%s\"; a SQL Server LSN (xxxxxxxx:xxxxxxxx:xxxx, hexadecimal) was expected.", s));
		return zl_ev_digits_numeric(psprintf("%u%010u%05u", a, b, c));
	}
	if ((s = zl_ev_get_string(d, source, "scn", false)) != NULL)
	{
		if (!zl_ev_all_digits(s, 40))
			zl_ev_malformed(d, psprintf("has source.scn \"%s\"; a string of digits was expected.", s));
		return zl_ev_digits_numeric(s);
	}
	return NULL;
}

/* the Debezium schema's encoding of a field ({"type", "name", "parameters"}) */
static ValueType
debezium_field_type(EventDecoder *d, ZLJson *field)
{
	static const struct
	{
		const char *name;
		ValueKind	kind;
	}			logical[] =
	{
		{"org.apache.kafka.connect.data.Decimal", KIND_DECIMAL},
		{"io.debezium.data.VariableScaleDecimal", KIND_VARIABLE_DECIMAL},
		{"io.debezium.time.Date", KIND_DATE},
		{"org.apache.kafka.connect.data.Date", KIND_DATE},
		{"io.debezium.time.Time", KIND_TIME_MS},
		{"org.apache.kafka.connect.data.Time", KIND_TIME_MS},
		{"io.debezium.time.MicroTime", KIND_TIME_US},
		{"io.debezium.time.NanoTime", KIND_TIME_NS},
		{"io.debezium.time.Timestamp", KIND_TIMESTAMP_MS},
		{"org.apache.kafka.connect.data.Timestamp", KIND_TIMESTAMP_MS},
		{"io.debezium.time.MicroTimestamp", KIND_TIMESTAMP_US},
		{"io.debezium.time.NanoTimestamp", KIND_TIMESTAMP_NS},
	};
	ValueType	result = {KIND_PLAIN, 0};
	char	   *name = zl_ev_get_string(d, field, "name", false);
	char	   *type = zl_ev_get_string(d, field, "type", false);

	if (name != NULL)
		for (int i = 0; i < lengthof(logical); i++)
			if (strcmp(name, logical[i].name) == 0)
				result.kind = logical[i].kind;
	if (result.kind == KIND_PLAIN && type != NULL && strcmp(type, "bytes") == 0)
		result.kind = KIND_BYTES;
	if (result.kind == KIND_DECIMAL)
	{
		ZLJson	   *params = zl_ev_get_container(d, field, "parameters", true, false);
		ZLJson	   *scale = params != NULL ? zl_ev_member(params, "scale") : NULL;
		int64		sc = PG_INT64_MAX;

		if (scale != NULL)
		{
			char	   *text = scale->type == ZL_JSON_STRING ? pnstrdup(scale->str, scale->len) :
				scale->type == ZL_JSON_NUMBER ? zl_json_number_text(scale) : "";
			char	   *end;

			errno = 0;
			sc = strtoi64(text, &end, 10);
			if (errno != 0 || *end != '\0' || end == text)
				sc = PG_INT64_MAX;
		}
		if (sc < -1000 || sc > 1000)
			zl_ev_malformed(d, "has a Decimal in its schema without a valid \"scale\" parameter.");
		result.scale = (int32) sc;
	}
	return result;
}

/* the types of the columns of the struct "before" or "after" of a schema */
static ValueType *
debezium_struct_types(EventDecoder *d, ZLJson *fields)
{
	ValueType  *types = MemoryContextAllocZero(d->schema.context,
											   sizeof(ValueType) * (d->ncolumns + 1));
	int			n = zl_json_size(fields);

	for (int i = 0; i < n; i++)
	{
		ZLJson	   *f = zl_json_item(fields, i);
		ZLJson	   *name = zl_ev_is_container(f, true) ? zl_ev_member(f, "field") : NULL;
		int			column;

		if (name == NULL || name->type != ZL_JSON_STRING)
			zl_ev_malformed(d, "has a schema field without a \"field\" name.");
		if (zl_ev_column_of_field(d, name->str, name->len, &column) != MATCH_NONE)
			types[column] = debezium_field_type(d, f);
	}
	return types;
}

/* the value types of the envelope's schema, decoded once while it stays the same */
static void
debezium_schema(EventDecoder *d, ZLJson *schema)
{
	ZLJson	   *fields;
	int			n;
	int			len;
	const char *bytes = zl_json_bytes(schema, &len);

	if (d->schema.bytes != NULL && d->schema.len == len &&
		memcmp(d->schema.bytes, bytes, len) == 0)
		return;
	MemoryContextReset(d->schema.context);
	d->schema.bytes = NULL;
	d->schema.before = d->schema.after = NULL;

	fields = zl_ev_get_container(d, schema, "fields", false, false);
	n = fields != NULL ? zl_json_size(fields) : 0;
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *f = zl_json_item(fields, i);
		ZLJson	   *name = zl_ev_is_container(f, true) ? zl_ev_member(f, "field") : NULL;
		ZLJson	   *inner;
		bool		before;

		if (name == NULL || name->type != ZL_JSON_STRING)
			continue;
		before = (name->len == 6 && memcmp(name->str, "before", 6) == 0);
		if (!before && !(name->len == 5 && memcmp(name->str, "after", 5) == 0))
			continue;
		inner = zl_ev_get_container(d, f, "fields", false, false);
		if (inner == NULL)
			continue;
		if (before)
			d->schema.before = debezium_struct_types(d, inner);
		else
			d->schema.after = debezium_struct_types(d, inner);
	}
	d->schema.bytes = MemoryContextAlloc(d->schema.context, len);
	memcpy(d->schema.bytes, bytes, len);
	d->schema.len = len;
}

/*
 * Debezium: {"before", "after", "source", "op", "ts_ms"}, or the same as
 * "payload" next to a "schema".  The time is source.ts_ms, or the
 * envelope's ts_ms when that is 0 or absent (snapshot rows: the time of
 * processing).  Tombstones (null events, null payloads) and messages
 * (op m) are skipped.
 */
void
zl_ev_decode_debezium(EventDecoder *d, ZLJson *root)
{
	ZLJson	   *payload = root;
	ZLJson	   *source;
	ZLJson	   *v;
	const ValueType *before_types = NULL;
	const ValueType *after_types = NULL;
	char	   *op;
	ZLJson	   *ts;
	int64		ts_ms;
	TimestampTz time;

	if (zl_json_member(root, "op") == NULL && (v = zl_json_member(root, "payload")) != NULL)
	{
		ZLJson	   *schema;

		if (v->type == ZL_JSON_NULL)
		{
			zl_ev_emit_skipped(d);	/* a tombstone */
			return;
		}
		if (!zl_ev_is_container(v, true))
			zl_ev_malformed(d, psprintf("has \"payload\" of type %s; an object was expected.",
								  zl_json_type_name(v)));
		payload = v;
		if ((schema = zl_ev_member(root, "schema")) != NULL && zl_ev_is_container(schema, true))
		{
			debezium_schema(d, schema);
			before_types = d->schema.before;
			after_types = d->schema.after;
		}
	}

	op = zl_ev_get_string(d, payload, "op", true);
	source = zl_ev_get_container(d, payload, "source", true, false);
	if (zl_ev_skip_other_table(d, source, "db", "schema", "table"))
		return;
	if (strcmp(op, "m") == 0)
	{
		zl_ev_emit_skipped(d);		/* a logical decoding message, no row */
		return;
	}

	if (strlen(op) != 1 || strchr("cudrt", op[0]) == NULL)
		zl_ev_unknown_operation(d, "op", op,
						  "Debezium events have op c (create), r (read), u (update), d (delete), t (truncate) or m (message, skipped).");

	ts = source != NULL ? zl_ev_get_number(d, source, "ts_ms") : NULL;
	ts_ms = ts != NULL ? zl_ev_number_int64(d, ts, "source.ts_ms") : 0;
	if (ts_ms == 0)
	{
		ts = zl_ev_get_number(d, payload, "ts_ms");
		if (ts == NULL)
			zl_ev_missing_time(d, "source.ts_ms (or it is 0) and no ts_ms",
						 "Debezium events carry source.ts_ms, and ts_ms in the envelope.");
		ts_ms = zl_ev_number_int64(d, ts, "ts_ms");
	}
	time = zl_ev_epoch_time(d, ts_ms, 1000, "ts_ms");
	if (d->seq == NULL && source != NULL)
		d->seq = debezium_position(d, source);

	zl_ev_before_after_change(d, payload, op[0] == 'c' || op[0] == 'r' ? 'I' : pg_toupper((unsigned char) op[0]),
						time, before_types, after_types);
}
