/*-------------------------------------------------------------------------
 *
 * zl_events_json.c
 *	  The JSON values of change events, read in place.
 *
 * Events (zl_events.c) come as jsonb or as JSON text.  Both are read
 * through ZLJson values without converting one into the other:
 *
 *  - jsonb: strings and numbers point into the jsonb value; an object's
 *    member is found by the jsonb C API's binary search of its keys, and a
 *    container is split into its members (JsonbIterator) only when it is
 *    read whole.
 *  - JSON text: the whole text is checked once (scan_value: the JSON
 *    grammar of RFC 8259, as jsonb input accepts it), which builds nothing
 *    but an index of where each container ends; then a container is split
 *    into its members only when it is read (expand_text), stepping over the
 *    containers in it by the index, which stay spans of text.  Strings
 *    without escapes and numbers stay in the text.  So the parts of an
 *    event no decoder reads (fields that are no columns, a Debezium schema
 *    seen before) cost one scan, and nothing is copied but escaped strings.
 *
 * Duplicate keys: the last one counts, as in jsonb.  Numbers keep their
 * text, except that those jsonb would write otherwise (an exponent, a
 * negative zero) are written as jsonb writes them, and a container given
 * as a value is written as jsonb writes it, so a text event and the same
 * event as jsonb give the same values.
 *
 *-------------------------------------------------------------------------
 */
#include "apply/events/zl_events_internal.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

/* ---------- checking JSON text ---------- */

/*
 * Where each container of checked text ends, found by the check: its
 * start and end offsets, in the order of their starts, so that reading a
 * container steps over the containers in it without scanning them again.
 */
typedef struct ZLJsonIndex
{
	const char *base;
	int			n;
	int			max;
	int		   *starts;
	int		   *ends;
} ZLJsonIndex;

typedef struct JsonScan
{
	const char *start;
	const char *end;
	const char *error;			/* set at the first error */
	const char *error_at;
	ZLJsonIndex *index;
} JsonScan;

static const char *
scan_fail(JsonScan *s, const char *p, const char *what)
{
	if (s->error == NULL)
	{
		s->error = p < s->end ? what : "the end of the text";
		s->error_at = p;
	}
	return NULL;
}

static inline const char *
skip_space(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* the code unit of \uXXXX at p (after the u), or -1 */
static int
hex4(const char *p, const char *end)
{
	int			v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		int			h = hex_value(p[i]);

		if (h < 0)
			return -1;
		v = (v << 4) | h;
	}
	return v;
}

/* a string at p (its opening quote); the end after its closing quote */
static const char *
scan_string(JsonScan *s, const char *p)
{
	const char *end = s->end;
	const char *open = p;

	for (p++; p < end; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return scan_fail(s, p, "a control character in a string");
		if (c != '\\')
			continue;
		if (++p >= end)
			break;
		switch (*p)
		{
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				break;
			case 'u':
				{
					int			u = hex4(p + 1, end);

					if (u < 0)
						return scan_fail(s, p - 1, "an invalid \\u escape");
					if (u == 0)
						return scan_fail(s, p - 1, "\\u0000, which text cannot hold");
					if (u >= 0xDC00 && u <= 0xDFFF)
						return scan_fail(s, p - 1, "a lone low surrogate");
					p += 4;
					if (u >= 0xD800 && u <= 0xDBFF)
					{
						int			low = (end - p > 2 && p[1] == '\\' && p[2] == 'u') ?
						hex4(p + 3, end) : -1;

						if (low < 0xDC00 || low > 0xDFFF)
							return scan_fail(s, p - 5, "a high surrogate without a low one");
						p += 6;
					}
					break;
				}
			default:
				return scan_fail(s, p - 1, "an invalid escape");
		}
	}
	return scan_fail(s, open, "an unterminated string");
}

static const char *
scan_digits(const char *p, const char *end)
{
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p;
}

