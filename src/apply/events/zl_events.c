/*-------------------------------------------------------------------------
 *
 * zl_events.c
 *	  Decoding change events (Debezium, Canal, Maxwell, GoldenGate,
 *	  wal2json) into changes of a zipper table.
 *
 * zl_events_decode() reads a relation of events (one JSON event a row, in
 * a json, jsonb or text column) and hands each change it finds to a
 * callback, as text in the input syntax of the zipper table's column
 * types; zipper_lake._decode_events() returns them as rows.  Applying
 * them (apply_events) is built on top of it.
 *
 * Reading.  The events are selected as the caller (so SELECT on them and
 * their row-level security apply) through a cursor, ZL_EVENTS_FETCH_ROWS
 * at a time; each event is decoded in a memory context reset after it, so
 * memory does not grow with the batch.  Events are read in place
 * (zl_events_json.c): jsonb through the jsonb C API, JSON text checked
 * once and split into members only where a decoder reads it; nothing is
 * looked up in the catalog per event.
 *
 * What a change is: an op ('u' upsert, 'd' delete, 't' truncate with no
 * key, 's' an event skipped), a time, a seq and a sub_seq that order
 * changes at one time, a reference to the event for error messages
 * ("seq 123" when the seq column gives one, else "ctid (0,5)", with the
 * partition or child table when the relation has them, or "row 7" in the
 * order read for relations without ctid or whose caller may read only
 * some columns), and the columns it gives with their values.
 * A column the event does not give, or marks unavailable (Debezium's
 * placeholder for an unchanged TOAST value; wal2json omits such columns),
 * is not listed: the change keeps it.  Deletes list the key columns only.
 *
 * Mapping fields to columns: a JSON field names the column of exactly its
 * name, else the column named as the field with its ASCII letters in lower
 * case (Oracle's upper-case names through GoldenGate or Debezium); an
 * exact match wins over a folded one.  Fields that name no column, the
 * period columns or generated columns are ignored.
 *
 * Values: JSON strings as they are, numbers as numeric text, booleans as
 * true/false, a JSON array for an array column as an array literal, other
 * arrays and objects as JSON text, null as SQL NULL.  A string for a
 * timestamptz column that has no zone is taken in the table's time_zone
 * (every string for such a column is rewritten with an explicit offset).
 * Text for a column of a date or time type (also in arrays and ranges)
 * and event times must not depend on the clock (zl_time_text_reads_clock).
 * Debezium events with the schema envelope are decoded by the schema's
 * logical types (Decimal, VariableScaleDecimal, Date, Time, MicroTime,
 * NanoTime, Timestamp, MicroTimestamp, NanoTimestamp, bytes); the decoded
 * schema is kept while consecutive events carry the same one.
 *
 * Order inside an event: row i of an event (Canal's data array; every
 * other format has one row) gives sub_seq 2i + 1; an update that changes
 * the key gives the delete of its old key 2i, before the upsert of the new
 * one, at the same time.  The seq column, when given, is the seq of every
 * change of its event; else each format's own position (see
 * decode_debezium and the other decoders), or NULL.
 *
 * Errors name the event (errdetail), and an error context names the event
 * for errors raised by the functions this file calls.
 *
 *-------------------------------------------------------------------------
 */
#include "common/zl_common.h"
#include "catalog/zl_catalog.h"
#include "apply/events/zl_events_internal.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_decode_events);

/* events read from the relation at a time */
#define ZL_EVENTS_FETCH_ROWS	1000

/* Debezium's value of a column it could not read (an unchanged TOAST value) */
#define DEBEZIUM_UNAVAILABLE		"__debezium_unavailable_value"
/* the same as bytes, base64-encoded (bytea columns) */
#define DEBEZIUM_UNAVAILABLE_B64	"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="

/* microseconds from 1970-01-01 to 2000-01-01 */
#define UNIX_TO_PG_USECS	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

typedef enum EventFormat
{
	FMT_DEBEZIUM,
	FMT_CANAL,
	FMT_MAXWELL,
	FMT_OGG,
	FMT_WAL2JSON
} EventFormat;

static const char *const format_names[] = {"debezium", "canal", "maxwell", "ogg", "wal2json"};

static const char *const format_hints[] = {
	"Debezium events are JSON objects with op, source, ts_ms, before and after, with or without the schema/payload envelope.",
	"Canal events are flat messages with type, es (milliseconds), database, table, a data array and, for updates, an old array.",
	"Maxwell events are JSON objects with type, ts (seconds), database, table, data and, for updates, old.",
	"GoldenGate events are JSON objects with op_type, op_ts, table, pos, before and after.",
	"wal2json events are rows of format-version 2 written with include-timestamp: action, timestamp, schema, table, columns and identity."
};

/* how a Debezium schema says a column's value is encoded */
typedef enum ValueKind
{
	KIND_PLAIN,					/* JSON as it is */
	KIND_BYTES,					/* base64 */
	KIND_DECIMAL,				/* base64 unscaled big-endian integer; scale */
	KIND_VARIABLE_DECIMAL,		/* {"scale": s, "value": base64} */
	KIND_DATE,					/* days since 1970-01-01 */
	KIND_TIME_MS,				/* since midnight */
	KIND_TIME_US,
	KIND_TIME_NS,
	KIND_TIMESTAMP_MS,			/* since the epoch, a wall-clock value */
	KIND_TIMESTAMP_US,
	KIND_TIMESTAMP_NS
} ValueKind;

typedef struct ValueType
{
	ValueKind	kind;
	int32		scale;			/* KIND_DECIMAL */
} ValueType;

/* a column of the zipper table that events can give */
typedef struct EventColumn
{
	AttrNumber	attnum;
	const char *name;
	int			name_len;
	bool		is_key;
	bool		is_timestamptz; /* strings without a zone: the table's zone */
	bool		is_array;		/* JSON arrays become array literals */
	bool		reads_time;		/* date/time input: no text that reads the clock */
} EventColumn;

/* how a field matched its column: folded matches yield to exact ones */
#define MATCH_NONE		0
#define MATCH_FOLDED	1
#define MATCH_EXACT		2

/* the columns a row of an event gives (new values, or a before-image) */
typedef struct RowImage
{
	uint8	   *given;			/* MATCH_* per column */
	bool	   *unavailable;	/* Debezium's placeholder: "keep" */
	char	  **text;			/* NULL: SQL NULL */
} RowImage;

/* a Debezium schema and the value types it gives the columns */
typedef struct DebeziumSchema
{
	MemoryContext context;
	char	   *bytes;			/* the schema (zl_json_bytes), compared */
	uint32		len;
	ValueType  *before;
	ValueType  *after;
} DebeziumSchema;

typedef struct EventDecoder
{
	EventFormat format;
	Relation	rel;
	const ZLTableOptions *opts;
	const char *events_name;
	const char *source_table;	/* NULL: every table */
	const char *seq_column;		/* NULL: the format's own positions */
	pg_tz	   *zone;
	int			ncolumns;
	EventColumn *columns;
	int		   *names;			/* open addressing by name hash: column + 1, 0 = empty */
	int			names_mask;
	ZLEventCallback callback;
	void	   *callback_arg;

	/* the event being decoded */
	uint64		event;
	char		ref[NAMEDATALEN + 64];
	Numeric		seq;

	RowImage	new_row;
	RowImage	old_row;
	AttrNumber *out_attnums;
	char	  **out_values;
	AttrNumber *out_kept;
	DebeziumSchema schema;
	const ValueType *types;		/* the event's before or after types, or NULL */
} EventDecoder;

/* ---------- errors ---------- */

/* "malformed <format> event"; what is wrong follows "Event <ref> " */
static void pg_attribute_noreturn()
malformed(EventDecoder *d, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("malformed %s event", format_names[d->format]),
			 errdetail("Event %s %s", d->ref, what),
			 errhint("%s", format_hints[d->format])));
	pg_unreachable();
}

static void pg_attribute_noreturn()
unknown_operation(EventDecoder *d, const char *field, const char *op, const char *known)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown %s operation \"%s\"", format_names[d->format], op),
			 errdetail("Event %s has %s \"%s\".", d->ref, field, op),
			 errhint("%s", known)));
	pg_unreachable();
}

static void pg_attribute_noreturn()
missing_time(EventDecoder *d, const char *fields, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("%s event without a time", format_names[d->format]),
			 errdetail("Event %s has no %s.", d->ref, fields),
			 errhint("%s", hint)));
	pg_unreachable();
}

/*
 * A date or time text that depends on the clock (zl_time_text_reads_clock):
 * the event's "time" or a "value"; "has <what>", e.g. op_ts "now" or
 * "today" for column "since".
 */
