/*
 * Positional cursor over a body array (smtpd's m_get_* / m_end).  Every
 * getter checks the exact msgpack type and bound, and leaves the cursor
 * where it was on failure.
 */
#include "ipc.h"

#include <string.h>

/*
 * A cursor over something that is not an array is "poisoned": o is NULL and
 * n is UINT32_MAX, so every getter and ipc_end() fail.  (An empty array has
 * o == NULL too, but n == 0.)
 */
void
ipc_cur_init(struct ipc_cur *c, const msgpack_object *array)
{
	c->i = 0;
	if (array == NULL || array->type != MSGPACK_OBJECT_ARRAY) {
		c->o = NULL;
		c->n = UINT32_MAX;
		return;
	}
	c->o = array->via.array.ptr;
	c->n = array->via.array.size;
}

/* The next value, or NULL at the end or when it is not of type t. */
static const msgpack_object *
cur_peek(const struct ipc_cur *c, msgpack_object_type t)
{
	if (c->o == NULL || c->i >= c->n)
		return NULL;
	if (c->o[c->i].type != t)
		return NULL;
	return &c->o[c->i];
}

int
ipc_get_nil(struct ipc_cur *c)
{
	if (cur_peek(c, MSGPACK_OBJECT_NIL) == NULL)
		return -1;
	c->i++;
	return 0;
}

int
ipc_is_nil(const struct ipc_cur *c)
{
	return cur_peek(c, MSGPACK_OBJECT_NIL) != NULL;
}

int
ipc_get_bool(struct ipc_cur *c, int *v)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_BOOLEAN)) == NULL)
		return -1;
	*v = o->via.boolean ? 1 : 0;
	c->i++;
	return 0;
}

int
ipc_get_u64(struct ipc_cur *c, uint64_t *v)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_POSITIVE_INTEGER)) == NULL)
		return -1;
	*v = o->via.u64;
	c->i++;
	return 0;
}

int
ipc_get_u32(struct ipc_cur *c, uint32_t *v)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_POSITIVE_INTEGER)) == NULL ||
	    o->via.u64 > UINT32_MAX)
		return -1;
	*v = (uint32_t)o->via.u64;
	c->i++;
	return 0;
}

/* msgpack-c types a non-negative integer as POSITIVE_INTEGER whatever its
 * wire encoding, so both kinds are accepted when they fit an int64_t. */
int
ipc_get_i64(struct ipc_cur *c, int64_t *v)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_POSITIVE_INTEGER)) != NULL) {
		if (o->via.u64 > INT64_MAX)
			return -1;
		*v = (int64_t)o->via.u64;
	} else if ((o = cur_peek(c, MSGPACK_OBJECT_NEGATIVE_INTEGER)) != NULL) {
		if (o->via.i64 >= 0)
			return -1;
		*v = o->via.i64;
	} else
		return -1;
	c->i++;
	return 0;
}

int
ipc_get_str(struct ipc_cur *c, const char **s, size_t *len, size_t maxlen)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_STR)) == NULL || o->via.str.size > maxlen)
		return -1;
	*s = o->via.str.ptr;
	*len = o->via.str.size;
	c->i++;
	return 0;
}

int
ipc_get_cstr(struct ipc_cur *c, char *dst, size_t dstsz)
{
	const msgpack_object *o;
	size_t len;

	if ((o = cur_peek(c, MSGPACK_OBJECT_STR)) == NULL)
		return -1;
	len = o->via.str.size;
	if (dstsz == 0 || len > dstsz - 1)
		return -1;
	if (len > 0 && memchr(o->via.str.ptr, '\0', len) != NULL)
		return -1;
	if (len > 0)
		memcpy(dst, o->via.str.ptr, len);
	dst[len] = '\0';
	c->i++;
	return 0;
}

int
ipc_get_bin(struct ipc_cur *c, const uint8_t **p, size_t *len, size_t maxlen)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_BIN)) == NULL || o->via.bin.size > maxlen)
		return -1;
	*p = (const uint8_t *)o->via.bin.ptr;
	*len = o->via.bin.size;
	c->i++;
	return 0;
}

int
ipc_get_array(struct ipc_cur *c, struct ipc_cur *sub, uint32_t maxn)
{
	const msgpack_object *o;

	if ((o = cur_peek(c, MSGPACK_OBJECT_ARRAY)) == NULL || o->via.array.size > maxn)
		return -1;
	ipc_cur_init(sub, o);
	c->i++;
	return 0;
}

int
ipc_get_any(struct ipc_cur *c, const msgpack_object **o)
{
	if (c->o == NULL || c->i >= c->n)
		return -1;
	*o = &c->o[c->i++];
	return 0;
}

int
ipc_end(const struct ipc_cur *c)
{
	return c->i == c->n ? 0 : -1;
}