static const char *
scan_number(JsonScan *s, const char *p)
{
	const char *end = s->end;
	const char *q;

	if (*p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if (p < end && *p >= '1' && *p <= '9')
		p = scan_digits(p, end);
	else
		return scan_fail(s, p, "an invalid number");
	if (p < end && *p == '.')
	{
		q = scan_digits(p + 1, end);
		if (q == p + 1)
			return scan_fail(s, p, "an invalid number");
		p = q;
	}
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		q = scan_digits(p, end);
		if (q == p)
			return scan_fail(s, p, "an invalid number");
		p = q;
	}
	return p;
}

static const char *
scan_literal(JsonScan *s, const char *p, const char *word)
{
	size_t		len = strlen(word);

	if ((size_t) (s->end - p) < len || memcmp(p, word, len) != 0)
		return scan_fail(s, p, "an unexpected word");
	return p + len;
}

static int
add_container(ZLJsonIndex *index, const char *p)
{
	if (index->n == index->max)
	{
		index->max *= 2;
		index->starts = repalloc(index->starts, sizeof(int) * index->max);
		index->ends = repalloc(index->ends, sizeof(int) * index->max);
	}
	index->starts[index->n] = p - index->base;
	return index->n++;
}

static const char *
end_container(ZLJsonIndex *index, int slot, const char *end)
{
	index->ends[slot] = end - index->base;
	return end;
}

/* a value at p (after any space); the end after it, or NULL */
static const char *
scan_value(JsonScan *s, const char *p)
{
	const char *end = s->end;
	bool		object;
	int			slot;

	if (p >= end)
		return scan_fail(s, p, "the end of the text");
	switch (*p)
	{
		case '"':
			return scan_string(s, p);
		case 't':
			return scan_literal(s, p, "true");
		case 'f':
			return scan_literal(s, p, "false");
		case 'n':
			return scan_literal(s, p, "null");
		case '{':
		case '[':
			break;
		default:
			if (*p == '-' || (*p >= '0' && *p <= '9'))
				return scan_number(s, p);
			return scan_fail(s, p, "an unexpected character");
	}

	check_stack_depth();
	object = (*p == '{');
	slot = add_container(s->index, p);
	p = skip_space(p + 1, end);
	if (p < end && *p == (object ? '}' : ']'))
		return end_container(s->index, slot, p + 1);
	for (;;)
	{
		if (object)
		{
			if (p >= end || *p != '"')
				return scan_fail(s, p, "a member without a string key");
			if ((p = scan_string(s, p)) == NULL)
				return NULL;
			p = skip_space(p, end);
			if (p >= end || *p != ':')
				return scan_fail(s, p, "a key without a colon");
			p = skip_space(p + 1, end);
		}
		if ((p = scan_value(s, p)) == NULL)
			return NULL;
		p = skip_space(p, end);
		if (p < end && *p == ',')
		{
			p = skip_space(p + 1, end);
			continue;
		}
		if (p < end && *p == (object ? '}' : ']'))
			return end_container(s->index, slot, p + 1);
		return scan_fail(s, p, object ? "a missing comma or closing brace" :
						 "a missing comma or closing bracket");
	}
}

/* ---------- reading checked JSON text ---------- */

/* the end of a checked string at p (its opening quote) */
static const char *
skip_string(const char *p, bool *escaped)
{
	for (p++;; p++)
	{
		if (*p == '"')
			return p + 1;
		if (*p == '\\')
		{
			*escaped = true;
			p++;
		}
	}
}

