/*-------------------------------------------------------------------------
 *
 * zl_events_internal.h
 *	  What stays inside apply/events/: JSON values, decoded events, the
 *	  decoder's state and the functions its files share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_EVENTS_INTERNAL_H
#define ZL_EVENTS_INTERNAL_H

#include "apply/zl_apply_internal.h"

#include "pgtime.h"
#include "utils/numeric.h"

/* ---------- zl_events_json.c ---------- */

/* a JSON value of an event: of jsonb, or of checked JSON text */
typedef enum ZLJsonType
{
	ZL_JSON_NULL,
	ZL_JSON_BOOL,
	ZL_JSON_NUMBER,
	ZL_JSON_STRING,
	ZL_JSON_OBJECT,
	ZL_JSON_ARRAY
} ZLJsonType;

typedef struct ZLJson
{
	ZLJsonType	type;
	bool		boolean;
	const char *str;			/* a string's bytes (not terminated); a number's or
								 * a container's text (text events) */
	int			len;
	struct NumericData *numeric;	/* a number, once known */
	struct JsonbContainer *jc;	/* a container of a jsonb event */
	uint32		jclen;
	int			count;			/* members or elements once split, else -1 */
	struct ZLJson *kids;		/* object: key, value, key, value ...; array: elements */
	struct ZLJsonIndex *index;	/* where the containers of its text end */
} ZLJson;

extern const char *zl_json_parse_text(const char *text, int len, ZLJson *root, int *error_at);
extern void zl_json_from_jsonb(struct JsonbContainer *root, uint32 len, ZLJson *v);
extern ZLJson *zl_json_member(ZLJson *object, const char *name);
extern int	zl_json_size(ZLJson *container);
extern ZLJson *zl_json_key(ZLJson *object, int i);
extern ZLJson *zl_json_item(ZLJson *container, int i);
extern const char *zl_json_type_name(const ZLJson *v);
extern char *zl_json_text(ZLJson *v);
extern const char *zl_json_bytes(const ZLJson *v, int *len);
extern struct NumericData *zl_json_number(ZLJson *v);
extern char *zl_json_number_text(ZLJson *v);
extern bool zl_json_int64(ZLJson *v, int64 *result);

/* ---------- zl_events.c ---------- */

/* what a change decoded from an event does (_decode_events' op) */
#define ZL_EVENT_UPSERT			'u'
#define ZL_EVENT_DELETE			'd'
#define ZL_EVENT_TRUNCATE		't'	/* no key: every key holding a version then */
#define ZL_EVENT_SKIPPED		's'	/* an event that changes nothing here (counted) */

/*
 * A change decoded from an event (zl_events.c).  Valid during the
 * callback only.  columns lists the table columns the change gives (a
 * delete: the key columns), ascending; values are their text in the input
 * syntax of the column's type, NULL for SQL NULL.  kept lists the columns
 * the event marks unavailable (Debezium's placeholder of an unchanged
 * TOAST value; every column wal2json leaves out): they keep the key's
 * value.  A column in neither list is missing from the event (README
 * "Loading CDC events": missing_columns).  (seq, sub_seq) orders the
 * changes of one time; seq is NULL when neither the seq column nor the
 * format gives one.
 */
typedef struct ZLEventChange
{
	char		op;				/* ZL_EVENT_* */
	TimestampTz time;			/* not for ZL_EVENT_SKIPPED */
	struct NumericData *seq;
	int32		sub_seq;
	const char *event_ref;		/* "seq 123", "ctid (0,5)", "row 7" */
	uint64		event;			/* the event's number in the order read, from 1 */
	int			ncolumns;
	const AttrNumber *attnums;
	char	   *const *values;
	int			nkept;
	const AttrNumber *kept;
} ZLEventChange;

typedef void (*ZLEventCallback) (void *arg, const ZLEventChange *change);

extern void zl_events_check_arguments(FunctionCallInfo fcinfo);
extern void zl_events_decode(Relation rel, const ZLTableOptions *opts, Oid events_relid,
							 const char *format, const char *event_column,
							 const char *seq_column, const char *source_table,
							 ZLEventCallback callback, void *arg);

/* ---------- the decoder's state (zl_events*.c) ---------- */

typedef enum EventFormat
{
	FMT_DEBEZIUM,
	FMT_CANAL,
	FMT_MAXWELL,
	FMT_OGG,
	FMT_WAL2JSON
} EventFormat;

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

