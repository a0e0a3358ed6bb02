/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: reading a status -- the file, its text as JSON (what
 * json-c lets through that JSON does not allow refused), and its fields
 * as values of one type.  See status.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "json.h"
#include "status.h"

/* A status file describes at most 64 members in some 100 KiB; anything
 * much bigger is not one.
 */
#define STATUS_MAX_SIZE (16 * 1024 * 1024)

/* A status's fields read with json.h's getters, for a caller that
 * shows "?" for whatever is wrong: true or false, no reason.
 */

/* o[key] if o is an object and the value has that type, else NULL. */
struct json_object *
field (struct json_object *o, const char *key, enum json_type type)
{
  struct json_object *v;

  return json_get_value (o, key, type, &v, NULL, 0) == 0 ? v : NULL;
}

/* o[key] is the string s (all of it: JSON strings may hold NULs). */
bool
text_is (struct json_object *o, const char *key, const char *s)
{
  struct json_object *v = field (o, key, json_type_string);

  return v && (size_t) json_object_get_string_len (v) == strlen (s)
         && strcmp (json_object_get_string (v), s) == 0;
}

/* o[key] is present and null. */
bool
is_null (struct json_object *o, const char *key)
{
  struct json_object *v;

  return json_get_value (o, key, json_type_null, &v, NULL, 0) == 0;
}

/* A non-negative integer (json-c saturates what does not fit in 64
 * bits).  The plugin writes integers; an integral number in range
 * written otherwise (2.0) is taken too.
 */
bool
get_uint (struct json_object *o, const char *key, uint64_t *out)
{
  double d;

  if (json_get_uint64 (o, key, out, NULL, 0) == 0)
    return true;
  if (json_get_double (o, key, &d, NULL, 0) == -1
      || !(d >= 0 && d < 18446744073709551616.0) || d != floor (d))
    return false;
  *out = d;
  return true;
}

/* Any finite number (json-c takes NaN and Infinity; 1e400 reads as
 * infinity).
 */
bool
get_number (struct json_object *o, const char *key, double *out)
{
  return json_get_double (o, key, out, NULL, 0) == 0;
}

/* The whole file, or -1 with the reason in why.  A status file is a
 * regular file (the plugin renames it into place); O_NONBLOCK so that a
 * FIFO in its place cannot hang us.
 */
int
read_file (const char *path, char **out, size_t *outlen, char *why,
           size_t whylen)
{
  struct stat st;
  char *buf = NULL;
  size_t len = 0, size = 0;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

  if (fd == -1) {
    if (errno == ENOENT)
      snprintf (why, whylen,
                "does not exist: the volume is not served, or its server "
                "has not written it yet");
    else
      snprintf (why, whylen, "open: %m");
    return -1;
  }
  if (fstat (fd, &st) == -1) {
    snprintf (why, whylen, "fstat: %m");
    goto err;
  }
  if (!S_ISREG (st.st_mode)) {
    snprintf (why, whylen, "not a regular file");
    goto err;
  }
  for (;;) {
    ssize_t n;

    if (len == size) {
      char *p;

      if (size >= STATUS_MAX_SIZE) {
        snprintf (why, whylen, "larger than %d bytes: not a status file",
                  STATUS_MAX_SIZE);
        goto err;
      }
      size = size ? size * 2 : 65536;
      p = realloc (buf, size + 1);
      if (p == NULL) {
        snprintf (why, whylen, "%m");
        goto err;
      }
      buf = p;
    }
    n = read (fd, &buf[len], size - len);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      snprintf (why, whylen, "read: %m");
      goto err;
    }
    if (n == 0)
      break;
    len += n;
  }
  close (fd);
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return 0;

err:
  free (buf);
  close (fd);
  return -1;
}

/* json-c's strict mode still takes control characters inside strings
 * and the literals NaN, Infinity and -Infinity: none of them is JSON (RFC
 * 8259) and jq refuses them.  Run on text json-c has accepted, whose
 * strings are therefore well delimited.  Returns the offending byte's
 * offset or -1.
 */
static ssize_t
not_json_at (const char *buf, size_t len)
{
  bool in_string = false, escaped = false;

  for (size_t i = 0; i < len; ++i) {
    unsigned char c = buf[i];

    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      else if (c < 0x20)
        return i;
    }
    else if (c == '"')
      in_string = true;
    else if (c == 'N' || c == 'I')
      return i;
  }
  return -1;
}

/* The file's text as a JSON object, or NULL with the reason in why. */
struct json_object *
parse_status (const char *buf, size_t len, char *why, size_t whylen)
{
  struct json_tokener *tok = json_tokener_new_ex (JSON_TOKENER_DEFAULT_DEPTH);
  struct json_object *obj;
  enum json_tokener_error e;
  size_t end;
  ssize_t bad;

  if (tok == NULL) {
    snprintf (why, whylen, "out of memory");
    return NULL;
  }
  json_tokener_set_flags (tok,
                          JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  obj = json_tokener_parse_ex (tok, buf, len);
  e = json_tokener_get_error (tok);
  end = json_tokener_get_parse_end (tok);
  json_tokener_free (tok);
  if (e == json_tokener_continue) {
    snprintf (why, whylen, "not valid JSON: it ends early (%s)",
              len ? "truncated" : "empty file");
    json_object_put (obj);
    return NULL;
  }
  if (e != json_tokener_success) {
    snprintf (why, whylen, "not valid JSON: %s at byte %zu",
              json_tokener_error_desc (e), end);
    return NULL;
  }
  while (end < len && buf[end] && strchr (" \t\r\n", buf[end]))
    end++;
  bad = not_json_at (buf, len);
  if (end < len || bad >= 0) {
    snprintf (why, whylen, "not valid JSON: unexpected character at byte %zu",
              bad >= 0 ? (size_t) bad : end);
    json_object_put (obj);
    return NULL;
  }
  if (obj == NULL || !json_object_is_type (obj, json_type_object)) {
    snprintf (why, whylen, "not a JSON object: not an nbdstripe status file");
    json_object_put (obj);
    return NULL;
  }
  return obj;
}
