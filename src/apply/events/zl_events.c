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
 * Files: this one is the decoder's core (errors, JSON members, columns,
 * rows, source tables, reading the events, the table of formats);
 * zl_events_values.c converts times and values; each format has a file,
 * zl_events_<format>.c, exporting its decode function, which the table
 * zl_ev_formats names; zl_events_json.c reads the JSON.  What they share
 * is in zl_events_internal.h (zl_ev_* functions).
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
 * Values are converted as zl_events_values.c says.
 *
 * Mapping fields to columns: a JSON field names the column of exactly its
 * name, else the column named as the field with its ASCII letters in lower
 * case (Oracle's upper-case names through GoldenGate or Debezium); an
 * exact match wins over a folded one.  Fields that name no column, the
 * period columns or generated columns are ignored.
 *
 * Order inside an event: row i of an event (Canal's data array; every
 * other format has one row) gives sub_seq 2i + 1; an update that changes
 * the key gives the delete of its old key 2i, before the upsert of the new
 * one, at the same time.  The seq column, when given, is the seq of every
 * change of its event; else each format's own position (see the banner of
 * each format's file), or NULL.
 *
 * Errors name the event (errdetail), and an error context names the event
 * for errors raised by the functions the decoder calls.
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
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(zipper_lake_decode_events);

/* events read from the relation at a time */
#define ZL_EVENTS_FETCH_ROWS	1000

/*
 * The formats, by EventFormat: their names (parse_format), the hint of
 * their errors and their decoders (decode_event).
 */
const ZLEventFormat zl_ev_formats[] = {
	[FMT_DEBEZIUM] = {"debezium", zl_ev_decode_debezium,
		"Debezium events are JSON objects with op, source, ts_ms, before and after, with or without the schema/payload envelope."},
	[FMT_CANAL] = {"canal", zl_ev_decode_canal,
		"Canal events are flat messages with type, es (milliseconds), database, table, a data array and, for updates, an old array."},
	[FMT_MAXWELL] = {"maxwell", zl_ev_decode_maxwell,
		"Maxwell events are JSON objects with type, ts (seconds), database, table, data and, for updates, old."},
	[FMT_OGG] = {"ogg", zl_ev_decode_ogg,
		"GoldenGate events are JSON objects with op_type, op_ts, table, pos, before and after."},
	[FMT_WAL2JSON] = {"wal2json", zl_ev_decode_wal2json,
		"wal2json events are rows of format-version 2 written with include-timestamp: action, timestamp, schema, table, columns and identity."}
};

/* ---------- errors ---------- */

/* "malformed <format> event"; what is wrong follows "Event <ref> " */
void pg_attribute_noreturn()
zl_ev_malformed(EventDecoder *d, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("malformed %s event", zl_ev_formats[d->format].name),
			 errdetail("Event %s %s", d->ref, what),
			 errhint("%s", zl_ev_formats[d->format].hint)));
	pg_unreachable();
}

void pg_attribute_noreturn()
zl_ev_unknown_operation(EventDecoder *d, const char *field, const char *op, const char *known)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown %s operation \"%s\"", zl_ev_formats[d->format].name, op),
			 errdetail("Event %s has %s \"%s\".", d->ref, field, op),
			 errhint("%s", known)));
	pg_unreachable();
}

void pg_attribute_noreturn()
zl_ev_missing_time(EventDecoder *d, const char *fields, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("%s event without a time", zl_ev_formats[d->format].name),
			 errdetail("Event %s has no %s.", d->ref, fields),
			 errhint("%s", hint)));
	pg_unreachable();
}

/*
 * A date or time text that depends on the clock (zl_time_text_reads_clock):
 * the event's "time" or a "value"; "has <what>", e.g. op_ts "now" or
 * "today" for column "since".
 */
void pg_attribute_noreturn()
zl_ev_refuse_clock(EventDecoder *d, const char *noun, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
			 errmsg("%s event %s depends on the clock", zl_ev_formats[d->format].name, noun),
			 errdetail("Event %s has %s; PostgreSQL reads now, today, tomorrow and yesterday from the clock.",
					   d->ref, what),
			 errhint("Events must give fixed dates and times, so that a batch means the same whenever it is applied.")));
	pg_unreachable();
}

static void
event_error_context(void *arg)
{
	EventDecoder *d = arg;

	errcontext("%s event %s of \"%s\"", zl_ev_formats[d->format].name, d->ref, d->events_name);
}

/* ---------- JSON members ---------- */

/* a member of an object; NULL if it is absent or JSON null */
ZLJson *
zl_ev_member(ZLJson *object, const char *name)
{
	ZLJson	   *v = zl_json_member(object, name);

	return v != NULL && v->type != ZL_JSON_NULL ? v : NULL;
}