static void pg_attribute_noreturn()
refuse_clock(EventDecoder *d, const char *noun, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
			 errmsg("%s event %s depends on the clock", format_names[d->format], noun),
			 errdetail("Event %s has %s; PostgreSQL reads now, today, tomorrow and yesterday from the clock.",
					   d->ref, what),
			 errhint("Events must give fixed dates and times, so that a batch means the same whenever it is applied.")));
	pg_unreachable();
}

static void
event_error_context(void *arg)
{
	EventDecoder *d = arg;

	errcontext("%s event %s of \"%s\"", format_names[d->format], d->ref, d->events_name);
}

/* ---------- JSON members ---------- */

/* a member of an object; NULL if it is absent or JSON null */
static ZLJson *
member(ZLJson *object, const char *name)
{
	ZLJson	   *v = zl_json_member(object, name);

	return v != NULL && v->type != ZL_JSON_NULL ? v : NULL;
}

static bool
is_container(const ZLJson *v, bool object)
{
	return v->type == (object ? ZL_JSON_OBJECT : ZL_JSON_ARRAY);
}

/* an object or array member; NULL if absent or null and not required */
static ZLJson *
get_container(EventDecoder *d, ZLJson *object, const char *name, bool want_object,
			  bool required)
{
	ZLJson	   *v = member(object, name);

	if (v == NULL)
	{
		if (required)
			malformed(d, psprintf("has no \"%s\".", name));
		return NULL;
	}
	if (!is_container(v, want_object))
		malformed(d, psprintf("has \"%s\" of type %s; an %s was expected.", name,
							  zl_json_type_name(v), want_object ? "object" : "array"));
	return v;
}

/* a string member as a C string; NULL if absent or null and not required */
static char *
get_string(EventDecoder *d, ZLJson *object, const char *name, bool required)
{
	ZLJson	   *v = member(object, name);

	if (v == NULL)
	{
		if (required)
			malformed(d, psprintf("has no \"%s\".", name));
		return NULL;
	}
	if (v->type != ZL_JSON_STRING)
		malformed(d, psprintf("has \"%s\" of type %s; a string was expected.", name,
							  zl_json_type_name(v)));
	return pnstrdup(v->str, v->len);
}

/* a number member; NULL if absent or null */
static ZLJson *
get_number(EventDecoder *d, ZLJson *object, const char *name)
{
	ZLJson	   *v = member(object, name);

	if (v != NULL && v->type != ZL_JSON_NUMBER)
		malformed(d, psprintf("has \"%s\" of type %s; a number was expected.", name,
							  zl_json_type_name(v)));
	return v;
}

static char *
numeric_text(Numeric n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n)));
}

static void pg_attribute_noreturn()
not_an_integer(EventDecoder *d, ZLJson *v, const char *what)
{
	malformed(d, psprintf("has %s %s; an integer was expected.", what, zl_json_number_text(v)));
}

/* an integral number (times, positions) */
static int64
number_int64(EventDecoder *d, ZLJson *v, const char *what)
{
	int64		result;

	if (!zl_json_int64(v, &result))
		not_an_integer(d, v, what);
	return result;
}

/* ---------- columns ---------- */

static uint32
name_hash(const char *name, int len)
{
	return hash_bytes((const unsigned char *) name, len);
}

static void
prepare_columns(EventDecoder *d)
{
	TupleDesc	tupdesc = RelationGetDescr(d->rel);
	int			size = 8;

	d->columns = palloc0(sizeof(EventColumn) * (tupdesc->natts + 1));
	while (size < 2 * tupdesc->natts)
		size *= 2;
	d->names = palloc0(sizeof(int) * size);
	d->names_mask = size - 1;
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		EventColumn *col;
		Oid			base;
		uint32		h;

		if (att->attisdropped || att->attgenerated ||
			att->attnum == d->opts->from_attnum || att->attnum == d->opts->to_attnum)
			continue;
		col = &d->columns[d->ncolumns];
		col->attnum = att->attnum;
		col->name = NameStr(att->attname);
		col->name_len = strlen(col->name);
		for (int k = 0; k < d->opts->nkeys; k++)
			if (d->opts->key_attnums[k] == att->attnum)
				col->is_key = true;
		base = getBaseType(att->atttypid);
		col->is_timestamptz = (base == TIMESTAMPTZOID);
		col->is_array = OidIsValid(get_element_type(base));
		col->reads_time = zl_type_reads_time_text(att->atttypid);
		for (h = name_hash(col->name, col->name_len); d->names[h & d->names_mask] != 0; h++)
			;
		d->names[h & d->names_mask] = ++d->ncolumns;
	}
	d->new_row.given = palloc0(d->ncolumns + 1);
	d->new_row.unavailable = palloc0(d->ncolumns + 1);
	d->new_row.text = palloc0(sizeof(char *) * (d->ncolumns + 1));
	d->old_row.given = palloc0(d->ncolumns + 1);
	d->old_row.unavailable = palloc0(d->ncolumns + 1);
	d->old_row.text = palloc0(sizeof(char *) * (d->ncolumns + 1));
	d->out_attnums = palloc(sizeof(AttrNumber) * (d->ncolumns + 1));
	d->out_kept = palloc(sizeof(AttrNumber) * (d->ncolumns + 1));
	d->out_values = palloc(sizeof(char *) * (d->ncolumns + 1));
}

/* the column named exactly name, or -1 */
static int
column_named(EventDecoder *d, const char *name, int len)
{
	for (uint32 h = name_hash(name, len);; h++)
	{
		int			c = d->names[h & d->names_mask] - 1;

		if (c < 0)
			return -1;
		if (d->columns[c].name_len == len && memcmp(d->columns[c].name, name, len) == 0)
			return c;
	}
}

/* the column a field names (MATCH_*), see the top of the file */
static int
column_of_field(EventDecoder *d, const char *name, int len, int *column)
{
	char		folded[NAMEDATALEN];
	bool		changed = false;

	if (len <= 0 || len >= NAMEDATALEN)
		return MATCH_NONE;
	if ((*column = column_named(d, name, len)) >= 0)
		return MATCH_EXACT;
	for (int i = 0; i < len; i++)
	{
		folded[i] = name[i];
		if (name[i] >= 'A' && name[i] <= 'Z')
		{
			folded[i] += 'a' - 'A';
			changed = true;
		}
	}
	if (changed && (*column = column_named(d, folded, len)) >= 0)
		return MATCH_FOLDED;
	return MATCH_NONE;
}

/* ---------- times ---------- */

/*
 * A count of units (usecs_per_unit each) since 1970-01-01 00:00 UTC as a
 * timestamp; false if out of range.
 */
static bool
epoch_to_timestamp(int64 value, int64 usecs_per_unit, Timestamp *result)
{
	int64		usecs;

	if (pg_mul_s64_overflow(value, usecs_per_unit, &usecs) ||
		pg_sub_s64_overflow(usecs, UNIX_TO_PG_USECS, &usecs) ||
		!IS_VALID_TIMESTAMP(usecs))
		return false;
	*result = usecs;
	return true;
}

/* an event's time given as a count of units since the epoch */
static TimestampTz
epoch_time(EventDecoder *d, int64 value, int64 usecs_per_unit, const char *what)
{
	TimestampTz result;

	if (!epoch_to_timestamp(value, usecs_per_unit, &result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s event time out of range", format_names[d->format]),
				 errdetail("Event %s has %s " INT64_FORMAT ".", d->ref, what, value),
				 errhint("%s", format_hints[d->format])));
	return result;
}

/* nanoseconds to microseconds, rounding half to even as timestamp input does */
static int64
nanos_to_micros(int64 nanos)
{
	int64		q = nanos / 1000;
	int64		r = nanos % 1000;

	if (r < 0)
	{
		q--;
		r += 1000;
	}
	if (r > 500 || (r == 500 && (q & 1)))
		q++;
	return q;
}

/* a date and time parsed, zone-less ones in the table's zone */
typedef struct ParsedTime
{
	int			dterr;
	int			dtype;
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
} ParsedTime;

static void
parse_time(const char *str, ParsedTime *pt)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;

	pt->dterr = ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf);
	if (pt->dterr == 0)
		pt->dterr = DecodeDateTime(field, ftype, nf, &pt->dtype, &pt->tm, &pt->fsec, &pt->tz);
}

/*
 * Parse a date and time as timestamptz input does, except that a value
 * without a zone is taken in the table's zone rather than the session's:
 * the parser falls back on session_timezone, so it is the table's while
 * parsing.  False unless it is a finite date and time.
 */
static bool
parse_local_time(EventDecoder *d, const char *str, ParsedTime *pt)
{
	pg_tz	   *saved = session_timezone;

	if (strlen(str) >= MAXDATELEN)
		return false;
	PG_TRY();
	{
		session_timezone = d->zone;
		parse_time(str, pt);
	}
	PG_FINALLY();
	{
		session_timezone = saved;
	}
	PG_END_TRY();
	return pt->dterr == 0 && pt->dtype == DTK_DATE;
}

