/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the config loader's messages (config_impl.h).  Every one
 * names the file, the line and the key, so that an editor can jump to it.
 */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_impl.h"

/* Error reporting.  Every message is one line "FILE:LINE: KEY: what is
 * wrong", so that an editor can jump to it.
 */

static const char *
setting_file (const struct loader *ld, const config_setting_t *s)
{
  const char *file = s ? config_setting_source_file (s) : NULL;

  return file ? file : ld->path;
}

/* The key as a user would write it: "chunk", "serve.port", "members[2]". */
void
loader_setting_key (const config_setting_t *s, char *buf, size_t len)
{
  const config_setting_t *chain[8];
  size_t depth = 0, n = 0;

  for (; s && !config_setting_is_root (s) && depth < 8;
       s = config_setting_parent (s))
    chain[depth++] = s;
  buf[0] = '\0';
  while (depth-- > 0 && n < len) {
    const config_setting_t *c = chain[depth];
    int r;

    if (config_setting_name (c))
      r = snprintf (&buf[n], len - n, "%s%s", n ? "." : "",
                    config_setting_name (c));
    else
      r = snprintf (&buf[n], len - n, "[%d]", config_setting_index (c));
    n += r < 0 ? 0 : (size_t) r;
  }
}

/* libconfig's line, except for list elements (config_text.h says why). */
unsigned
loader_setting_line (const struct loader *ld, const config_setting_t *s)
{
  const config_setting_t *parent = config_setting_parent (s);

  if (config_setting_name (s) == NULL && parent
      && config_setting_name (parent)) {
    int line = config_text_element_line (
      &ld->text, config_setting_name (parent),
      config_setting_source_line (parent), config_setting_index (s));
    if (line > 0)
      return line;
  }
  return config_setting_source_line (s);
}

/* "FILE:LINE: KEY: message" for setting s into buf. */
static void __attribute__ ((format (printf, 5, 0)))
vreport (struct loader *ld, const config_setting_t *s, char *buf, size_t len,
         const char *fmt, va_list args)
{
  unsigned line = s ? loader_setting_line (ld, s) : 0;
  char key[160];
  size_t n;
  int r;

  if (buf == NULL || len == 0)
    return;
  if (line > 0)
    r = snprintf (buf, len, "%s:%u: ", setting_file (ld, s), line);
  else
    r = snprintf (buf, len, "%s: ", setting_file (ld, s));
  n = r < 0 ? 0 : (size_t) r;
  if (s)
    loader_setting_key (s, key, sizeof key);
  if (s && key[0] != '\0' && n < len) {
    r = snprintf (buf + n, len - n, "%s: ", key);
    n += r < 0 ? 0 : (size_t) r;
  }
  if (n < len)
    vsnprintf (buf + n, len - n, fmt, args);
}

/* "FILE:LINE: KEY: message" for setting s.  Returns -1. */
int __attribute__ ((format (printf, 3, 4)))
loader_error_at (struct loader *ld, const config_setting_t *s, const char *fmt,
                 ...)
{
  va_list args;

  va_start (args, fmt);
  vreport (ld, s, ld->err, ld->errlen, fmt, args);
  va_end (args);
  return -1;
}

/* Adds "FILE:LINE: KEY: message" to the config's warnings: it loads, but
 * the operator must hear about it.  Returns 0 (-1 out of memory).
 */
int __attribute__ ((format (printf, 3, 4)))
loader_warn_at (struct loader *ld, const config_setting_t *s, const char *fmt,
                ...)
{
  struct stripe_config *cfg = ld->cfg;
  char buf[1024];
  va_list args;

  va_start (args, fmt);
  vreport (ld, s, buf, sizeof buf, fmt, args);
  va_end (args);
  if (cfg->nr_warnings == CONFIG_MAX_WARNINGS)
    return 0;
  cfg->warnings[cfg->nr_warnings] = strdup (buf);
  if (cfg->warnings[cfg->nr_warnings] == NULL)
    return loader_error_at (ld, s, "out of memory");
  cfg->nr_warnings++;
  return 0;
}

/* "FILE:LINE: message" (line 0: "FILE: message"), for problems that
 * belong to no setting.  Returns -1.
 */
int __attribute__ ((format (printf, 3, 4)))
loader_error_line (struct loader *ld, int line, const char *fmt, ...)
{
  va_list args;
  size_t n;
  int r;

  if (ld->err == NULL || ld->errlen == 0)
    return -1;
  if (line > 0)
    r = snprintf (ld->err, ld->errlen, "%s:%d: ", ld->path, line);
  else
    r = snprintf (ld->err, ld->errlen, "%s: ", ld->path);
  n = r < 0 ? 0 : (size_t) r;
  if (n < ld->errlen) {
    va_start (args, fmt);
    vsnprintf (ld->err + n, ld->errlen - n, fmt, args);
    va_end (args);
  }
  return -1;
}

static const char *
type_name (const config_setting_t *s)
{
  switch (config_setting_type (s)) {
  case CONFIG_TYPE_GROUP: return "a group";
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64: return "an integer";
  case CONFIG_TYPE_FLOAT: return "a float";
  case CONFIG_TYPE_STRING: return "a string";
  case CONFIG_TYPE_BOOL: return "a boolean";
  case CONFIG_TYPE_ARRAY: return "an array";
  case CONFIG_TYPE_LIST: return "a list";
  }
  return "an unknown type";
}

/* The value as written: "100K", 100000, true, 1.5. */
const char *
loader_value_text (const config_setting_t *s, char *buf, size_t len)
{
  switch (config_setting_type (s)) {
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64:
    snprintf (buf, len, "%lld", config_setting_get_int64 (s));
    return buf;
  case CONFIG_TYPE_FLOAT:
    snprintf (buf, len, "%g", config_setting_get_float (s));
    return buf;
  case CONFIG_TYPE_STRING:
    return log_quote (config_setting_get_string (s), buf, len);
  case CONFIG_TYPE_BOOL: return config_setting_get_bool (s) ? "true" : "false";
  }
  return type_name (s);
}

/* For a value of the wrong type: "a string (\"10809\")", "a group". */
const char *
loader_type_and_value (const config_setting_t *s, char *buf, size_t len)
{
  char v[96];

  if (config_setting_is_aggregate (s))
    return type_name (s);
  snprintf (buf, len, "%s (%s)", type_name (s),
            loader_value_text (s, v, sizeof v));
  return buf;
}
