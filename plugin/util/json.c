/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: writing and reading JSON on json-c.  See include/json.h. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "utf8.h"
#include "util.h"

struct json_object *
json_text (const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  struct json_object *o;
  size_t n = 0;
  char *clean;

  if (s == NULL)
    return NULL;
  /* Each invalid byte becomes the 3 bytes of U+FFFD. */
  clean = malloc (3 * strlen (s) + 1);
  if (clean == NULL)
    return NULL;
  while (*p) {
    unsigned cp;
    size_t len = utf8_decode (p, 4, &cp);

    if (len == 0) {
      memcpy (clean + n, "\xef\xbf\xbd", 3);
      n += 3;
      p++;
    }
    else {
      memcpy (clean + n, p, len);
      n += len;
      p += len;
    }
  }
  clean[n] = '\0';
  o = json_object_new_string_len (clean, n);
  free (clean);
  return o;
}

struct json_object *
json_number (double v, const char *fmt)
{
  char buf[64];

  if (isnan (v))
    return NULL;
  snprintf (buf, sizeof buf, fmt, v);
  return json_object_new_double_s (v, buf);
}

struct json_object *
json_u64 (uint64_t v)
{
  return json_object_new_uint64 (v);
}

char *
json_text_of (struct json_object *o)
{
  size_t len;
  const char *t = json_object_to_json_string_length (
    o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
         | JSON_C_TO_STRING_NOSLASHESCAPE,
    &len);
  char *r = malloc (len + 2);

  if (r == NULL)
    return NULL;
  memcpy (r, t, len);
  r[len] = '\n';
  r[len + 1] = '\0';
  return r;
}

/* Reading. */

bool
json_has (struct json_object *o, const char *key)
{
  return o != NULL && json_object_is_type (o, json_type_object)
         && json_object_object_get_ex (o, key, NULL);
}

/* A JSON type in words for a message. */
static const char *
type_words (enum json_type t)
{
  switch (t) {
  case json_type_null: return "null";
  case json_type_boolean: return "true or false";
  case json_type_double: return "a number with a fraction or an exponent";
  case json_type_int: return "an integer";
  case json_type_object: return "an object";
  case json_type_array: return "an array";
  case json_type_string: return "a string";
  }
  return "of an unknown type";
}

/* A JSON value's kind, in words for a message. */
static const char *
kind (struct json_object *v)
{
  return type_words (json_object_get_type (v));
}

/* o[key], present (null included); else -1 and why. */
static int
lookup (struct json_object *o, const char *key, struct json_object **v,
        char *why, size_t len)
{
  if (!json_has (o, key))
    return fail_why (why, len, EINVAL, "\"%s\" is missing", key);
  json_object_object_get_ex (o, key, v);
  return 0;
}

/* o[key] if it is of type t; else -1 and why ("what" names t). */
static int
member_of (struct json_object *o, const char *key, enum json_type t,
           const char *what, struct json_object **v, char *why, size_t len)
{
  if (lookup (o, key, v, why, len) == -1)
    return -1;
  if (!json_object_is_type (*v, t))
    return fail_why (why, len, EINVAL, "\"%s\" must be %s, not %s", key, what,
                     kind (*v));
  return 0;
}

int
json_get_value (struct json_object *o, const char *key, enum json_type t,
                struct json_object **out, char *why, size_t len)
{
  struct json_object *v;

  if (member_of (o, key, t, type_words (t), &v, why, len) == -1)
    return -1;
  *out = v;
  return 0;
}

int
json_get_string (struct json_object *o, const char *key, const char **out,
                 char *why, size_t len)
{
  struct json_object *v;
  const char *s;

  if (member_of (o, key, json_type_string, "a string", &v, why, len) == -1)
    return -1;
  s = json_object_get_string (v);
  if (strlen (s) != (size_t) json_object_get_string_len (v))
    return fail_why (why, len, EINVAL,
                     "\"%s\" must be a string without NUL bytes", key);
  *out = s;
  return 0;
}

/* json-c keeps an integer as int64, or as uint64 above INT64_MAX; what
 * is beyond either saturates.
 */
int
json_get_int64 (struct json_object *o, const char *key, int64_t *out,
                char *why, size_t len)
{
  struct json_object *v;
  int64_t i;

  if (member_of (o, key, json_type_int, "an integer", &v, why, len) == -1)
    return -1;
  i = json_object_get_int64 (v);
  if (i == INT64_MAX && json_object_get_uint64 (v) > (uint64_t) INT64_MAX)
    return fail_why (why, len, EINVAL,
                     "\"%s\" is too large (at most %" PRId64 ")", key,
                     INT64_MAX);
  *out = i;
  return 0;
}

int
json_get_uint64 (struct json_object *o, const char *key, uint64_t *out,
                 char *why, size_t len)
{
  struct json_object *v;
  int64_t i;

  if (member_of (o, key, json_type_int, "an integer", &v, why, len) == -1)
    return -1;
  i = json_object_get_int64 (v);
  if (i < 0)
    return fail_why (why, len, EINVAL,
                     "\"%s\" must not be negative (%" PRId64 ")", key, i);
  *out = i == INT64_MAX ? json_object_get_uint64 (v) : (uint64_t) i;
  return 0;
}

int
json_get_double (struct json_object *o, const char *key, double *out,
                 char *why, size_t len)
{
  struct json_object *v;
  double d;

  if (lookup (o, key, &v, why, len) == -1)
    return -1;
  if (json_object_is_type (v, json_type_int)) {
    int64_t i = json_object_get_int64 (v);
    *out = i == INT64_MAX ? (double) json_object_get_uint64 (v) : (double) i;
    return 0;
  }
  if (!json_object_is_type (v, json_type_double))
    return fail_why (why, len, EINVAL, "\"%s\" must be a number, not %s", key,
                     kind (v));
  d = json_object_get_double (v);
  if (!isfinite (d))
    return fail_why (why, len, EINVAL, "\"%s\" must be a finite number", key);
  *out = d;
  return 0;
}

int
json_get_bool (struct json_object *o, const char *key, bool *out, char *why,
               size_t len)
{
  struct json_object *v;

  if (member_of (o, key, json_type_boolean, "true or false", &v, why, len)
      == -1)
    return -1;
  *out = json_object_get_boolean (v);
  return 0;
}

int
json_get_object (struct json_object *o, const char *key,
                 struct json_object **out, char *why, size_t len)
{
  struct json_object *v;

  if (member_of (o, key, json_type_object, "an object", &v, why, len) == -1)
    return -1;
  *out = v;
  return 0;
}

int
json_get_array (struct json_object *o, const char *key,
                struct json_object **out, char *why, size_t len)
{
  struct json_object *v;

  if (member_of (o, key, json_type_array, "an array", &v, why, len) == -1)
    return -1;
  *out = v;
  return 0;
}

const char *
json_str_or_null (struct json_object *o, const char *key)
{
  const char *s;

  return json_get_string (o, key, &s, NULL, 0) == 0 ? s : NULL;
}

double
json_num_or_0 (struct json_object *o, const char *key)
{
  double d;

  return json_get_double (o, key, &d, NULL, 0) == 0 ? d : 0;
}

uint64_t
json_u64_or_0 (struct json_object *o, const char *key)
{
  uint64_t u;

  return json_get_uint64 (o, key, &u, NULL, 0) == 0 ? u : 0;
}

struct json_object *
json_array_or_null (struct json_object *o, const char *key)
{
  struct json_object *a;

  return json_get_array (o, key, &a, NULL, 0) == 0 ? a : NULL;
}