/*
 * A time string of an event (GoldenGate's op_ts, wal2json's timestamp): a
 * finite date and time, not one read from the clock ("now", "today 10:00").
 */
static TimestampTz
event_time_string(EventDecoder *d, const char *str, const char *field)
{
	ParsedTime	pt;
	TimestampTz result;

	if (!parse_local_time(d, str, &pt))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
				 errmsg("malformed %s event time", format_names[d->format]),
				 errdetail("Event %s has %s \"%s\", which is not a date and time.", d->ref, field, str),
				 errhint("%s", format_hints[d->format])));
	if (zl_time_text_reads_clock(str))
		refuse_clock(d, "time", psprintf("%s \"%s\"", field, str));
	if (tm2timestamp(&pt.tm, pt.fsec, &pt.tz, &result) != 0 || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s event time out of range", format_names[d->format]),
				 errdetail("Event %s has %s \"%s\".", d->ref, field, str),
				 errhint("%s", format_hints[d->format])));
	return result;
}

/*
 * A wall-clock timestamp as text for a column: with the offset of the
 * table's zone for a timestamptz column, else as it is.
 */
static char *
wall_clock_text(EventDecoder *d, const EventColumn *col, Timestamp ts)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char		buf[MAXDATELEN + 1];

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		malformed(d, psprintf("has a timestamp out of range for column \"%s\".", col->name));
	if (col->is_timestamptz)
	{
		int			tz = DetermineTimeZoneOffset(&tm, d->zone);

		tm.tm_isdst = 0;		/* printed with its offset */
		EncodeDateTime(&tm, fsec, true, tz, NULL, USE_ISO_DATES, buf);
	}
	else
		EncodeDateTime(&tm, fsec, false, 0, NULL, USE_ISO_DATES, buf);
	return pstrdup(buf);
}

/*
 * A string for a timestamptz column: a date and time without a zone is
 * taken in the table's zone, and every date and time is written with its
 * offset; anything else (special values, errors) goes to the input
 * function as it is.
 */
static char *
timestamptz_text(EventDecoder *d, char *str)
{
	ParsedTime	pt;
	char		buf[MAXDATELEN + 1];

	if (!parse_local_time(d, str, &pt))
		return str;
	pt.tm.tm_isdst = 0;
	EncodeDateTime(&pt.tm, pt.fsec, true, pt.tz, NULL, USE_ISO_DATES, buf);
	return pstrdup(buf);
}

/* ---------- values ---------- */

static void
append_array_literal(StringInfo out, ZLJson *array)
{
	int			n = zl_json_size(array);

	check_stack_depth();
	appendStringInfoChar(out, '{');
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *v = zl_json_item(array, i);
		const char *s;
		int			len;

		if (i > 0)
			appendStringInfoChar(out, ',');
		switch (v->type)
		{
			case ZL_JSON_NULL:
				appendStringInfoString(out, "NULL");
				continue;
			case ZL_JSON_ARRAY:
				append_array_literal(out, v);
				continue;
			case ZL_JSON_NUMBER:
				appendStringInfoString(out, zl_json_number_text(v));
				continue;
			case ZL_JSON_BOOL:
				appendStringInfoString(out, v->boolean ? "true" : "false");
				continue;
			case ZL_JSON_STRING:
				s = v->str;
				len = v->len;
				break;
			default:
				s = zl_json_text(v);
				len = strlen(s);
				break;
		}
		appendStringInfoChar(out, '"');
		for (int c = 0; c < len; c++)
		{
			if (s[c] == '"' || s[c] == '\\')
				appendStringInfoChar(out, '\\');
			appendStringInfoChar(out, s[c]);
		}
		appendStringInfoChar(out, '"');
	}
	appendStringInfoChar(out, '}');
}

/* text for a column whose type reads dates or times: not one of the clock */
static char *
fixed_time_text(EventDecoder *d, const EventColumn *col, char *str)
{
	if (col->reads_time && zl_time_text_reads_clock(str))
		refuse_clock(d, "value", psprintf("\"%s\" for column \"%s\"", str, col->name));
	return str;
}

/* a JSON value as it is, as text for a column; NULL for JSON null */
static char *
plain_text(EventDecoder *d, const EventColumn *col, ZLJson *v)
{
	switch (v->type)
	{
		case ZL_JSON_NULL:
			return NULL;
		case ZL_JSON_STRING:
			{
				char	   *s = fixed_time_text(d, col, pnstrdup(v->str, v->len));

				return col->is_timestamptz ? timestamptz_text(d, s) : s;
			}
		case ZL_JSON_NUMBER:
			return zl_json_number_text(v);
		case ZL_JSON_BOOL:
			return pstrdup(v->boolean ? "true" : "false");
		case ZL_JSON_ARRAY:
			if (col->is_array)
			{
				StringInfoData buf;

				initStringInfo(&buf);
				append_array_literal(&buf, v);
				return fixed_time_text(d, col, buf.data);
			}
			return zl_json_text(v);
		case ZL_JSON_OBJECT:
			return zl_json_text(v);
	}
	return NULL;				/* keep compiler quiet */
}

/* base64 to bytes; *len set */
static uint8 *
base64_bytes(EventDecoder *d, const EventColumn *col, const char *s, int slen, int *len)
{
	uint8	   *bytes = palloc(pg_b64_dec_len(slen) + 1);

	*len = pg_b64_decode(s, slen, (char *) bytes, pg_b64_dec_len(slen));
	if (*len < 0)
		malformed(d, psprintf("has a value for column \"%s\" that is not base64.", col->name));
	return bytes;
}

/*
 * A big-endian two's-complement integer scaled down by 10^scale, as
 * numeric text.
 */
static char *
unscaled_text(const uint8 *bytes, int n, int scale)
{
	bool		negative = n > 0 && (bytes[0] & 0x80) != 0;
	uint8	   *mag = palloc(n + 1);
	uint32	   *chunks = palloc(sizeof(uint32) * (n + 1));	/* base 10^9, least first */
	int			nchunks = 0;
	int			start = 0;
	StringInfoData digits;
	StringInfoData out;

	memcpy(mag, bytes, n);
	if (negative)
	{
		/* magnitude = ~x + 1 */
		int			carry = 1;

		for (int i = n - 1; i >= 0; i--)
		{
			int			b = (uint8) ~mag[i] + carry;

			mag[i] = (uint8) b;
			carry = b >> 8;
		}
	}
	while (start < n && mag[start] == 0)
		start++;
	while (start < n)
	{
		uint64		rem = 0;

		for (int i = start; i < n; i++)
		{
			uint64		cur = (rem << 8) | mag[i];

			mag[i] = (uint8) (cur / 1000000000);
			rem = cur % 1000000000;
		}
		chunks[nchunks++] = (uint32) rem;
		while (start < n && mag[start] == 0)
			start++;
	}

	initStringInfo(&digits);
	if (nchunks == 0)
		appendStringInfoChar(&digits, '0');
	else
	{
		appendStringInfo(&digits, "%u", chunks[nchunks - 1]);
		for (int i = nchunks - 2; i >= 0; i--)
			appendStringInfo(&digits, "%09u", chunks[i]);
	}

	initStringInfo(&out);
	if (negative && nchunks > 0)
		appendStringInfoChar(&out, '-');
	if (scale <= 0)
	{
		appendStringInfoString(&out, digits.data);
		if (nchunks > 0)
			for (int i = 0; i < -scale; i++)
				appendStringInfoChar(&out, '0');
	}
	else if (digits.len <= scale)
	{
		appendStringInfoString(&out, "0.");
		for (int i = digits.len; i < scale; i++)
			appendStringInfoChar(&out, '0');
		appendStringInfoString(&out, digits.data);
	}
	else
	{
		appendBinaryStringInfo(&out, digits.data, digits.len - scale);
		appendStringInfoChar(&out, '.');
		appendStringInfoString(&out, digits.data + digits.len - scale);
	}
	return out.data;
}

/* an integral JSON number of a column's value */
static int64
value_int64(EventDecoder *d, const EventColumn *col, ZLJson *v)
{
	if (v->type != ZL_JSON_NUMBER)
		malformed(d, psprintf("has a %s for column \"%s\"; its schema says a number.",
							  zl_json_type_name(v), col->name));
	return number_int64(d, v, psprintf("column \"%s\"", col->name));
}

static const char *
value_string(EventDecoder *d, const EventColumn *col, ZLJson *v, int *len)
{
	if (v->type != ZL_JSON_STRING)
		malformed(d, psprintf("has a %s for column \"%s\"; its schema says a base64 string.",
							  zl_json_type_name(v), col->name));
	*len = v->len;
	return v->str;
}