bool
zl_ev_is_container(const ZLJson *v, bool object)
{
	return v->type == (object ? ZL_JSON_OBJECT : ZL_JSON_ARRAY);
}

/* a member; NULL if absent or null and not required, else an error */
static ZLJson *
wanted_member(EventDecoder *d, ZLJson *object, const char *name, bool required)
{
	ZLJson	   *v = zl_ev_member(object, name);

	if (v == NULL && required)
		zl_ev_malformed(d, psprintf("has no \"%s\".", name));
	return v;
}

/* an object or array member; NULL if absent or null and not required */
ZLJson *
zl_ev_get_container(EventDecoder *d, ZLJson *object, const char *name, bool want_object,
			  bool required)
{
	ZLJson	   *v = wanted_member(d, object, name, required);

	if (v == NULL)
		return NULL;
	if (!zl_ev_is_container(v, want_object))
		zl_ev_malformed(d, psprintf("has \"%s\" of type %s; an %s was expected.", name,
							  zl_json_type_name(v), want_object ? "object" : "array"));
	return v;
}

/* a string member as a C string; NULL if absent or null and not required */
char *
zl_ev_get_string(EventDecoder *d, ZLJson *object, const char *name, bool required)
{
	ZLJson	   *v = wanted_member(d, object, name, required);

	if (v == NULL)
		return NULL;
	if (v->type != ZL_JSON_STRING)
		zl_ev_malformed(d, psprintf("has \"%s\" of type %s; a string was expected.", name,
							  zl_json_type_name(v)));
	return pnstrdup(v->str, v->len);
}

/* a number member; NULL if absent or null */
ZLJson *
zl_ev_get_number(EventDecoder *d, ZLJson *object, const char *name)
{
	ZLJson	   *v = zl_ev_member(object, name);

	if (v != NULL && v->type != ZL_JSON_NUMBER)
		zl_ev_malformed(d, psprintf("has \"%s\" of type %s; a number was expected.", name,
							  zl_json_type_name(v)));
	return v;
}

static char *
numeric_text(Numeric n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n)));
}

void pg_attribute_noreturn()
zl_ev_not_an_integer(EventDecoder *d, ZLJson *v, const char *what)
{
	zl_ev_malformed(d, psprintf("has %s %s; an integer was expected.", what, zl_json_number_text(v)));
}

/* an integral number (times, positions) */
int64
zl_ev_number_int64(EventDecoder *d, ZLJson *v, const char *what)
{
	int64		result;

	if (!zl_json_int64(v, &result))
		zl_ev_not_an_integer(d, v, what);
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
int
zl_ev_column_of_field(EventDecoder *d, const char *name, int len, int *column)
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
	int			match = zl_ev_column_of_field(d, name, len, &column);
	const ValueType *type;

	if (match == MATCH_NONE || row->given[column] > match)
		return;
	type = d->types != NULL ? &d->types[column] : NULL;
	if (d->format == FMT_DEBEZIUM && zl_ev_debezium_unavailable(v, type))
	{
		row->given[column] = MATCH_NONE;	/* "keep" */
		row->unavailable[column] = true;
		return;
	}
	row->text[column] = type != NULL ? zl_ev_decoded_text(d, &d->columns[column], type, v) :
		zl_ev_plain_text(d, &d->columns[column], v);
	row->given[column] = match;
}

