/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: writing JSON, one way for everything that does -- the
 * plugin's status file, `nbdstripe inspect --json` and the other
 * commands' --json -- on json-c.
 *
 * Text may hold any byte (paths, names): it goes into JSON as UTF-8,
 * every byte that is not part of valid UTF-8 replaced by U+FFFD, so the
 * output is always valid JSON.  Numbers keep a chosen printf format (a
 * latency to 0.1 us, a time to the millisecond); NaN is null.
 */
#ifndef NBDSTRIPE_JSON_H
#define NBDSTRIPE_JSON_H

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

#endif /* NBDSTRIPE_JSON_H */