/*
 * A Decimal's unscaled value (a base64 big-endian two's-complement
 * integer) scaled down by 10^scale, as numeric text.  It has at least one
 * byte (Kafka Connect writes BigInteger.toByteArray()): no bytes at all is
 * a malformed event, not zero.
 */
static char *
decimal_text(EventDecoder *d, const EventColumn *col, ZLJson *v, int scale)
{
	int			len;
	const char *s = value_string(d, col, v, &len);
	uint8	   *bytes = base64_bytes(d, col, s, len, &len);

	if (len <= 0)				/* (base64_bytes refused negative ones) */
		malformed(d, psprintf("has a Decimal of no bytes for column \"%s\"; its unscaled value has at least one.",
							  col->name));
	return unscaled_text(bytes, len, scale);
}

/* a value of a Debezium logical type (schema envelope) as text */
static char *
decoded_text(EventDecoder *d, const EventColumn *col, const ValueType *type, ZLJson *v)
{
	struct pg_tm tm;
	char		buf[MAXDATELEN + 1];
	int64		n;
	int			len;
	const char *s;
	uint8	   *bytes;

	if (v->type == ZL_JSON_NULL)
		return NULL;
	switch (type->kind)
	{
		case KIND_PLAIN:
			return plain_text(d, col, v);
		case KIND_BYTES:
			{
				StringInfoData out;

				s = value_string(d, col, v, &len);
				bytes = base64_bytes(d, col, s, len, &len);
				initStringInfo(&out);
				appendStringInfoString(&out, "\\x");
				for (int i = 0; i < len; i++)
					appendStringInfo(&out, "%02x", bytes[i]);
				return out.data;
			}
		case KIND_DECIMAL:
			return decimal_text(d, col, v, type->scale);
		case KIND_VARIABLE_DECIMAL:
			{
				ZLJson	   *scale = is_container(v, true) ? member(v, "scale") : NULL;
				ZLJson	   *value = is_container(v, true) ? member(v, "value") : NULL;
				int64		sc;

				if (scale == NULL || value == NULL)
					malformed(d, psprintf("has a value for column \"%s\" that is not a VariableScaleDecimal {\"scale\", \"value\"}.",
										  col->name));
				sc = value_int64(d, col, scale);
				if (sc < -1000 || sc > 1000)
					malformed(d, psprintf("has scale " INT64_FORMAT " for column \"%s\".", sc, col->name));
				return decimal_text(d, col, value, (int) sc);
			}
		case KIND_DATE:
			n = value_int64(d, col, v);
			if (n < -(int64) UNIX_EPOCH_JDATE || n > (int64) PG_INT32_MAX - UNIX_EPOCH_JDATE ||
				!IS_VALID_DATE(n + UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE))
				malformed(d, psprintf("has date " INT64_FORMAT " (days) out of range for column \"%s\".",
						  n, col->name));
			j2date((int) (n + UNIX_EPOCH_JDATE), &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
			EncodeDateOnly(&tm, USE_ISO_DATES, buf);
			return pstrdup(buf);
		case KIND_TIME_MS:
		case KIND_TIME_US:
		case KIND_TIME_NS:
			{
				int64		usecs = value_int64(d, col, v);

				if (type->kind == KIND_TIME_NS)
					usecs = nanos_to_micros(usecs);
				else if (type->kind == KIND_TIME_MS && pg_mul_s64_overflow(usecs, 1000, &usecs))
					usecs = -1;
				if (usecs < 0 || usecs > USECS_PER_DAY)
					malformed(d, psprintf("has a time of day out of range for column \"%s\".", col->name));
				memset(&tm, 0, sizeof(tm));
				tm.tm_hour = usecs / USECS_PER_HOUR;
				usecs -= tm.tm_hour * USECS_PER_HOUR;
				tm.tm_min = usecs / USECS_PER_MINUTE;
				usecs -= tm.tm_min * USECS_PER_MINUTE;
				tm.tm_sec = usecs / USECS_PER_SEC;
				usecs -= tm.tm_sec * USECS_PER_SEC;
				EncodeTimeOnly(&tm, (fsec_t) usecs, false, 0, USE_ISO_DATES, buf);
				return pstrdup(buf);
			}
		case KIND_TIMESTAMP_MS:
		case KIND_TIMESTAMP_US:
		case KIND_TIMESTAMP_NS:
			{
				Timestamp	ts;

				n = value_int64(d, col, v);
				if (type->kind == KIND_TIMESTAMP_NS)
					n = nanos_to_micros(n);
				if (!epoch_to_timestamp(n, type->kind == KIND_TIMESTAMP_MS ? 1000 : 1, &ts))
					malformed(d, psprintf("has a timestamp out of range for column \"%s\".",
										  col->name));
				return wall_clock_text(d, col, ts);
			}
	}
	return NULL;				/* keep compiler quiet */
}

/* Debezium's placeholder of a value it could not read (unchanged TOAST) */
static bool
debezium_unavailable(ZLJson *v, const ValueType *type)
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

		return e->type == ZL_JSON_STRING && debezium_unavailable(e, NULL);
	}
	return false;
}

/* ---------- rows ---------- */

static void
clear_row(EventDecoder *d, RowImage *row)
{
	memset(row->given, MATCH_NONE, d->ncolumns);
	memset(row->unavailable, false, d->ncolumns);
}

/* a field's value into a row, unless an exact match set it already */
static void
set_field(EventDecoder *d, RowImage *row, const char *name, int len, ZLJson *v)
{
	int			column;
	int			match = column_of_field(d, name, len, &column);
	const ValueType *type;

	if (match == MATCH_NONE || row->given[column] > match)
		return;
	type = d->types != NULL ? &d->types[column] : NULL;
	if (d->format == FMT_DEBEZIUM && debezium_unavailable(v, type))
	{
		row->given[column] = MATCH_NONE;	/* "keep" */
		row->unavailable[column] = true;
		return;
	}
	row->text[column] = type != NULL ? decoded_text(d, &d->columns[column], type, v) :
		plain_text(d, &d->columns[column], v);
	row->given[column] = match;
}

/* the fields of an object ({"column": value, ...}) */
static void
fill_from_object(EventDecoder *d, RowImage *row, ZLJson *object, const ValueType *types)
{
	int			n = zl_json_size(object);

	clear_row(d, row);
	d->types = types;
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *key = zl_json_key(object, i);

		set_field(d, row, key->str, key->len, zl_json_item(object, i));
	}
	d->types = NULL;
}

/*
 * wal2json's [{"name": ..., "value": ...}, ...]: a list, not an object, so
 * an element for a column given before is a malformed event (an object's
 * duplicate keys are jsonb's: the last counts).
 */
static void
fill_from_wal2json(EventDecoder *d, RowImage *row, ZLJson *array, const char *what)
{
	int			n = zl_json_size(array);

	clear_row(d, row);
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *e = zl_json_item(array, i);
		ZLJson	   *name = is_container(e, true) ? zl_json_member(e, "name") : NULL;
		ZLJson	   *value = is_container(e, true) ? zl_json_member(e, "value") : NULL;
		int			column;
		int			match;

		if (name == NULL || name->type != ZL_JSON_STRING || value == NULL)
			malformed(d, psprintf("has an element of \"%s\" without a \"name\" string and a \"value\".", what));
		match = column_of_field(d, name->str, name->len, &column);
		if (match != MATCH_NONE && row->given[column] == match)
			malformed(d, psprintf("has two elements of \"%s\" for column \"%s\".", what,
								  d->columns[column].name));
		set_field(d, row, name->str, name->len, value);
	}
}

static void
require_key(EventDecoder *d, RowImage *row, const char *what)
{
	for (int i = 0; i < d->ncolumns; i++)
		if (d->columns[i].is_key && row->given[i] == MATCH_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("%s event without key column \"%s\"", format_names[d->format],
							d->columns[i].name),
					 errdetail("Event %s gives no value for key column \"%s\" of zipper table \"%s\" in its %s.",
							   d->ref, d->columns[i].name, RelationGetRelationName(d->rel), what),
					 errhint("Every change must give the zipper table's key columns, as fields named like them.%s",
							 d->format == FMT_DEBEZIUM || d->format == FMT_WAL2JSON ?
							 "  Deletes give them in their before-image or identity, which for a PostgreSQL source needs a primary key or REPLICA IDENTITY FULL." : "")));
}