/* the end of a checked container at p */
static const char *
container_end(const ZLJsonIndex *index, const char *p)
{
	int			offset = p - index->base;
	int			lo = 0;
	int			hi = index->n - 1;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (index->starts[mid] < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	Assert(index->starts[lo] == offset);
	return index->base + index->ends[lo];
}

static void
append_code_point(StringInfo out, pg_wchar c)
{
	unsigned char buf[MAX_UNICODE_EQUIVALENT_STRING + 1];

	if (GetDatabaseEncoding() == PG_UTF8)
	{
		unicode_to_utf8(c, buf);
		appendBinaryStringInfo(out, (char *) buf, pg_utf_mblen(buf));
	}
	else if (c < 0x80)
		appendStringInfoChar(out, (char) c);
	else
	{
		pg_unicode_to_server(c, buf);
		appendStringInfoString(out, (char *) buf);
	}
}

/* the bytes of a checked string with escapes (between its quotes) */
static void
unescape(const char *p, const char *end, ZLJson *v)
{
	StringInfoData out;

	initStringInfo(&out);
	while (p < end)
	{
		if (*p != '\\')
		{
			const char *q = p;

			while (q < end && *q != '\\')
				q++;
			appendBinaryStringInfo(&out, p, q - p);
			p = q;
			continue;
		}
		p++;
		switch (*p++)
		{
			case 'b':
				appendStringInfoChar(&out, '\b');
				break;
			case 'f':
				appendStringInfoChar(&out, '\f');
				break;
			case 'n':
				appendStringInfoChar(&out, '\n');
				break;
			case 'r':
				appendStringInfoChar(&out, '\r');
				break;
			case 't':
				appendStringInfoChar(&out, '\t');
				break;
			case 'u':
				{
					pg_wchar	c = hex4(p, end);

					p += 4;
					if (c >= 0xD800 && c <= 0xDBFF)
					{
						c = 0x10000 + ((c - 0xD800) << 10) + (hex4(p + 2, end) - 0xDC00);
						p += 6;
					}
					append_code_point(&out, c);
					break;
				}
			default:			/* " \ / */
				appendStringInfoChar(&out, p[-1]);
				break;
		}
	}
	v->str = out.data;
	v->len = out.len;
}

/* the value of checked text at p (after any space) before end; the end after it */
static const char *
read_text_value(ZLJsonIndex *index, const char *p, const char *end, ZLJson *v)
{
	const char *q;
	bool		escaped = false;

	memset(v, 0, sizeof(ZLJson));
	switch (*p)
	{
		case '"':
			q = skip_string(p, &escaped);
			v->type = ZL_JSON_STRING;
			if (escaped)
				unescape(p + 1, q - 1, v);
			else
			{
				v->str = p + 1;
				v->len = q - p - 2;
			}
			return q;
		case '{':
		case '[':
			q = container_end(index, p);
			v->type = (*p == '{') ? ZL_JSON_OBJECT : ZL_JSON_ARRAY;
			v->str = p;
			v->len = q - p;
			v->count = -1;
			v->index = index;
			return q;
		case 't':
			v->type = ZL_JSON_BOOL;
			v->boolean = true;
			return p + 4;
		case 'f':
			v->type = ZL_JSON_BOOL;
			return p + 5;
		case 'n':
			v->type = ZL_JSON_NULL;
			return p + 4;
		default:
			q = p + 1;
			while (q < end && (*q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-' ||
							   (*q >= '0' && *q <= '9')))
				q++;
			v->type = ZL_JSON_NUMBER;
			v->str = p;
			v->len = q - p;
			return q;
	}
}

/* split a checked container of text into its members or elements */
static void
expand_text(ZLJson *v)
{
	bool		object = (v->type == ZL_JSON_OBJECT);
	const char *end = v->str + v->len;
	const char *p = skip_space(v->str + 1, end);
	int			max = 8;
	int			n = 0;

	v->kids = palloc(sizeof(ZLJson) * max);
	while (*p != '}' && *p != ']')
	{
		if (n + 2 > max)
		{
			max *= 2;
			v->kids = repalloc(v->kids, sizeof(ZLJson) * max);
		}
		if (object)
		{
			p = read_text_value(v->index, p, end, &v->kids[n++]);
			p = skip_space(p, end) + 1; /* the colon */
			p = skip_space(p, end);
		}
		p = read_text_value(v->index, p, end, &v->kids[n++]);
		p = skip_space(p, end);
		if (*p == ',')
			p = skip_space(p + 1, end);
	}
	v->count = object ? n / 2 : n;
}

/*
 * Check JSON text and make its value the root of the event: NULL, or what
 * is wrong with it (and *error_at, its offset).
 */
const char *
zl_json_parse_text(const char *text, int len, ZLJson *root, int *error_at)
{
	ZLJsonIndex *index = palloc(sizeof(ZLJsonIndex));
	JsonScan	s = {text, text + len, NULL, NULL, index};
	const char *p;

	index->base = text;
	index->n = 0;
	index->max = 16;
	index->starts = palloc(sizeof(int) * index->max);
	index->ends = palloc(sizeof(int) * index->max);
	p = scan_value(&s, skip_space(text, text + len));

	if (p != NULL && skip_space(p, s.end) != s.end)
		scan_fail(&s, skip_space(p, s.end), "text after the value");
	if (s.error != NULL)
	{
		*error_at = (int) (s.error_at - text);
		return s.error;
	}
	read_text_value(index, skip_space(text, text + len), text + len, root);
	return NULL;
}

/* ---------- jsonb ---------- */

static void
from_jsonb_value(ZLJson *v, const JsonbValue *jv)
{
	memset(v, 0, sizeof(ZLJson));
	switch (jv->type)
	{
		case jbvNull:
			v->type = ZL_JSON_NULL;
			break;
		case jbvBool:
			v->type = ZL_JSON_BOOL;
			v->boolean = jv->val.boolean;
			break;
		case jbvNumeric:
			v->type = ZL_JSON_NUMBER;
			v->numeric = jv->val.numeric;
			break;
		case jbvString:
			v->type = ZL_JSON_STRING;
			v->str = jv->val.string.val;
			v->len = jv->val.string.len;
			break;
		case jbvBinary:
			v->type = JsonContainerIsObject(jv->val.binary.data) ? ZL_JSON_OBJECT : ZL_JSON_ARRAY;
			v->jc = jv->val.binary.data;
			v->jclen = jv->val.binary.len;
			v->count = -1;
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) jv->type);
	}
}

