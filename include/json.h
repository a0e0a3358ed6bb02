/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: JSON on json-c, one way for everything that writes it --
 * the plugin's status file, `nbdstripe inspect --json` and the other
 * commands' --json -- and one way to read it back: typed getters, for
 * the command reading the control socket's answers and the control
 * socket reading requests.
 *
 * Text may hold any byte (paths, names): it goes into JSON as UTF-8,
 * every byte that is not part of valid UTF-8 replaced by U+FFFD, so the
 * output is always valid JSON.  Numbers keep a chosen printf format (a
 * latency to 0.1 us, a time to the millisecond); NaN is null.
 */
#ifndef NBDSTRIPE_JSON_H
#define NBDSTRIPE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* A JSON string of s (NULL: null). */
extern struct json_object *json_text (const char *s);

/* A JSON number printed with fmt ("%.3f"); NaN: null. */
extern struct json_object *json_number (double v, const char *fmt);

extern struct json_object *json_u64 (uint64_t v);

/* Add key: v to an object (v may be NULL: null). */
static inline void
json_put (struct json_object *o, const char *key, struct json_object *v)
{
  json_object_object_add (o, key, v);
}

/* The whole text, indented, ending with a newline; malloc'd (NULL when
 * out of memory).
 */
extern char *json_text_of (struct json_object *o);

/* Reading JSON: a member of an object, of one type.  Each getter returns
 * 0 with the value in *out, or -1 with *out untouched and why (len bytes;
 * nothing when why is NULL) saying what is wrong, naming the key:
 *   "state" is missing          (or o is not an object)
 *   "member" must be an integer, not a string
 * A member present but null is of the wrong type ("not null"), not
 * missing: json_has tells the two apart, for members that are optional.
 */
extern bool json_has (struct json_object *o, const char *key);

/* A string without NUL bytes (JSON's "\u0000" would cut it short in C):
 * one with one is refused.  *out lives as long as o.
 */
extern int json_get_string (struct json_object *o, const char *key,
                            const char **out, char *why, size_t len);

/* An integer, as JSON writes one (1.0 is not one).  json_get_int64
 * refuses a value beyond INT64_MAX, json_get_uint64 a negative one.
 * What does not fit in 64 bits at all json-c saturates: 2^64 and beyond
 * read as UINT64_MAX, below INT64_MIN as INT64_MIN.
 */
extern int json_get_int64 (struct json_object *o, const char *key,
                           int64_t *out, char *why, size_t len);
extern int json_get_uint64 (struct json_object *o, const char *key,
                            uint64_t *out, char *why, size_t len);

/* Any finite number, integer or not (json-c reads NaN, Infinity, and
 * 1e400 as infinity: refused).
 */
extern int json_get_double (struct json_object *o, const char *key,
                            double *out, char *why, size_t len);

extern int json_get_bool (struct json_object *o, const char *key, bool *out,
                          char *why, size_t len);

/* The value of o[key] as json-c holds it, when of type t: not a new
 * reference (it lives as long as o).  A string comes as it is, NUL bytes
 * included (json_object_get_string_len says how long): for text that is
 * shown escaped rather than used.  t json_type_null: *out is NULL.
 */
extern int json_get_value (struct json_object *o, const char *key,
                           enum json_type t, struct json_object **out,
                           char *why, size_t len);

/* An object or an array: not a new reference (it lives as long as o). */
extern int json_get_object (struct json_object *o, const char *key,
                            struct json_object **out, char *why, size_t len);
extern int json_get_array (struct json_object *o, const char *key,
                           struct json_object **out, char *why, size_t len);

/* Lenient reads of what another program answered (a served volume's
 * control socket): o[key] when it is there and of the type, else NULL or
 * 0 -- an answer is shown, never trusted.  The string and the array live
 * as long as o.
 */
extern const char *json_str_or_null (struct json_object *o, const char *key);
extern double json_num_or_0 (struct json_object *o, const char *key);
extern uint64_t json_u64_or_0 (struct json_object *o, const char *key);
extern struct json_object *json_array_or_null (struct json_object *o,
                                               const char *key);

#endif /* NBDSTRIPE_JSON_H */