static void
emit(EventDecoder *d, char op, TimestampTz time, int32 sub_seq, RowImage *row, bool keys_only)
{
	ZLEventChange change;
	int			n = 0;
	int			nkept = 0;

	if (row != NULL)
		for (int i = 0; i < d->ncolumns; i++)
		{
			if (row->given[i] != MATCH_NONE && (!keys_only || d->columns[i].is_key))
			{
				d->out_attnums[n] = d->columns[i].attnum;
				d->out_values[n] = row->text[i];
				n++;
			}
			/* wal2json leaves out exactly the unchanged TOAST values */
			else if (!keys_only && (row->unavailable[i] ||
									(d->format == FMT_WAL2JSON && row->given[i] == MATCH_NONE)))
				d->out_kept[nkept++] = d->columns[i].attnum;
		}
	change.op = op;
	change.time = time;
	change.seq = d->seq;
	change.sub_seq = sub_seq;
	change.event_ref = d->ref;
	change.event = d->event;
	change.ncolumns = n;
	change.attnums = d->out_attnums;
	change.values = d->out_values;
	change.nkept = nkept;
	change.kept = d->out_kept;
	d->callback(d->callback_arg, &change);
}

static void
emit_skipped(EventDecoder *d)
{
	emit(d, ZL_EVENT_SKIPPED, 0, 1, NULL, false);
}

static bool
same_text(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * Row `index` of an event: an upsert of new_row.  old_row (a before-image,
 * possibly of the changed columns only, or NULL) tells whether the update
 * changes the key: then the old key is deleted at the same time, first.
 */
static void
row_upsert(EventDecoder *d, TimestampTz time, int index, const char *what,
		   const char *old_what)
{
	RowImage   *new_row = &d->new_row;
	RowImage   *old_row = old_what != NULL ? &d->old_row : NULL;
	bool		key_changed = false;

	require_key(d, new_row, what);
	if (old_row != NULL)
		for (int i = 0; i < d->ncolumns; i++)
			if (d->columns[i].is_key && old_row->given[i] != MATCH_NONE &&
				!same_text(old_row->text[i], new_row->text[i]))
				key_changed = true;
	if (key_changed)
	{
		for (int i = 0; i < d->ncolumns; i++)
			if (d->columns[i].is_key && old_row->given[i] == MATCH_NONE)
			{
				old_row->given[i] = MATCH_EXACT;
				old_row->text[i] = new_row->text[i];
			}
		emit(d, ZL_EVENT_DELETE, time, 2 * index, old_row, true);
	}
	emit(d, ZL_EVENT_UPSERT, time, 2 * index + 1, new_row, false);
}

static void
row_delete(EventDecoder *d, TimestampTz time, int index, RowImage *row, const char *what)
{
	require_key(d, row, what);
	emit(d, ZL_EVENT_DELETE, time, 2 * index + 1, row, true);
}

/*
 * A change with before- and after-images (Debezium, GoldenGate): I an
 * upsert of after, U an upsert of after (and a delete of the old key if
 * before has another one), D a delete of before's key, T a truncate.
 */
static void
before_after_change(EventDecoder *d, ZLJson *object, char op, TimestampTz time,
					const ValueType *before_types, const ValueType *after_types)
{
	ZLJson	   *before;

	if (op == 'T')
	{
		emit(d, ZL_EVENT_TRUNCATE, time, 1, NULL, false);
		return;
	}
	before = op == 'I' ? NULL : get_container(d, object, "before", true, op == 'D');
	if (before != NULL)
		fill_from_object(d, &d->old_row, before, before_types);
	if (op == 'D')
	{
		row_delete(d, time, 0, &d->old_row, "before");
		return;
	}
	fill_from_object(d, &d->new_row, get_container(d, object, "after", true, true), after_types);
	row_upsert(d, time, 0, "after", before != NULL ? "before" : NULL);
}

/* ---------- source tables ---------- */

/*
 * Does the event's table match source_table?  It matches the table's
 * name, or its name qualified by schema (or database), or by both.
 */
static bool
table_matches(EventDecoder *d, const char *database, const char *schema, const char *table)
{
	const char *parts[3] = {database, schema, table};
	StringInfoData name;

	if (table == NULL)
		return false;
	initStringInfo(&name);
	for (int first = 2; first >= 0; first--)
	{
		if (parts[first] == NULL)
			continue;
		resetStringInfo(&name);
		for (int i = first; i < 3; i++)
			if (parts[i] != NULL)
				appendStringInfo(&name, "%s%s", name.len > 0 ? "." : "", parts[i]);
		if (strcmp(name.data, d->source_table) == 0)
			return true;
	}
	return false;
}

/*
 * With source_table, an event of another table is skipped: true if so.
 * The table is named by members of object (NULL: the format has none).
 */
static bool
skip_other_table(EventDecoder *d, ZLJson *object, const char *database,
				 const char *schema, const char *table)
{
	if (d->source_table == NULL)
		return false;
	if (object != NULL &&
		table_matches(d, database ? get_string(d, object, database, false) : NULL,
					  schema ? get_string(d, object, schema, false) : NULL,
					  get_string(d, object, table, false)))
		return false;
	emit_skipped(d);
	return true;
}

/* a dotted name ("SCHEMA.TABLE", GoldenGate): the whole, or a tail after a dot */
static bool
dotted_table_matches(EventDecoder *d, const char *name)
{
	size_t		len;
	size_t		want;

	if (name == NULL)
		return false;
	len = strlen(name);
	want = strlen(d->source_table);
	if (len == want)
		return strcmp(name, d->source_table) == 0;
	return len > want && name[len - want - 1] == '.' &&
		strcmp(name + len - want, d->source_table) == 0;
}

/* ---------- positions (the default seq) ---------- */

static Numeric
digits_numeric(const char *digits)
{
	return DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(digits),
											   ObjectIdGetDatum(InvalidOid),
											   Int32GetDatum(-1)));
}

static bool
all_digits(const char *s, size_t maxlen)
{
	size_t		len = strlen(s);

	if (len == 0 || len > maxlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static Numeric
uint64_numeric(uint64 value)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), UINT64_FORMAT, value);
	return digits_numeric(buf);
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

	if ((n = get_number(d, source, "lsn")) != NULL)
	{
		if (!zl_numeric_is_integer(zl_json_number(n)))
			not_an_integer(d, n, "source.lsn");
		return zl_json_number(n);
	}
	if ((n = get_number(d, source, "pos")) != NULL)
	{
		char	   *file = get_string(d, source, "file", false);
		char	   *dot = file != NULL ? strrchr(file, '.') : NULL;
		ZLJson	   *row = get_number(d, source, "row");
		int64		pos = number_int64(d, n, "source.pos");
		int64		r = row != NULL ? number_int64(d, row, "source.row") : 0;
		int64		f;

		if (dot == NULL || !all_digits(dot + 1, 7))
			malformed(d, psprintf("has source.pos but source.file %s%s%s; a binlog file name ending in its number (mysql-bin.000003) was expected.",
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
		return uint64_numeric(((uint64) f << 43) | ((uint64) pos << 11) | (uint64) r);
	}
	if ((s = get_string(d, source, "change_lsn", false)) != NULL)
	{
		unsigned int a,
					b,
					c;

		if (strlen(s) != 22 || s[8] != ':' || s[17] != ':' ||
			!hex_digits(s, 8) || !hex_digits(s + 9, 8) || !hex_digits(s + 18, 4) ||
			sscanf(s, "%8x:%8x:%4x", &a, &b, &c) != 3)
			malformed(d, psprintf("has source.change_lsn \"%s\"; a SQL Server LSN (xxxxxxxx:xxxxxxxx:xxxx, hexadecimal) was expected.", s));
		return digits_numeric(psprintf("%u%010u%05u", a, b, c));
	}
	if ((s = get_string(d, source, "scn", false)) != NULL)
	{
		if (!all_digits(s, 40))
			malformed(d, psprintf("has source.scn \"%s\"; a string of digits was expected.", s));
		return digits_numeric(s);
	}
	return NULL;
}

/* ---------- the formats ---------- */

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
	char	   *name = get_string(d, field, "name", false);
	char	   *type = get_string(d, field, "type", false);

	if (name != NULL)
		for (int i = 0; i < lengthof(logical); i++)
			if (strcmp(name, logical[i].name) == 0)
				result.kind = logical[i].kind;
	if (result.kind == KIND_PLAIN && type != NULL && strcmp(type, "bytes") == 0)
		result.kind = KIND_BYTES;
	if (result.kind == KIND_DECIMAL)
	{
		ZLJson	   *params = get_container(d, field, "parameters", true, false);
		ZLJson	   *scale = params != NULL ? member(params, "scale") : NULL;
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
			malformed(d, "has a Decimal in its schema without a valid \"scale\" parameter.");
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
		ZLJson	   *name = is_container(f, true) ? member(f, "field") : NULL;
		int			column;

		if (name == NULL || name->type != ZL_JSON_STRING)
			malformed(d, "has a schema field without a \"field\" name.");
		if (column_of_field(d, name->str, name->len, &column) != MATCH_NONE)
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

	fields = get_container(d, schema, "fields", false, false);
	n = fields != NULL ? zl_json_size(fields) : 0;
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *f = zl_json_item(fields, i);
		ZLJson	   *name = is_container(f, true) ? member(f, "field") : NULL;
		ZLJson	   *inner;
		bool		before;

		if (name == NULL || name->type != ZL_JSON_STRING)
			continue;
		before = (name->len == 6 && memcmp(name->str, "before", 6) == 0);
		if (!before && !(name->len == 5 && memcmp(name->str, "after", 5) == 0))
			continue;
		inner = get_container(d, f, "fields", false, false);
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
static void
decode_debezium(EventDecoder *d, ZLJson *root)
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
			emit_skipped(d);	/* a tombstone */
			return;
		}
		if (!is_container(v, true))
			malformed(d, psprintf("has \"payload\" of type %s; an object was expected.",
								  zl_json_type_name(v)));
		payload = v;
		if ((schema = member(root, "schema")) != NULL && is_container(schema, true))
		{
			debezium_schema(d, schema);
			before_types = d->schema.before;
			after_types = d->schema.after;
		}
	}

	op = get_string(d, payload, "op", true);
	source = get_container(d, payload, "source", true, false);
	if (skip_other_table(d, source, "db", "schema", "table"))
		return;
	if (strcmp(op, "m") == 0)
	{
		emit_skipped(d);		/* a logical decoding message, no row */
		return;
	}

	if (strlen(op) != 1 || strchr("cudrt", op[0]) == NULL)
		unknown_operation(d, "op", op,
						  "Debezium events have op c (create), r (read), u (update), d (delete), t (truncate) or m (message, skipped).");

	ts = source != NULL ? get_number(d, source, "ts_ms") : NULL;
	ts_ms = ts != NULL ? number_int64(d, ts, "source.ts_ms") : 0;
	if (ts_ms == 0)
	{
		ts = get_number(d, payload, "ts_ms");
		if (ts == NULL)
			missing_time(d, "source.ts_ms (or it is 0) and no ts_ms",
						 "Debezium events carry source.ts_ms, and ts_ms in the envelope.");
		ts_ms = number_int64(d, ts, "ts_ms");
	}
	time = epoch_time(d, ts_ms, 1000, "ts_ms");
	if (d->seq == NULL && source != NULL)
		d->seq = debezium_position(d, source);

	before_after_change(d, payload, op[0] == 'c' || op[0] == 'r' ? 'I' : pg_toupper((unsigned char) op[0]),
						time, before_types, after_types);
}