/* the root of a jsonb event, its container of len bytes */
void
zl_json_from_jsonb(JsonbContainer *root, uint32 len, ZLJson *v)
{
	JsonbValue	scalar;

	if (JsonContainerIsScalar(root))
	{
		if (!JsonbExtractScalar(root, &scalar))
			elog(ERROR, "invalid jsonb scalar");
		from_jsonb_value(v, &scalar);
		return;
	}
	memset(v, 0, sizeof(ZLJson));
	v->type = JsonContainerIsObject(root) ? ZL_JSON_OBJECT : ZL_JSON_ARRAY;
	v->jc = root;
	v->jclen = len;
	v->count = -1;
}

static void
expand_jsonb(ZLJson *v)
{
	JsonbIterator *it = JsonbIteratorInit(v->jc);
	JsonbValue	jv;
	JsonbIteratorToken token;
	int			n = JsonContainerSize(v->jc);
	int			i = 0;

	v->kids = palloc(sizeof(ZLJson) * Max(v->type == ZL_JSON_OBJECT ? 2 * n : n, 1));
	while ((token = JsonbIteratorNext(&it, &jv, true)) != WJB_DONE)
		if (token == WJB_KEY || token == WJB_VALUE || token == WJB_ELEM)
			from_jsonb_value(&v->kids[i++], &jv);
	v->count = n;
}

/* ---------- reading values ---------- */

static void
expand(ZLJson *v)
{
	Assert(v->type == ZL_JSON_OBJECT || v->type == ZL_JSON_ARRAY);
	if (v->count >= 0)
		return;
	if (v->jc != NULL)
		expand_jsonb(v);
	else
		expand_text(v);
}

/* an object's member by name, NULL if it has none (the last of duplicates) */
ZLJson *
zl_json_member(ZLJson *object, const char *name)
{
	int			len = strlen(name);

	Assert(object->type == ZL_JSON_OBJECT);
	if (object->jc != NULL && object->count < 0)
	{
		JsonbValue	jv;
		ZLJson	   *v;

		if (getKeyJsonValueFromContainer(object->jc, name, len, &jv) == NULL)
			return NULL;
		v = palloc(sizeof(ZLJson));
		from_jsonb_value(v, &jv);
		return v;
	}
	expand(object);
	for (int i = object->count - 1; i >= 0; i--)
	{
		ZLJson	   *key = &object->kids[2 * i];

		if (key->len == len && memcmp(key->str, name, len) == 0)
			return &object->kids[2 * i + 1];
	}
	return NULL;
}

