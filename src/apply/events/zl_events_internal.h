/*-------------------------------------------------------------------------
 *
 * zl_events_internal.h
 *	  What stays inside apply/events/: JSON values, decoded events.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_EVENTS_INTERNAL_H
#define ZL_EVENTS_INTERNAL_H

#include "apply/zl_apply_internal.h"

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

extern void zl_events_decode(Relation rel, const ZLTableOptions *opts, Oid events_relid,
							 const char *format, const char *event_column,
							 const char *seq_column, const char *source_table,
							 ZLEventCallback callback, void *arg);

#endif							/* ZL_EVENTS_INTERNAL_H */