/* the fields of an object ({"column": value, ...}) */
void
zl_ev_fill_from_object(EventDecoder *d, RowImage *row, ZLJson *object, const ValueType *types)
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
void
zl_ev_fill_from_wal2json(EventDecoder *d, RowImage *row, ZLJson *array, const char *what)
{
	int			n = zl_json_size(array);

	clear_row(d, row);
	for (int i = 0; i < n; i++)
	{
		ZLJson	   *e = zl_json_item(array, i);
		ZLJson	   *name = zl_ev_is_container(e, true) ? zl_json_member(e, "name") : NULL;
		ZLJson	   *value = zl_ev_is_container(e, true) ? zl_json_member(e, "value") : NULL;
		int			column;
		int			match;

		if (name == NULL || name->type != ZL_JSON_STRING || value == NULL)
			zl_ev_malformed(d, psprintf("has an element of \"%s\" without a \"name\" string and a \"value\".", what));
		match = zl_ev_column_of_field(d, name->str, name->len, &column);
		if (match != MATCH_NONE && row->given[column] == match)
			zl_ev_malformed(d, psprintf("has two elements of \"%s\" for column \"%s\".", what,
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
					 errmsg("%s event without key column \"%s\"", zl_ev_formats[d->format].name,
							d->columns[i].name),
					 errdetail("Event %s gives no value for key column \"%s\" of zipper table \"%s\" in its %s.",
							   d->ref, d->columns[i].name, RelationGetRelationName(d->rel), what),
					 errhint("Every change must give the zipper table's key columns, as fields named like them.%s",
							 d->format == FMT_DEBEZIUM || d->format == FMT_WAL2JSON ?
							 "  Deletes give them in their before-image or identity, which for a PostgreSQL source needs a primary key or REPLICA IDENTITY FULL." : "")));
}

void
zl_ev_emit(EventDecoder *d, char op, TimestampTz time, int32 sub_seq, RowImage *row, bool keys_only)
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

void
zl_ev_emit_skipped(EventDecoder *d)
{
	zl_ev_emit(d, ZL_EVENT_SKIPPED, 0, 1, NULL, false);
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
void
zl_ev_row_upsert(EventDecoder *d, TimestampTz time, int index, const char *what,
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
		zl_ev_emit(d, ZL_EVENT_DELETE, time, 2 * index, old_row, true);
	}
	zl_ev_emit(d, ZL_EVENT_UPSERT, time, 2 * index + 1, new_row, false);
}

void
zl_ev_row_delete(EventDecoder *d, TimestampTz time, int index, RowImage *row, const char *what)
{
	require_key(d, row, what);
	zl_ev_emit(d, ZL_EVENT_DELETE, time, 2 * index + 1, row, true);
}

/*
 * A change with before- and after-images (Debezium, GoldenGate): I an
 * upsert of after, U an upsert of after (and a delete of the old key if
 * before has another one), D a delete of before's key, T a truncate.
 */
void
zl_ev_before_after_change(EventDecoder *d, ZLJson *object, char op, TimestampTz time,
					const ValueType *before_types, const ValueType *after_types)
{
	ZLJson	   *before;

	if (op == 'T')
	{
		zl_ev_emit(d, ZL_EVENT_TRUNCATE, time, 1, NULL, false);
		return;
	}
	before = op == 'I' ? NULL : zl_ev_get_container(d, object, "before", true, op == 'D');
	if (before != NULL)
		zl_ev_fill_from_object(d, &d->old_row, before, before_types);
	if (op == 'D')
	{
		zl_ev_row_delete(d, time, 0, &d->old_row, "before");
		return;
	}
	zl_ev_fill_from_object(d, &d->new_row, zl_ev_get_container(d, object, "after", true, true), after_types);
	zl_ev_row_upsert(d, time, 0, "after", before != NULL ? "before" : NULL);
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
bool
zl_ev_skip_other_table(EventDecoder *d, ZLJson *object, const char *database,
				 const char *schema, const char *table)
{
	if (d->source_table == NULL)
		return false;
	if (object != NULL &&
		table_matches(d, database ? zl_ev_get_string(d, object, database, false) : NULL,
					  schema ? zl_ev_get_string(d, object, schema, false) : NULL,
					  zl_ev_get_string(d, object, table, false)))
		return false;
	zl_ev_emit_skipped(d);
	return true;
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
				 errmsg("malformed %s event", zl_ev_formats[d->format].name),
				 errdetail("Event %s is not valid JSON: %s at character %d.", d->ref, error, at + 1),
				 errhint("%s", zl_ev_formats[d->format].hint)));
}

static void
decode_event(EventDecoder *d, ZLJson *root)
{
	if (root->type == ZL_JSON_NULL)
	{
		zl_ev_emit_skipped(d);		/* a JSON null: a tombstone */
		return;
	}
	if (root->type != ZL_JSON_OBJECT)
		zl_ev_malformed(d, psprintf("is a JSON %s, not an object.", zl_json_type_name(root)));
	zl_ev_formats[d->format].decode(d, root);
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
	for (int i = 0; i < lengthof(zl_ev_formats); i++)
		if (pg_strcasecmp(format, zl_ev_formats[i].name) == 0)
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
				zl_ev_emit_skipped(&d);	/* a tombstone */
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
 * The arguments tbl, events, format and event (the first four) of
 * _decode_events and apply_events: none may be null.
 */
void
zl_events_check_arguments(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, events, format and event must not be null"),
				 errdetail("Argument %s is null.",
						   PG_ARGISNULL(0) ? "tbl" : PG_ARGISNULL(1) ? "events" :
						   PG_ARGISNULL(2) ? "format" : "event"),
				 errhint("Pass the zipper table, the relation holding the events, their format and their column.")));
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

	zl_events_check_arguments(fcinfo);
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