/* Canal's event types that are no row changes */
static bool
canal_ddl_type(const char *type)
{
	static const char *const ddl[] = {"CREATE", "ALTER", "ERASE", "QUERY", "TRUNCATE",
	"RENAME", "CINDEX", "DINDEX", "GTID", "XACOMMIT", "XAROLLBACK", "MHEARTBEAT"};

	for (int i = 0; i < lengthof(ddl); i++)
		if (pg_strcasecmp(type, ddl[i]) == 0)
			return true;
	return false;
}

/*
 * Canal flat messages: several rows an event in "data" (and their changed
 * columns' old values in "old"), kept in array order; values are strings;
 * the time is es (milliseconds).  DDL events (isDdl true, or a DDL type)
 * are skipped; isDdl is a boolean.  "old" has no more rows than "data"
 * (it may have fewer: Canal leaves out a row whose update changed no
 * column).  Canal has no position: seq is NULL unless a seq column gives
 * it.
 */
static void
decode_canal(EventDecoder *d, ZLJson *root)
{
	ZLJson	   *v;
	char	   *type;
	ZLJson	   *es;
	TimestampTz time;
	ZLJson	   *data;
	ZLJson	   *old;
	int			nrows;

	type = get_string(d, root, "type", true);
	if ((v = member(root, "isDdl")) != NULL && v->type != ZL_JSON_BOOL)
		malformed(d, psprintf("has \"isDdl\" of type %s; a boolean was expected.",
							  zl_json_type_name(v)));
	if ((v != NULL && v->boolean) || canal_ddl_type(type))
	{
		emit_skipped(d);
		return;
	}
	if (skip_other_table(d, root, "database", NULL, "table"))
		return;
	if (pg_strcasecmp(type, "INSERT") != 0 && pg_strcasecmp(type, "UPDATE") != 0 &&
		pg_strcasecmp(type, "DELETE") != 0)
		unknown_operation(d, "type", type,
						  "Canal events have type INSERT, UPDATE or DELETE; DDL events (isDdl true) are skipped.");
	es = get_number(d, root, "es");
	if (es == NULL)
		missing_time(d, "es", "Canal flat messages carry es, the time of the change in milliseconds.");
	time = epoch_time(d, number_int64(d, es, "es"), 1000, "es");

	data = get_container(d, root, "data", false, true);
	nrows = zl_json_size(data);
	if (nrows == 0)
		malformed(d, "has an empty \"data\" array.");
	old = pg_strcasecmp(type, "UPDATE") == 0 ? get_container(d, root, "old", false, false) : NULL;
	if (old != NULL && zl_json_size(old) > nrows)
		malformed(d, psprintf("has %d rows in \"old\" but %d in \"data\"; \"old\" holds the old values of rows of \"data\".",
							  zl_json_size(old), nrows));
	for (int i = 0; i < nrows; i++)
	{
		ZLJson	   *row = zl_json_item(data, i);
		ZLJson	   *old_row = (old != NULL && i < zl_json_size(old)) ? zl_json_item(old, i) : NULL;

		if (!is_container(row, true))
			malformed(d, "has a row of \"data\" that is not an object.");
		fill_from_object(d, &d->new_row, row, NULL);
		if (pg_strcasecmp(type, "DELETE") == 0)
			row_delete(d, time, i, &d->new_row, "data");
		else
		{
			if (old_row != NULL && old_row->type != ZL_JSON_NULL)
			{
				if (!is_container(old_row, true))
					malformed(d, "has a row of \"old\" that is not an object.");
				fill_from_object(d, &d->old_row, old_row, NULL);
			}
			else
				old_row = NULL;
			row_upsert(d, time, i, "data", old_row != NULL ? "old" : NULL);
		}
	}
}

/*
 * Maxwell: {"database", "table", "type", "ts" (seconds), "xid", "xoffset",
 * "data", "old"}.  bootstrap-insert is an upsert; bootstrap-start and
 * -complete and DDL events (table-*, database-*) are skipped.  Its
 * position is xid * 2^20 + xoffset (the row's offset in its transaction,
 * when Maxwell writes it).
 */
static void
decode_maxwell(EventDecoder *d, ZLJson *root)
{
	char	   *type;
	ZLJson	   *ts;
	ZLJson	   *xid;
	TimestampTz time;
	bool		upsert;

	type = get_string(d, root, "type", true);
	if (strcmp(type, "bootstrap-start") == 0 || strcmp(type, "bootstrap-complete") == 0 ||
		strncmp(type, "table-", 6) == 0 || strncmp(type, "database-", 9) == 0)
	{
		emit_skipped(d);
		return;
	}
	if (skip_other_table(d, root, "database", NULL, "table"))
		return;
	upsert = strcmp(type, "insert") == 0 || strcmp(type, "update") == 0 ||
		strcmp(type, "bootstrap-insert") == 0;
	if (!upsert && strcmp(type, "delete") != 0)
		unknown_operation(d, "type", type,
						  "Maxwell events have type insert, update, delete or bootstrap-insert; bootstrap-start, bootstrap-complete and DDL events are skipped.");
	ts = get_number(d, root, "ts");
	if (ts == NULL)
		missing_time(d, "ts", "Maxwell events carry ts, the time of the change in seconds.");
	time = epoch_time(d, number_int64(d, ts, "ts"), USECS_PER_SEC, "ts");

	if (d->seq == NULL && (xid = get_number(d, root, "xid")) != NULL)
	{
		ZLJson	   *xoffset = get_number(d, root, "xoffset");
		int64		x = number_int64(d, xid, "xid");
		int64		off = xoffset != NULL ? number_int64(d, xoffset, "xoffset") : 0;

		if (x < 0 || x >= (INT64CONST(1) << 43) || off < 0 || off >= (1 << 20))
			malformed(d, psprintf("has xid " INT64_FORMAT " and xoffset " INT64_FORMAT "; non-negative numbers (xid below 2^43, xoffset below 2^20) were expected.",
					  x, off));
		/* one 63-bit number (README "Loading CDC events") */
		d->seq = uint64_numeric(((uint64) x << 20) | (uint64) off);
	}

	fill_from_object(d, &d->new_row, get_container(d, root, "data", true, true), NULL);
	if (!upsert)
		row_delete(d, time, 0, &d->new_row, "data");
	else
	{
		ZLJson	   *old = strcmp(type, "update") == 0 ?
			get_container(d, root, "old", true, false) : NULL;

		if (old != NULL)
			fill_from_object(d, &d->old_row, old, NULL);
		row_upsert(d, time, 0, "data", old != NULL ? "old" : NULL);
	}
}