/* members of an object, elements of an array */
int
zl_json_size(ZLJson *container)
{
	expand(container);
	return container->count;
}

/* the i-th key of an object (a string) */
ZLJson *
zl_json_key(ZLJson *object, int i)
{
	expand(object);
	Assert(object->type == ZL_JSON_OBJECT && i < object->count);
	return &object->kids[2 * i];
}

/* the i-th value of an object, the i-th element of an array */
ZLJson *
zl_json_item(ZLJson *container, int i)
{
	expand(container);
	Assert(i < container->count);
	return &container->kids[container->type == ZL_JSON_OBJECT ? 2 * i + 1 : i];
}

const char *
zl_json_type_name(const ZLJson *v)
{
	static const char *const names[] = {"null", "boolean", "number", "string", "object", "array"};

	return names[v->type];
}

/* a container (or any value) as JSON text */
char *
zl_json_text(ZLJson *v)
{
	if (v->jc != NULL)
		return JsonbToCString(NULL, v->jc, v->jclen);
	switch (v->type)
	{
		case ZL_JSON_NULL:
			return pstrdup("null");
		case ZL_JSON_BOOL:
			return pstrdup(v->boolean ? "true" : "false");
		case ZL_JSON_NUMBER:
			return zl_json_number_text(v);
		case ZL_JSON_STRING:
			{
				StringInfoData out;

				initStringInfo(&out);
				escape_json(&out, pnstrdup(v->str, v->len));
				return out.data;
			}
		default:
			{
				/* as jsonb writes it, so that text and jsonb events give the same */
				Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																	CStringGetDatum(pnstrdup(v->str, v->len))));

				return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
			}
	}
}

/* the bytes a container is compared by (whether one is the same as another) */
const char *
zl_json_bytes(const ZLJson *v, int *len)
{
	if (v->jc != NULL)
	{
		*len = v->jclen;
		return (const char *) v->jc;
	}
	*len = v->len;
	return v->str;
}

Numeric
zl_json_number(ZLJson *v)
{
	Assert(v->type == ZL_JSON_NUMBER);
	if (v->numeric == NULL)
		v->numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
														 CStringGetDatum(pnstrdup(v->str, v->len)),
														 ObjectIdGetDatum(InvalidOid),
														 Int32GetDatum(-1)));
	return v->numeric;
}

/* a number as numeric text, as jsonb writes it */
char *
zl_json_number_text(ZLJson *v)
{
	Assert(v->type == ZL_JSON_NUMBER);
	if (v->str != NULL && memchr(v->str, 'e', v->len) == NULL &&
		memchr(v->str, 'E', v->len) == NULL && !(v->len > 1 && v->str[0] == '-' && v->str[1] == '0'))
		return pnstrdup(v->str, v->len);
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(zl_json_number(v))));
}

/* an integral number as int64; false if it has a fraction or is too large */
bool
zl_json_int64(ZLJson *v, int64 *result)
{
	const char *p;
	int			len;
	char	   *text = NULL;
	bool		negative;
	uint64		magnitude = 0;

	Assert(v->type == ZL_JSON_NUMBER);
	if (v->str != NULL && memchr(v->str, 'e', v->len) == NULL && memchr(v->str, 'E', v->len) == NULL)
	{
		p = v->str;
		len = v->len;
	}
	else
	{
		text = zl_json_number_text(v);
		p = text;
		len = strlen(text);
	}
	negative = (len > 0 && *p == '-');
	if (negative)
	{
		p++;
		len--;
	}
	if (len == 0)
		return false;
	for (int i = 0; i < len; i++)
	{
		if (p[i] < '0' || p[i] > '9')
			return false;		/* a fraction */
		if (magnitude > (PG_UINT64_MAX - (p[i] - '0')) / 10)
			return false;
		magnitude = magnitude * 10 + (p[i] - '0');
	}
	if (negative ? magnitude > (uint64) PG_INT64_MAX + 1 : magnitude > (uint64) PG_INT64_MAX)
		return false;
	*result = negative ? (int64) (0 - magnitude) : (int64) magnitude;
	return true;
}
