/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: writing JSON on json-c.  See include/json.h. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "utf8.h"

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