/*
 * GoldenGate JSON: {"table": "SCHEMA.TABLE", "op_type", "op_ts", "pos",
 * "before", "after"}; op_type I, U, D, and T (truncate).  op_ts has no
 * zone: it is taken in the table's time_zone.  Its position is pos (the
 * trail file's sequence number and offset, 20 digits) as a number.
 */
static void
decode_ogg(EventDecoder *d, ZLJson *root)
{
	char	   *op;
	char	   *op_ts;
	TimestampTz time;
	ZLJson	   *pos;

	op = get_string(d, root, "op_type", true);
	if (d->source_table != NULL && !dotted_table_matches(d, get_string(d, root, "table", false)))
	{
		emit_skipped(d);
		return;
	}
	if (strlen(op) != 1 || strchr("IUDT", pg_toupper((unsigned char) op[0])) == NULL)
		unknown_operation(d, "op_type", op,
						  "GoldenGate events have op_type I (insert), U (update), D (delete) or T (truncate).");
	op_ts = get_string(d, root, "op_ts", false);
	if (op_ts == NULL)
		missing_time(d, "op_ts", "GoldenGate events carry op_ts, the time of the operation.");
	time = event_time_string(d, op_ts, "op_ts");
	if (d->seq == NULL && (pos = member(root, "pos")) != NULL)
	{
		char	   *p = pos->type == ZL_JSON_STRING ? pnstrdup(pos->str, pos->len) :
			pos->type == ZL_JSON_NUMBER ? zl_json_number_text(pos) : "";

		if (!all_digits(p, 40))
			malformed(d, psprintf("has pos \"%s\"; a string of digits was expected.", p));
		d->seq = digits_numeric(p);
	}

	before_after_change(d, root, pg_toupper((unsigned char) op[0]), time, NULL, NULL);
}

/*
 * wal2json format-version 2, one row a change: {"action", "timestamp"
 * (include-timestamp), "lsn" (include-lsn), "schema", "table", "columns",
 * "identity"}.  Begin, commit and message rows (B, C, M) are skipped.
 * Columns wal2json leaves out (unchanged TOAST values) are kept.  The
 * identity (the old key, or with REPLICA IDENTITY FULL the old row) gives
 * a delete's key and tells whether an update changed the key.  Its
 * position is lsn.
 */
static void
decode_wal2json(EventDecoder *d, ZLJson *root)
{
	char	   *action;
	char	   *stamp;
	char	   *lsn;
	TimestampTz time;

	action = get_string(d, root, "action", true);
	if (strcmp(action, "B") == 0 || strcmp(action, "C") == 0 || strcmp(action, "M") == 0)
	{
		emit_skipped(d);
		return;
	}
	if (skip_other_table(d, root, NULL, "schema", "table"))
		return;
	if (strlen(action) != 1 || strchr("IUDT", action[0]) == NULL)
		unknown_operation(d, "action", action,
						  "wal2json rows (format-version 2) have action I, U, D or T; B, C and M rows are skipped.");
	stamp = get_string(d, root, "timestamp", false);
	if (stamp == NULL)
		missing_time(d, "timestamp",
					 "Read the slot with wal2json's options format-version 2 and include-timestamp.");
	time = event_time_string(d, stamp, "timestamp");
	if (d->seq == NULL && (lsn = get_string(d, root, "lsn", false)) != NULL)
	{
		bool		have_error = false;
		XLogRecPtr	ptr = pg_lsn_in_internal(lsn, &have_error);

		if (have_error)
			malformed(d, psprintf("has lsn \"%s\", which is not an LSN.", lsn));
		d->seq = uint64_numeric(ptr);
	}

	switch (action[0])
	{
		case 'I':
			fill_from_wal2json(d, &d->new_row, get_container(d, root, "columns", false, true), "columns");
			row_upsert(d, time, 0, "columns", NULL);
			break;
		case 'U':
			{
				ZLJson	   *identity = get_container(d, root, "identity", false, false);

				fill_from_wal2json(d, &d->new_row, get_container(d, root, "columns", false, true), "columns");
				if (identity != NULL)
					fill_from_wal2json(d, &d->old_row, identity, "identity");
				row_upsert(d, time, 0, "columns", identity != NULL ? "identity" : NULL);
				break;
			}
		case 'D':
			fill_from_wal2json(d, &d->old_row, get_container(d, root, "identity", false, true), "identity");
			row_delete(d, time, 0, &d->old_row, "identity");
			break;
		default:
			emit(d, ZL_EVENT_TRUNCATE, time, 1, NULL, false);
			break;
	}
}

/* ---------- reading the events ---------- */

/* an event's JSON text; not JSON is a malformed event */
static void
parse_event_text(EventDecoder *d, text *t, ZLJson *root)
{
	int			at;
	const char *error = zl_json_parse_text(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), root, &at);

	if (error != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("malformed %s event", format_names[d->format]),
				 errdetail("Event %s is not valid JSON: %s at character %d.", d->ref, error, at + 1),
				 errhint("%s", format_hints[d->format])));
}

static void
decode_event(EventDecoder *d, ZLJson *root)
{
	if (root->type == ZL_JSON_NULL)
	{
		emit_skipped(d);		/* a JSON null: a tombstone */
		return;
	}
	if (root->type != ZL_JSON_OBJECT)
		malformed(d, psprintf("is a JSON %s, not an object.", zl_json_type_name(root)));
	switch (d->format)
	{
		case FMT_DEBEZIUM:
			decode_debezium(d, root);
			break;
		case FMT_CANAL:
			decode_canal(d, root);
			break;
		case FMT_MAXWELL:
			decode_maxwell(d, root);
			break;
		case FMT_OGG:
			decode_ogg(d, root);
			break;
		case FMT_WAL2JSON:
			decode_wal2json(d, root);
			break;
	}
}

/* a column of the events relation by name, or an error */
static AttrNumber
events_column(Oid relid, const char *name, const char *argument)
{
	AttrNumber	attnum = get_attnum(relid, name);

	if (attnum == InvalidAttrNumber || attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of events \"%s\" does not exist", name, get_rel_name(relid)),
				 errdetail("Argument %s names it.", argument),
				 errhint("Pass the column that holds the %s as %s => 'column'.",
						 strcmp(argument, "event") == 0 ? "events" : "order of the events",
						 argument)));
	return attnum;
}

static EventFormat
parse_format(const char *format)
{
	for (int i = 0; i < lengthof(format_names); i++)
		if (pg_strcasecmp(format, format_names[i]) == 0)
			return (EventFormat) i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown event format \"%s\"", format),
			 errhint("The formats are debezium, canal, maxwell, ogg and wal2json.")));
	return FMT_DEBEZIUM;		/* keep compiler quiet */
}

/*
 * The query reading the events: the event (jsonb, or text), the row's
 * ctid and tableoid where the relation has them, and the seq column as
 * numeric.
 */
static char *
events_query(Oid relid, const char *event_column, const char *seq_column, bool *is_jsonb,
			 bool *has_ctid, bool *has_tableoid)
{
	StringInfoData sql;
	AttrNumber	attnum = events_column(relid, event_column, "event");
	Oid			type = getBaseType(get_atttype(relid, attnum));
	char		relkind = get_rel_relkind(relid);

	initStringInfo(&sql);
	if (type != JSONBOID && type != JSONOID && type != TEXTOID && type != VARCHAROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("event column \"%s\" of \"%s\" has type %s", event_column,
						get_rel_name(relid), format_type_be(get_atttype(relid, attnum))),
				 errhint("Keep events in a json, jsonb or text column.")));
	*is_jsonb = (type == JSONBOID);
	/* system columns need SELECT on the whole relation, not just some columns */
	*has_ctid = (relkind == RELKIND_RELATION || relkind == RELKIND_MATVIEW ||
				 relkind == RELKIND_PARTITIONED_TABLE) &&
		pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	*has_tableoid = *has_ctid && (relkind == RELKIND_PARTITIONED_TABLE || has_subclass(relid));
	appendStringInfo(&sql, "SELECT CAST(%s AS pg_catalog.%s), %s, %s, ",
					 quote_identifier(event_column), *is_jsonb ? "jsonb" : "text",
					 *has_ctid ? "ctid" : "NULL::pg_catalog.tid",
					 *has_tableoid ? "tableoid" : "NULL::pg_catalog.oid");
	if (seq_column == NULL)
		appendStringInfoString(&sql, "NULL::pg_catalog.numeric");
	else
	{
		AttrNumber	seq_attnum = events_column(relid, seq_column, "seq");
		Oid			seq_type = getBaseType(get_atttype(relid, seq_attnum));

		if (seq_type == PG_LSNOID)
			appendStringInfo(&sql, "(%s OPERATOR(pg_catalog.-) '0/0'::pg_catalog.pg_lsn)",
							 quote_identifier(seq_column));
		else if (seq_type == INT2OID || seq_type == INT4OID || seq_type == INT8OID ||
				 seq_type == NUMERICOID)
			appendStringInfo(&sql, "CAST(%s AS pg_catalog.numeric)", quote_identifier(seq_column));
		else
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("seq column \"%s\" of \"%s\" has type %s", seq_column,
							get_rel_name(relid), format_type_be(get_atttype(relid, seq_attnum))),
					 errhint("The order of events is an integer, numeric or pg_lsn column.")));
	}
	appendStringInfo(&sql, " FROM %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												get_rel_name(relid)));
	return sql.data;
}