/* ---------- the decoder, shared by zl_events*.c (zl_ev_*) ---------- */

/* a format's decoder: the changes of one event, an object */
typedef void (*ZLEventDecodeFn) (EventDecoder *d, ZLJson *root);

typedef struct ZLEventFormat
{
	const char *name;			/* format => name */
	ZLEventDecodeFn decode;
	const char *hint;			/* the errhint of its malformed events */
} ZLEventFormat;

/* by EventFormat (zl_events.c) */
extern const ZLEventFormat zl_ev_formats[];

/* zl_events.c: errors */
extern void zl_ev_malformed(EventDecoder *d, const char *what) pg_attribute_noreturn();
extern void zl_ev_unknown_operation(EventDecoder *d, const char *field, const char *op,
									const char *known) pg_attribute_noreturn();
extern void zl_ev_missing_time(EventDecoder *d, const char *fields,
							   const char *hint) pg_attribute_noreturn();
extern void zl_ev_refuse_clock(EventDecoder *d, const char *noun,
							   const char *what) pg_attribute_noreturn();

/* zl_events.c: JSON members */
extern ZLJson *zl_ev_member(ZLJson *object, const char *name);
extern bool zl_ev_is_container(const ZLJson *v, bool object);
extern ZLJson *zl_ev_get_container(EventDecoder *d, ZLJson *object, const char *name,
								   bool want_object, bool required);
extern char *zl_ev_get_string(EventDecoder *d, ZLJson *object, const char *name, bool required);
extern ZLJson *zl_ev_get_number(EventDecoder *d, ZLJson *object, const char *name);
extern void zl_ev_not_an_integer(EventDecoder *d, ZLJson *v, const char *what) pg_attribute_noreturn();
extern int64 zl_ev_number_int64(EventDecoder *d, ZLJson *v, const char *what);

/* zl_events.c: columns, rows, source tables */
extern int	zl_ev_column_of_field(EventDecoder *d, const char *name, int len, int *column);
extern void zl_ev_fill_from_object(EventDecoder *d, RowImage *row, ZLJson *object,
								   const ValueType *types);
extern void zl_ev_fill_from_wal2json(EventDecoder *d, RowImage *row, ZLJson *array,
									 const char *what);
extern void zl_ev_emit(EventDecoder *d, char op, TimestampTz time, int32 sub_seq,
					   RowImage *row, bool keys_only);
extern void zl_ev_emit_skipped(EventDecoder *d);
extern void zl_ev_row_upsert(EventDecoder *d, TimestampTz time, int index, const char *what,
							 const char *old_what);
extern void zl_ev_row_delete(EventDecoder *d, TimestampTz time, int index, RowImage *row,
							 const char *what);
extern void zl_ev_before_after_change(EventDecoder *d, ZLJson *object, char op, TimestampTz time,
									  const ValueType *before_types,
									  const ValueType *after_types);
extern bool zl_ev_skip_other_table(EventDecoder *d, ZLJson *object, const char *database,
								   const char *schema, const char *table);

/* zl_events_values.c */
extern TimestampTz zl_ev_epoch_time(EventDecoder *d, int64 value, int64 usecs_per_unit,
									const char *what);
extern TimestampTz zl_ev_event_time_string(EventDecoder *d, const char *str, const char *field);
extern char *zl_ev_plain_text(EventDecoder *d, const EventColumn *col, ZLJson *v);
extern char *zl_ev_decoded_text(EventDecoder *d, const EventColumn *col, const ValueType *type,
								ZLJson *v);
extern Numeric zl_ev_digits_numeric(const char *digits);
extern bool zl_ev_all_digits(const char *s, size_t maxlen);
extern Numeric zl_ev_uint64_numeric(uint64 value);

/* zl_events_debezium.c and the other formats' files */
extern bool zl_ev_debezium_unavailable(ZLJson *v, const ValueType *type);
extern void zl_ev_decode_debezium(EventDecoder *d, ZLJson *root);
extern void zl_ev_decode_canal(EventDecoder *d, ZLJson *root);
extern void zl_ev_decode_maxwell(EventDecoder *d, ZLJson *root);
extern void zl_ev_decode_ogg(EventDecoder *d, ZLJson *root);
extern void zl_ev_decode_wal2json(EventDecoder *d, ZLJson *root);

#endif							/* ZL_EVENTS_INTERNAL_H */