void
zl_events_decode(Relation rel, const ZLTableOptions *opts, Oid events_relid,
				 const char *format, const char *event_column, const char *seq_column,
				 const char *source_table, ZLEventCallback callback, void *arg)
{
	EventDecoder d;
	MemoryContext call_context = CurrentMemoryContext;
	MemoryContext event_context;
	MemoryContext old;
	ErrorContextCallback errcallback;
	Portal		portal;
	char	   *sql;
	bool		is_jsonb;
	bool		has_ctid;
	bool		has_tableoid;
	Oid			last_tableoid = InvalidOid;
	char	   *last_tablename = NULL;
	uint64		row = 0;

	memset(&d, 0, sizeof(d));
	d.format = parse_format(format);
	d.rel = rel;
	d.opts = opts;
	d.events_name = zl_relation_arg_name(events_relid, "events");
	d.source_table = source_table;
	d.seq_column = seq_column;
	d.zone = pg_tzset(opts->time_zone);
	if (d.zone == NULL)
		elog(ERROR, "unknown time zone \"%s\"", opts->time_zone);
	d.callback = callback;
	d.callback_arg = arg;
	prepare_columns(&d);
	d.schema.context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake event schema",
											 ALLOCSET_SMALL_SIZES);
	event_context = AllocSetContextCreate(CurrentMemoryContext, "zipper_lake event",
										  ALLOCSET_DEFAULT_SIZES);
	sql = events_query(events_relid, event_column, seq_column, &is_jsonb, &has_ctid,
					   &has_tableoid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, sql, 0, NULL, NULL, NULL, true, 0);
	strlcpy(d.ref, "(none)", sizeof(d.ref));
	errcallback.callback = event_error_context;
	errcallback.arg = &d;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	for (;;)
	{
		SPI_cursor_fetch(portal, true, ZL_EVENTS_FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		for (uint64 f = 0; f < SPI_processed; f++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[f];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		event_null;
			bool		ctid_null;
			bool		tableoid_null;
			bool		seq_null;
			Datum		event = heap_getattr(tuple, 1, desc, &event_null);
			Datum		ctid = heap_getattr(tuple, 2, desc, &ctid_null);
			Datum		tableoid = heap_getattr(tuple, 3, desc, &tableoid_null);
			Datum		seq = heap_getattr(tuple, 4, desc, &seq_null);

			CHECK_FOR_INTERRUPTS();
			d.event = ++row;
			old = MemoryContextSwitchTo(event_context);
			d.seq = seq_null ? NULL : DatumGetNumeric(seq);
			if (!seq_null)
			{
				snprintf(d.ref, sizeof(d.ref), "seq %s", numeric_text(d.seq));
				if (!zl_numeric_is_integer(d.seq))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("event position %s is not an integer", numeric_text(d.seq)),
							 errdetail("Event %s has %s in seq column \"%s\".", d.ref,
									   numeric_text(d.seq), d.seq_column),
							 errhint("Positions order the changes of one time and are integers (5.0 is 5); nothing was applied.")));
			}
			else if (!ctid_null)
			{
				ItemPointer tid = (ItemPointer) DatumGetPointer(ctid);

				snprintf(d.ref, sizeof(d.ref), "ctid (%u,%u)",
						 ItemPointerGetBlockNumberNoCheck(tid),
						 ItemPointerGetOffsetNumberNoCheck(tid));
				if (!tableoid_null)
				{
					/* which partition or child: rows of one come together */
					if (DatumGetObjectId(tableoid) != last_tableoid)
					{
						last_tableoid = DatumGetObjectId(tableoid);
						last_tablename = MemoryContextStrdup(call_context,
															 get_rel_name(last_tableoid));
					}
					strlcat(d.ref, " of ", sizeof(d.ref));
					strlcat(d.ref, last_tablename, sizeof(d.ref));
				}
			}
			else
				snprintf(d.ref, sizeof(d.ref), "row " UINT64_FORMAT, row);

			if (event_null)
				emit_skipped(&d);	/* a tombstone */
			else
			{
				ZLJson		root;

				if (is_jsonb)
				{
					Jsonb	   *jb = DatumGetJsonbP(event);

					zl_json_from_jsonb(&jb->root, VARSIZE(jb) - VARHDRSZ, &root);
				}
				else
					parse_event_text(&d, DatumGetTextPP(event), &root);
				decode_event(&d, &root);
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(event_context);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	error_context_stack = errcallback.previous;
	SPI_cursor_close(portal);
	SPI_finish();
	MemoryContextDelete(event_context);
	MemoryContextDelete(d.schema.context);
}

/* ---------- zipper_lake._decode_events() ---------- */

typedef struct DecodeOutput
{
	ReturnSetInfo *rsinfo;
	TupleDesc	tupdesc;
	Datum	   *names;			/* column names as text, by attnum */
} DecodeOutput;

static void
put_change(void *arg, const ZLEventChange *change)
{
	DecodeOutput *out = arg;
	Datum		values[7];
	bool		nulls[7] = {0};

	values[0] = CharGetDatum(change->op);
	values[1] = TimestampTzGetDatum(change->time);
	nulls[1] = (change->op == ZL_EVENT_SKIPPED);
	values[2] = NumericGetDatum(change->seq);
	nulls[2] = (change->seq == NULL);
	values[3] = Int32GetDatum(change->sub_seq);
	values[4] = CStringGetTextDatum(change->event_ref);
	if (change->op == ZL_EVENT_UPSERT || change->op == ZL_EVENT_DELETE)
	{
		Datum	   *names = palloc(sizeof(Datum) * (change->ncolumns + 1));
		Datum	   *texts = palloc(sizeof(Datum) * (change->ncolumns + 1));
		bool	   *text_nulls = palloc(sizeof(bool) * (change->ncolumns + 1));
		int			dims[1] = {change->ncolumns};
		int			lbs[1] = {1};

		for (int i = 0; i < change->ncolumns; i++)
		{
			names[i] = out->names[change->attnums[i]];
			text_nulls[i] = (change->values[i] == NULL);
			texts[i] = text_nulls[i] ? (Datum) 0 : CStringGetTextDatum(change->values[i]);
		}
		values[5] = PointerGetDatum(construct_md_array(names, NULL, 1, dims, lbs, TEXTOID,
													   -1, false, TYPALIGN_INT));
		values[6] = PointerGetDatum(construct_md_array(texts, text_nulls, 1, dims, lbs, TEXTOID,
													   -1, false, TYPALIGN_INT));
	}
	else
		nulls[5] = nulls[6] = true;
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

static char *
text_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

static char *
name_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : pstrdup(NameStr(*PG_GETARG_NAME(argno)));
}

/*
 * _decode_events(tbl, events, format, event, seq, source_table): the
 * changes of the events for a zipper table, as rows (see the top of the
 * file).  It needs SELECT on the events only: they are read as the caller.
 */
Datum
zipper_lake_decode_events(PG_FUNCTION_ARGS)
{
	DecodeOutput out;
	Relation	rel;
	ZLTableOptions opts;
	TupleDesc	tupdesc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, events, format and event must not be null"),
				 errdetail("Argument %s is null.",
						   PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "events" :
						   PG_ARGISNULL(2) ? "format" : "event"),
				 errhint("Pass the zipper table, the relation holding the events, their format and their column.")));
	InitMaterializedSRF(fcinfo, 0);
	rel = zl_open_zipper_table(PG_GETARG_OID(0), AccessShareLock);
	zl_load_registration(rel, &opts, false,
						 "Events are decoded into the key and columns named at registration.",
						 "Register it with zipper_lake.register().");

	out.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	tupdesc = RelationGetDescr(rel);
	out.names = palloc0(sizeof(Datum) * (tupdesc->natts + 1));
	for (int i = 0; i < tupdesc->natts; i++)
		out.names[i + 1] = CStringGetTextDatum(NameStr(TupleDescAttr(tupdesc, i)->attname));
	zl_events_decode(rel, &opts, PG_GETARG_OID(1), text_arg(fcinfo, 2), name_arg(fcinfo, 3),
					 name_arg(fcinfo, 4), text_arg(fcinfo, 5), put_change, &out);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}
