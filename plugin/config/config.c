/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume config loader.  See include/config.h.
 *
 * The settings are walked in file order, each key through its setter, so
 * that the first error reported is the first one in the file.  Rules that
 * involve several keys (socket or port, TLS files, data_offset with
 * metadata "none") are checked afterwards, pointing at the line of the
 * setting that has to change.  The raw text, which libconfig parses, is
 * read and scanned by config_text.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <libconfig.h>

#include "config.h"
#include "config_text.h"
#include "log.h"
#include "member.h"
#include "header.h"

#define DEFAULT_RUN_DIR "/run/nbdstripe"
#define NBD_MAX_EXPORT_NAME 4096 /* the NBD protocol's limit */
#define SOCKET_PATH_MAX (sizeof ((struct sockaddr_un *) 0)->sun_path - 1)

struct loader {
  const char *path;
  struct stripe_config *cfg;
  char *err;
  size_t errlen;
  struct config_text text; /* the file, as libconfig parses it */
  /* A reshape's keys, until loader_check_reshape puts them in cfg. */
  char *joining[LAYOUT_MAX_MEMBERS];
  unsigned nr_joining;
  char *leaving;
  int leaving_line;
  int spare_line[LAYOUT_MAX_MEMBERS]; /* each spare's line */
};

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
static void
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
static unsigned
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
static int __attribute__ ((format (printf, 3, 4)))
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
static int __attribute__ ((format (printf, 3, 4)))
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
static int __attribute__ ((format (printf, 3, 4)))
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
static const char *
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
static const char *
loader_type_and_value (const config_setting_t *s, char *buf, size_t len)
{
  char v[96];

  if (config_setting_is_aggregate (s))
    return type_name (s);
  snprintf (buf, len, "%s (%s)", type_name (s),
            loader_value_text (s, v, sizeof v));
  return buf;
}

#define VALUE(s) loader_value_text ((s), (char[96]){ 0 }, 96)
#define TYPE_AND_VALUE(s) loader_type_and_value ((s), (char[128]){ 0 }, 128)
#define QUOTE(str) log_quote ((str), (char[96]){ 0 }, 96)
/* For a string whose every byte matters (a control character in it). */
#define QUOTE_LONG(str) log_quote ((str), (char[512]){ 0 }, 512)

int
config_parse_uuid (const char *s, uint8_t uuid[16])
{
  static const char dashed[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
  static const char mdadm[] = "xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx";
  const char *form = strlen (s) == strlen (dashed) && s[8] == '-' ? dashed
                     : strlen (s) == strlen (mdadm)                ? mdadm
                                                                   : NULL;
  unsigned nd = 0;

  if (form == NULL)
    return -1;
  for (size_t i = 0; form[i]; ++i) {
    unsigned v;
    if (form[i] != 'x') {
      if (s[i] != form[i])
        return -1;
      continue;
    }
    if (s[i] >= '0' && s[i] <= '9')
      v = s[i] - '0';
    else if (s[i] >= 'a' && s[i] <= 'f')
      v = s[i] - 'a' + 10;
    else if (s[i] >= 'A' && s[i] <= 'F')
      v = s[i] - 'A' + 10;
    else
      return -1;
    if (nd % 2 == 0)
      uuid[nd / 2] = v << 4;
    else
      uuid[nd / 2] |= v;
    nd++;
  }
  return 0;
}

/* The one size syntax (nbdstripe(8), SIZES): the config's sizes, the
 * plugin's chunk=, and what the tools print.  nbdkit_parse_size's
 * suffixes (b, s, K...E) and the IEC ones (KiB...EiB), all 1024-based and
 * of either case; no sign, space, fraction or hex (strtoimax would take
 * " +1M"; nothing prints that).  KB, MB... are refused: 1000 or 1024?
 */
int
config_parse_size (const char *s, uint64_t *out)
{
  static const char units[] = "kmgtpe";
  uint64_t v = 0;
  unsigned shift = 0;
  const char *u;

  if (s == NULL || *s < '0' || *s > '9')
    return -1; /* also rejects "", "-1", " 1", "+1" */
  for (; *s >= '0' && *s <= '9'; ++s) {
    unsigned d = *s - '0';
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  if (*s == '\0')
    ;
  else if ((*s == 'b' || *s == 'B') && s[1] == '\0')
    ;
  else if ((*s == 's' || *s == 'S') && s[1] == '\0')
    shift = 9; /* nbdkit's "sectors": 512 bytes, whatever the device */
  else if ((u = strchr (units, *s | 0x20)) != NULL) {
    shift = 10 * (unsigned) (u - units + 1);
    s++;
    if ((*s == 'i' || *s == 'I') && (s[1] == 'b' || s[1] == 'B'))
      s += 2;
    if (*s != '\0')
      return -1;
  }
  else
    return -1;
  if (shift && v > UINT64_MAX >> shift)
    return -1;
  *out = v << shift;
  return 0;
}

/* Getters.  Each checks the type and the range, and on error names what
 * was expected.
 */

/* A size: a string with an optional suffix, or a non-negative integer. */
static int
loader_get_size (struct loader *ld, const config_setting_t *s, uint64_t *out,
                 const char *expected)
{
  long long ll;

  switch (config_setting_type (s)) {
  case CONFIG_TYPE_STRING:
    if (config_parse_size (config_setting_get_string (s), out) == 0)
      return 0;
    break;
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64:
    ll = config_setting_get_int64 (s);
    if (ll >= 0) {
      *out = ll;
      return 0;
    }
    break;
  default:
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            TYPE_AND_VALUE (s));
  }
  return loader_error_at (ld, s, "expected %s, got %s", expected, VALUE (s));
}

/* The string of s (owned by libconfig), or NULL after reporting. */
static const char *
loader_get_string (struct loader *ld, const config_setting_t *s,
                   const char *expected)
{
  if (config_setting_type (s) != CONFIG_TYPE_STRING) {
    loader_error_at (ld, s, "expected %s, got %s", expected,
                     TYPE_AND_VALUE (s));
    return NULL;
  }
  return config_setting_get_string (s);
}

static int
loader_dup_string (struct loader *ld, const config_setting_t *s,
                   const char *str, char **out)
{
  char *copy = strdup (str);

  if (copy == NULL)
    return loader_error_at (ld, s, "out of memory");
  free (*out);
  *out = copy;
  return 0;
}

/* Every path in the config is absolute: a daemon (or systemd) does not run
 * in the config's directory, so a relative path would mean something
 * different depending on who starts it.
 */
static int
loader_get_abs_path (struct loader *ld, const config_setting_t *s, char **out)
{
  static const char expected[] =
    "an absolute path (a relative path is ambiguous: a daemon does not run "
    "in the config's directory)";
  const char *str = loader_get_string (ld, s, expected);

  if (str == NULL)
    return -1;
  if (str[0] != '/')
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            QUOTE (str));
  if (log_has_control (str))
    return loader_error_at (
      ld, s,
      "%s holds a control character: a path must not (it "
      "would reach log lines raw)",
      QUOTE_LONG (str));
  return loader_dup_string (ld, s, str, out);
}

/* One of names[], as its index. */
static int
loader_get_choice (struct loader *ld, const config_setting_t *s,
                   const char *const *names, int *out)
{
  char expected[128] = "";
  const char *str;
  size_t n = 0;
  int i;

  for (i = 0; names[i]; ++i)
    n += snprintf (&expected[n], sizeof expected - n, "%s\"%s\"",
                   i == 0         ? ""
                   : names[i + 1] ? ", "
                                  : " or ",
                   names[i]);
  str = loader_get_string (ld, s, expected);
  if (str == NULL)
    return -1;
  for (i = 0; names[i]; ++i)
    if (strcmp (str, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return loader_error_at (ld, s, "expected %s, got %s", expected, QUOTE (str));
}

/* The keys.  Every integer in a range is set by set_number, after its
 * entry in numbers[]; every other key has a setter of its own, in the
 * order of include/config.h.
 */

struct key {
  const char *name;
  int (*set) (struct loader *ld, const config_setting_t *s);
};

static int loader_walk_group (struct loader *ld, const config_setting_t *group,
                              const struct key *keys);

/* The offset of field f, which set_number writes as an unsigned: f must be
 * one, or an int, which C lets be written through an unsigned (C11 6.5p7)
 * as long as the value fits both -- every max below does.  Anything else
 * fails to compile (no _Generic association).
 */
#define UNSIGNED_OR_INT(f)                                                    \
  _Generic(((struct stripe_config *) 0)->f, unsigned : 0, int : 0)
#define FIELD(f) (offsetof (struct stripe_config, f) + UNSIGNED_OR_INT (f))

/* The integers in a range: one entry a key, found by its name as messages
 * spell it, so that a key's limits and its message are read in one place.
 */
static const struct number {
  const char *key; /* as in messages */
  size_t offset;   /* FIELD () */
  unsigned min, max;
  const char *what; /* "expected WHAT from MIN to MAX" */
} numbers[] = {
  { "serve.port", FIELD (serve.port), 1, 65535, "a TCP port number" },
  { "serve.threads", FIELD (serve.threads), 1, 1024, "a number of threads" },
  { "health.interval", FIELD (health.set.interval), 1, 3600,
    "a number of seconds" },
  { "health.error_threshold", FIELD (health.set.error_threshold), 1, 1000000,
    "a number of errors" },
  { "health.window", FIELD (health.set.window), 1, 3600,
    "a number of seconds" },
  { "health.min_samples", FIELD (health.set.min_samples), 1, 1000000,
    "a number of requests" },
  { "health.io_timeout", FIELD (health.set.io_timeout), 0, 3600,
    "a number of seconds (0: never)" },
  { "health.probe_interval", FIELD (health.set.probe_interval), 1, 3600,
    "a number of seconds" },
  { "health.on_change_timeout", FIELD (health.set.on_change_timeout), 1, 3600,
    "a number of seconds" },
  { "health.drive_interval", FIELD (health.set.drive_interval), 0,
    HEALTH_MAX_DRIVE_INTERVAL, "a number of seconds (0: never)" },
  { "remote.connections", FIELD (remote.connections), 1,
    MEMBER_CONNECTIONS_MAX, "a number of connections per remote member" },
  { NULL, 0, 0, 0, NULL },
};

static int
set_number (struct loader *ld, const config_setting_t *s)
{
  const struct number *n;
  char key[160];
  long long ll;

  loader_setting_key (s, key, sizeof key);
  for (n = numbers; n->key && strcmp (n->key, key) != 0; ++n)
    ;
  if (n->key == NULL) /* a key table and numbers[] disagree */
    return loader_error_at (ld, s,
                            "a number with no limits known to the loader");
  if (config_setting_type (s) != CONFIG_TYPE_INT
      && config_setting_type (s) != CONFIG_TYPE_INT64)
    return loader_error_at (ld, s, "expected %s from %u to %u, got %s",
                            n->what, n->min, n->max, TYPE_AND_VALUE (s));
  ll = config_setting_get_int64 (s);
  if (ll < n->min || ll > n->max)
    return loader_error_at (ld, s, "expected %s from %u to %u, got %lld",
                            n->what, n->min, n->max, ll);
  *(unsigned *) ((char *) ld->cfg + n->offset) = ll;
  return 0;
}

static int
set_name (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] =
    "a name of 1 to 63 characters from A-Z a-z 0-9 . _ -";
  const char *name = loader_get_string (ld, s, expected);
  size_t len;

  if (name == NULL)
    return -1;
  len = strlen (name);
  if (len == 0 || len > HEADER_NAME_MAX
      || strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       "0123456789._-")
           != len)
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            QUOTE (name));
  return loader_dup_string (ld, s, name, &ld->cfg->name);
}

static int
set_chunk (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] =
    "a size such as \"128K\" (a non-zero multiple of 4096 bytes)";
  uint64_t chunk;

  if (loader_get_size (ld, s, &chunk, expected) == -1)
    return -1;
  if (chunk == 0 || chunk % LAYOUT_CHUNK_ALIGN != 0)
    return loader_error_at (ld, s, "expected %s, got %s", expected, VALUE (s));
  ld->cfg->chunk = chunk;
  return 0;
}

/* A member is an absolute path (as any path in the config) or an NBD URI
 * (remote.h), which libnbd parses when the member is opened.  The same
 * string twice is refused here; the same file under two names is found
 * when the members are opened.
 */
/* A list of device names (members, joining, removed: noun "member";
 * spares: "spare") into out[], *nr of them; empty allowed when empty_ok.
 */
static int
set_member_list (struct loader *ld, const config_setting_t *s, char **out,
                 unsigned *nr, bool empty_ok, const char *noun)
{
  static const char expected[] = "an absolute path or an NBD URI";
  int n;

  if (config_setting_type (s) != CONFIG_TYPE_ARRAY
      && config_setting_type (s) != CONFIG_TYPE_LIST)
    return loader_error_at (
      ld, s,
      "expected an array of %ss, each %s, such as "
      "[ \"/dev/nvme0n1\", \"nbd://host/export\" ], got %s",
      noun, expected, TYPE_AND_VALUE (s));
  n = config_setting_length (s);
  if (n == 0 && !empty_ok)
    return loader_error_at (ld, s, "empty: a volume needs 1 to %d members",
                            LAYOUT_MAX_MEMBERS);
  if (n > LAYOUT_MAX_MEMBERS)
    return loader_error_at (ld, s, "%d given: at most %d %ss are supported", n,
                            LAYOUT_MAX_MEMBERS, noun);

  for (int i = 0; i < n; ++i) {
    const config_setting_t *m = config_setting_get_elem (s, i);
    char what[32];
    const char *path;

    snprintf (what, sizeof what, "a %s (a string)", noun);
    path = loader_get_string (ld, m, what);
    if (path == NULL)
      return -1;
    if (path[0] == '\0')
      return loader_error_at (ld, m, "empty %s: expected %s", noun, expected);
    if (log_has_control (path))
      return loader_error_at (ld, m,
                              "%s holds a control character: a %s's path or "
                              "URI must not (it would reach log lines raw)",
                              QUOTE_LONG (path), noun);
    if (path[0] != '/' && !member_is_uri (path)) {
      if (strstr (path, "://"))
        return loader_error_at (
          ld, m,
          "%s: not an NBD URI (nbd://, nbds://, nbd+unix://, "
          "nbds+unix://, nbd+vsock://, nbds+vsock://): "
          "expected %s",
          QUOTE (path), expected);
      return loader_error_at (ld, m,
                              "%s is a relative path: each %s must be %s (a "
                              "relative path in a config file is ambiguous: a "
                              "daemon does not run in the config's directory)",
                              QUOTE (path), noun, expected);
    }
    for (int j = 0; j < i; ++j)
      if (strcmp (path, out[j]) == 0)
        return loader_error_at (ld, m,
                                "%s is the same %s as %s[%d]: each "
                                "%s can be used once",
                                QUOTE (path), path[0] == '/' ? "path" : "URI",
                                config_setting_name (s), j, noun);
    if (loader_dup_string (ld, m, path, &out[i]) == -1)
      return -1;
    *nr = i + 1;
  }
  return 0;
}

static int
set_members (struct loader *ld, const config_setting_t *s)
{
  return set_member_list (ld, s, ld->cfg->members, &ld->cfg->nr_members, false,
                          "member");
}

static int
set_joining (struct loader *ld, const config_setting_t *s)
{
  return set_member_list (ld, s, ld->joining, &ld->nr_joining, true, "member");
}

static int
set_removed (struct loader *ld, const config_setting_t *s)
{
  return set_member_list (ld, s, ld->cfg->removed, &ld->cfg->nr_removed, true,
                          "member");
}

/* Whether each spare is a member, joining or removed is checked once
 * the whole file is read (loader_check_spares): the lines are kept for it.
 */
static int
set_spares (struct loader *ld, const config_setting_t *s)
{
  if (set_member_list (ld, s, ld->cfg->spares, &ld->cfg->nr_spares, true,
                       "spare")
      == -1)
    return -1;
  for (unsigned k = 0; k < ld->cfg->nr_spares; ++k)
    ld->spare_line[k] =
      loader_setting_line (ld, config_setting_get_elem (s, k));
  return 0;
}

static int
set_on_failing (struct loader *ld, const config_setting_t *s)
{
  static const char *const names[] = { "alert", "replace", NULL };
  int i;

  if (loader_get_choice (ld, s, names, &i) == -1)
    return -1;
  ld->cfg->on_failing = i == 0 ? ON_FAILING_ALERT : ON_FAILING_REPLACE;
  return 0;
}

static int
set_leaving (struct loader *ld, const config_setting_t *s)
{
  const char *path =
    loader_get_string (ld, s, "the member leaving (a string)");

  if (path == NULL)
    return -1;
  ld->leaving_line = config_setting_source_line (s);
  return loader_dup_string (ld, s, path, &ld->leaving);
}

static const char *const metadata_names[] = { "header", "none", "md", NULL };
static const enum metadata_mode metadata_modes[] = { METADATA_HEADER,
                                                     METADATA_NONE,
                                                     METADATA_MD };

int
config_metadata_parse (const char *name, enum metadata_mode *mode)
{
  for (int i = 0; metadata_names[i]; ++i)
    if (strcmp (name, metadata_names[i]) == 0) {
      *mode = metadata_modes[i];
      return 0;
    }
  return -1;
}

static int
set_metadata (struct loader *ld, const config_setting_t *s)
{
  int i;

  if (loader_get_choice (ld, s, metadata_names, &i) == -1)
    return -1;
  ld->cfg->metadata = metadata_modes[i];
  return 0;
}

static int
set_layout (struct loader *ld, const config_setting_t *s)
{
  static const char *const names[] = { "original", "alternate", NULL };
  int i;

  if (loader_get_choice (ld, s, names, &i) == -1)
    return -1;
  ld->cfg->layout = i == 0 ? LAYOUT_MD_ORIG : LAYOUT_MD_ALT;
  ld->cfg->layout_given = true;
  return 0;
}

/* An array UUID as nbdstripe prints it (8-4-4-4-12 hex digits) or as
 * mdadm does (four groups of 8, ':' between).
 */
static int
set_uuid (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] =
    "an array UUID such as \"01234567-89ab-cdef-0123-456789abcdef\" "
    "or mdadm's \"01234567:89abcdef:01234567:89abcdef\"";
  const char *str = loader_get_string (ld, s, expected);

  if (str == NULL)
    return -1;
  if (config_parse_uuid (str, ld->cfg->uuid) == -1)
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            QUOTE (str));
  ld->cfg->uuid_given = true;
  return 0;
}

/* Only the form here; whether data_offset may be given at all depends on
 * metadata, which may come later in the file (loader_check_data_offset).
 */
static int
set_data_offset (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] =
    "a size such as \"1M\" (a multiple of 4096 bytes)";
  uint64_t off;

  if (loader_get_size (ld, s, &off, expected) == -1)
    return -1;
  if (off % HEADER_SIZE != 0)
    return loader_error_at (ld, s, "expected %s, got %s", expected, VALUE (s));
  ld->cfg->data_offset = off;
  ld->cfg->data_offset_given = true;
  return 0;
}

/* The engine owns the names (cache_mode.c), nbdkit's aliases included. */
static int
set_cache (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] =
    "\"writeback\", \"writethrough\" or \"direct\" (or nbdkit's "
    "\"default\" or \"none\")";
  const char *str = loader_get_string (ld, s, expected);

  if (str == NULL)
    return -1;
  if (cache_mode_parse (str, &ld->cfg->cache) == -1)
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            QUOTE (str));
  return 0;
}

static int
set_socket (struct loader *ld, const config_setting_t *s)
{
  if (loader_get_abs_path (ld, s, &ld->cfg->serve.socket) == -1)
    return -1;
  if (strlen (ld->cfg->serve.socket) > SOCKET_PATH_MAX)
    return loader_error_at (ld, s,
                            "too long (%zu bytes): a Unix socket path has "
                            "at most %zu bytes",
                            strlen (ld->cfg->serve.socket), SOCKET_PATH_MAX);
  return 0;
}

static int
set_address (struct loader *ld, const config_setting_t *s)
{
  const char *addr =
    loader_get_string (ld, s, "an address to listen on such as \"127.0.0.1\"");

  if (addr == NULL)
    return -1;
  if (addr[0] == '\0' || strpbrk (addr, " \t\r\n") != NULL)
    return loader_error_at (ld, s,
                            "expected an address to listen on such as "
                            "\"127.0.0.1\", got %s",
                            QUOTE (addr));
  return loader_dup_string (ld, s, addr, &ld->cfg->serve.address);
}

static int
set_export_name (struct loader *ld, const config_setting_t *s)
{
  const char *name = loader_get_string (ld, s, "an export name (a string)");

  if (name == NULL)
    return -1;
  if (strlen (name) > NBD_MAX_EXPORT_NAME)
    return loader_error_at (ld, s,
                            "too long (%zu bytes): NBD export names have at "
                            "most %d bytes",
                            strlen (name), NBD_MAX_EXPORT_NAME);
  return loader_dup_string (ld, s, name, &ld->cfg->serve.export_name);
}

static int
set_pidfile (struct loader *ld, const config_setting_t *s)
{
  return loader_get_abs_path (ld, s, &ld->cfg->serve.pidfile);
}

static int
set_tls (struct loader *ld, const config_setting_t *s)
{
  static const char *const names[] = { "off", "on", "require", NULL };
  static const enum tls_mode modes[] = { TLS_OFF, TLS_ON, TLS_REQUIRE };
  int i;

  if (loader_get_choice (ld, s, names, &i) == -1)
    return -1;
  ld->cfg->serve.tls = modes[i];
  return 0;
}

/* The file is only looked at, never opened: the daemon hands the path to
 * nbdkit, and a missing file is better reported now with its line.
 */
static int
check_exists (struct loader *ld, const config_setting_t *s, const char *path,
              mode_t type)
{
  struct stat st;

  if (stat (path, &st) == -1) {
    if (errno == ENOENT)
      return loader_error_at (ld, s, "%s: no such %s", QUOTE (path),
                              type == S_IFDIR ? "directory" : "file");
    return loader_error_at (ld, s, "%s: %s", QUOTE (path), strerror (errno));
  }
  if (type == S_IFDIR && !S_ISDIR (st.st_mode))
    return loader_error_at (ld, s, "%s is not a directory", QUOTE (path));
  if (type == S_IFREG && !S_ISREG (st.st_mode))
    return loader_error_at (ld, s, "%s is not a regular file", QUOTE (path));
  return 0;
}

static int
set_tls_certificates (struct loader *ld, const config_setting_t *s)
{
  if (loader_get_abs_path (ld, s, &ld->cfg->serve.tls_certificates) == -1)
    return -1;
  return check_exists (ld, s, ld->cfg->serve.tls_certificates, S_IFDIR);
}

/* The key is the volume's password: anyone who can read it can read and
 * write the volume, anyone who can write it can let themselves in.
 */
static int
set_tls_psk (struct loader *ld, const config_setting_t *s)
{
  const char *psk;
  struct stat st;

  if (loader_get_abs_path (ld, s, &ld->cfg->serve.tls_psk) == -1)
    return -1;
  psk = ld->cfg->serve.tls_psk;
  if (check_exists (ld, s, psk, S_IFREG) == -1)
    return -1;
  if (stat (psk, &st) == 0 && (st.st_mode & 066) != 0) {
    const char *how = "readable and writable";

    if ((st.st_mode & 022) == 0)
      how = "readable";
    else if ((st.st_mode & 044) == 0)
      how = "writable";
    return loader_warn_at (
      ld, s,
      "%s has mode %04o: %s by group or others, and whoever "
      "holds the key can read and write the volume; chmod "
      "0600 it",
      QUOTE_LONG (psk), (unsigned) (st.st_mode & 07777), how);
  }
  return 0;
}

static int
set_tls_verify_peer (struct loader *ld, const config_setting_t *s)
{
  if (config_setting_type (s) != CONFIG_TYPE_BOOL)
    return loader_error_at (ld, s, "expected true or false, got %s",
                            TYPE_AND_VALUE (s));
  ld->cfg->serve.tls_verify_peer = config_setting_get_bool (s);
  return 0;
}

static int
set_status_file (struct loader *ld, const config_setting_t *s)
{
  return loader_get_abs_path (ld, s, &ld->cfg->health.status_file);
}

static int
set_prometheus_file (struct loader *ld, const config_setting_t *s)
{
  return loader_get_abs_path (ld, s, &ld->cfg->health.prometheus_file);
}

static int
set_on_change (struct loader *ld, const config_setting_t *s)
{
  const char *prog;

  if (loader_get_abs_path (ld, s, &ld->cfg->health.on_change) == -1)
    return -1;
  prog = ld->cfg->health.on_change;
  if (check_exists (ld, s, prog, S_IFREG) == -1)
    return -1;
  if (access (prog, X_OK) == -1)
    return loader_error_at (ld, s, "%s is not executable", QUOTE (prog));
  return 0;
}

/* Not in numbers[]: a float, above a bound it may not reach. */
static int
set_slow_factor (struct loader *ld, const config_setting_t *s)
{
  static const char expected[] = "a number greater than 1 such as 4.0";
  double f;

  switch (config_setting_type (s)) {
  case CONFIG_TYPE_FLOAT: f = config_setting_get_float (s); break;
  case CONFIG_TYPE_INT:
  case CONFIG_TYPE_INT64: f = config_setting_get_int64 (s); break;
  default:
    return loader_error_at (ld, s, "expected %s, got %s", expected,
                            TYPE_AND_VALUE (s));
  }
  /* !(f > 1) also catches NaN; "1e999" reads as infinity. */
  if (!(f > 1) || !isfinite (f))
    return loader_error_at (ld, s, "expected %s, got %s", expected, VALUE (s));
  ld->cfg->health.set.slow_factor = f;
  return 0;
}

static const struct key remote_keys[] = { { "connections", set_number },
                                          { NULL, NULL } };

static int
loader_set_remote (struct loader *ld, const config_setting_t *s)
{
  return loader_walk_group (ld, s, remote_keys);
}

static const struct key serve_keys[] = {
  { "socket", set_socket },
  { "address", set_address },
  { "port", set_number },
  { "export_name", set_export_name },
  { "threads", set_number },
  { "pidfile", set_pidfile },
  { "tls", set_tls },
  { "tls_certificates", set_tls_certificates },
  { "tls_psk", set_tls_psk },
  { "tls_verify_peer", set_tls_verify_peer },
  { NULL, NULL }
};

static const struct key health_keys[] = {
  { "status_file", set_status_file },
  { "prometheus_file", set_prometheus_file },
  { "on_change", set_on_change },
  { "interval", set_number },
  { "slow_factor", set_slow_factor },
  { "error_threshold", set_number },
  { "window", set_number },
  { "min_samples", set_number },
  { "io_timeout", set_number },
  { "probe_interval", set_number },
  { "on_change_timeout", set_number },
  { "drive_interval", set_number },
  { NULL, NULL },
};

static int
loader_set_serve (struct loader *ld, const config_setting_t *s)
{
  return loader_walk_group (ld, s, serve_keys);
}

static int
loader_set_health (struct loader *ld, const config_setting_t *s)
{
  return loader_walk_group (ld, s, health_keys);
}

static const struct key loader_top_keys[] = { { "name", set_name },
                                              { "chunk", set_chunk },
                                              { "members", set_members },
                                              { "metadata", set_metadata },
                                              { "data_offset",
                                                set_data_offset },
                                              { "layout", set_layout },
                                              { "uuid", set_uuid },
                                              { "cache", set_cache },
                                              { "serve", loader_set_serve },
                                              { "health", loader_set_health },
                                              { "remote", loader_set_remote },
                                              { "joining", set_joining },
                                              { "leaving", set_leaving },
                                              { "removed", set_removed },
                                              { "spares", set_spares },
                                              { "on_failing", set_on_failing },
                                              { NULL, NULL } };

/* Edit distance, for "did you mean": typos are the usual unknown keys. */
static size_t
edit_distance (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);
  size_t row[64];

  if (la >= 64 || lb >= 64)
    return SIZE_MAX;
  for (size_t j = 0; j <= lb; ++j)
    row[j] = j;
  for (size_t i = 1; i <= la; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; ++j) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      if (up + 1 < best)
        best = up + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

static int
unknown_key (struct loader *ld, const config_setting_t *s,
             const config_setting_t *group, const struct key *keys)
{
  char valid[256] = "", hint[96] = "";
  size_t n = 0, best = 3;

  for (const struct key *k = keys; k->name; ++k) {
    size_t d = edit_distance (config_setting_name (s), k->name);
    if (d < best) {
      best = d;
      snprintf (hint, sizeof hint, " (did you mean \"%s\"?)", k->name);
    }
    n += snprintf (&valid[n], sizeof valid - n, "%s%s", k == keys ? "" : ", ",
                   k->name);
  }
  if (config_setting_is_root (group))
    return loader_error_at (ld, s, "unknown key%s; the valid keys are: %s",
                            hint, valid);
  return loader_error_at (ld, s, "unknown key%s; the valid keys in %s are: %s",
                          hint, config_setting_name (group), valid);
}

static int
loader_walk_group (struct loader *ld, const config_setting_t *group,
                   const struct key *keys)
{
  int n;

  if (!config_setting_is_group (group))
    return loader_error_at (ld, group, "expected a group { ... }, got %s",
                            TYPE_AND_VALUE (group));
  n = config_setting_length (group);
  for (int i = 0; i < n; ++i) {
    const config_setting_t *s = config_setting_get_elem (group, i);
    const struct key *k;

    for (k = keys; k->name; ++k)
      if (strcmp (config_setting_name (s), k->name) == 0)
        break;
    if (k->name == NULL)
      return unknown_key (ld, s, group, keys);
    if (k->set (ld, s) == -1)
      return -1;
  }
  return 0;
}

/* Rules across keys, checked after the walk. */

static int
loader_check_required (struct loader *ld)
{
  if (ld->cfg->name == NULL)
    return loader_error_line (
      ld, 0,
      "name: missing: every volume needs a name "
      "(1 to 63 characters from A-Z a-z 0-9 . _ -), e.g. "
      "name = \"fast0\";");
  if (ld->cfg->nr_members == 0)
    return loader_error_line (ld, 0,
                              "members: missing: list the member paths in "
                              "order, e.g. members = [ \"/dev/nvme0n1\", "
                              "\"/dev/nvme1n1\" ];");
  return 0;
}

/* A reshape under way: the joining members follow the members (the
 * union the members' headers number them in); the leaving one is one of
 * them; none of them was removed.
 */
static int
loader_check_reshape (struct loader *ld)
{
  struct stripe_config *cfg = ld->cfg;

  if (ld->nr_joining && ld->leaving)
    return loader_error_line (ld, ld->leaving_line,
                              "leaving: a volume is grown (joining) or shrunk "
                              "(leaving), not both at once");
  if (cfg->nr_members + ld->nr_joining > LAYOUT_MAX_MEMBERS)
    return loader_error_line (ld, 0,
                              "joining: %u members with the joining ones: "
                              "at most %d are supported",
                              cfg->nr_members + ld->nr_joining,
                              LAYOUT_MAX_MEMBERS);
  for (unsigned j = 0; j < ld->nr_joining; ++j) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (ld->joining[j], cfg->members[i]) == 0)
        return loader_error_line (
          ld, 0, "joining: \"%s\" is members[%u] already", ld->joining[j], i);
    cfg->members[cfg->nr_members++] = ld->joining[j];
    ld->joining[j] = NULL;
  }
  cfg->nr_joining = ld->nr_joining;
  if (ld->leaving) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (ld->leaving, cfg->members[i]) == 0) {
        cfg->leaving = i;
        cfg->has_leaving = true;
      }
    if (!cfg->has_leaving)
      return loader_error_line (ld, ld->leaving_line,
                                "leaving: \"%s\" is none of the members",
                                ld->leaving);
    if (cfg->nr_members == 1)
      return loader_error_line (ld, ld->leaving_line,
                                "leaving: the only member cannot leave");
  }
  for (unsigned r = 0; r < cfg->nr_removed; ++r)
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (cfg->removed[r], cfg->members[i]) == 0)
        return loader_error_line (
          ld, 0,
          "removed: \"%s\" was removed from the volume and "
          "is members[%u] again: a removed member is never "
          "served again (drop it from removed to use the "
          "device anew, after 'nbdstripe create --force')",
          cfg->removed[r], i);
  return 0;
}

/* A spare is none of the members (joining ones included, after
 * loader_check_reshape) and none of the removed ones: a device is used one
 * way. on_failing = "replace" without a spare loads, but is said.
 */
static int
loader_check_spares (struct loader *ld, const config_t *conf)
{
  struct stripe_config *cfg = ld->cfg;

  for (unsigned k = 0; k < cfg->nr_spares; ++k) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (cfg->spares[k], cfg->members[i]) == 0)
        return loader_error_line (
          ld, ld->spare_line[k],
          "spares[%u]: \"%s\" is %s[%u] too: a device is "
          "a member or a spare, not both",
          k, cfg->spares[k],
          i < cfg->nr_members - cfg->nr_joining ? "members" : "joining",
          i < cfg->nr_members - cfg->nr_joining
            ? i
            : i - (cfg->nr_members - cfg->nr_joining));
    for (unsigned r = 0; r < cfg->nr_removed; ++r)
      if (strcmp (cfg->spares[k], cfg->removed[r]) == 0)
        return loader_error_line (
          ld, ld->spare_line[k],
          "spares[%u]: \"%s\" was removed from the volume "
          "(removed[%u]): a removed member is never used "
          "again (drop it from removed, and wipe it, to make "
          "it a spare)",
          k, cfg->spares[k], r);
  }
  if (cfg->on_failing == ON_FAILING_REPLACE && cfg->nr_spares == 0)
    return loader_warn_at (
      ld, config_lookup (conf, "on_failing"),
      "\"replace\" but no spares: a failing member is "
      "reported, never replaced (list devices in spares = "
      "[ ... ])");
  return 0;
}

static int
loader_check_data_offset (struct loader *ld, const config_t *conf)
{
  const config_setting_t *s = config_lookup (conf, "data_offset");
  struct stripe_config *cfg = ld->cfg;

  if (cfg->metadata == METADATA_NONE) {
    /* Without metadata data starts where the config says: 0 unless
     * given (an mdadm --build array, dm-stripe), an offset for members
     * that keep something else in front.
     */
    if (!cfg->data_offset_given)
      cfg->data_offset = 0;
  }
  else if (cfg->metadata == METADATA_MD) {
    /* A v1.2 superblock at 4 KiB, 4 KiB long: data after it. */
    if (cfg->data_offset < 2 * HEADER_SIZE)
      return loader_error_at (
        ld, s,
        "expected at least %u with metadata = \"md\": the "
        "md superblock (version 1.2) is at 4096, %u bytes "
        "long",
        2 * HEADER_SIZE, HEADER_SIZE);
  }
  else if (cfg->data_offset < HEADER_SIZE)
    return loader_error_at (
      ld, s,
      "expected at least %u: the member header takes "
      "the first %u bytes (use metadata = \"none\" for data "
      "at offset 0)",
      HEADER_SIZE, HEADER_SIZE);
  return 0;
}

static int
loader_check_serve (struct loader *ld, const config_t *conf)
{
  const config_setting_t *sock = config_lookup (conf, "serve.socket");
  const config_setting_t *address = config_lookup (conf, "serve.address");
  const config_setting_t *port = config_lookup (conf, "serve.port");

  if (sock && (port || address)) {
    const config_setting_t *tcp = port ? port : address;
    return loader_error_at (
      ld, tcp,
      "cannot be combined with serve.socket (line "
      "%u): serve either on a Unix socket or on TCP address "
      "+ port, not both",
      config_setting_source_line (sock));
  }
  if (address && !port)
    return loader_error_at (ld, address,
                            "needs serve.port: TCP is address + port "
                            "(for a Unix socket, give serve.socket instead)");
  return 0;
}

static int
loader_check_tls (struct loader *ld, const config_t *conf)
{
  const config_setting_t *tls, *certs, *psk, *verify;
  const struct stripe_config *cfg = ld->cfg;

  tls = config_lookup (conf, "serve.tls");
  certs = config_lookup (conf, "serve.tls_certificates");
  psk = config_lookup (conf, "serve.tls_psk");
  verify = config_lookup (conf, "serve.tls_verify_peer");

  /* Over TCP without TLS anybody who can connect -- every local user
   * (while the Unix socket is root's), and every host that can reach the
   * address -- can read and write the volume: only if the config says
   * so, and then loudly.
   */
  if (cfg->serve.port != 0) {
    const char *addr = cfg->serve.address ? cfg->serve.address : "127.0.0.1";

    if (tls == NULL)
      return loader_error_at (
        ld, config_lookup (conf, "serve.port"),
        "TCP without TLS: every local user, and every host "
        "that can reach %s, could read and write the volume; "
        "set tls = \"require\" with tls_psk (a key file) or "
        "tls_certificates (a directory), or tls = \"off\" to "
        "accept that",
        addr);
    if (cfg->serve.tls == TLS_OFF
        && loader_warn_at (
             ld, tls,
             "\"off\" on TCP %s:%d: every local user, and every "
             "host that can reach that address, can read and write "
             "volume '%s' (tls = \"require\" with a key or "
             "certificates prevents it)",
             addr, cfg->serve.port, cfg->name)
             == -1)
      return -1;
  }

  /* TLS material without TLS is most likely a config where the operator
   * believes the export is encrypted: refuse rather than serve in clear.
   */
  if (cfg->serve.tls == TLS_OFF) {
    const config_setting_t *s = certs                        ? certs
                                : psk                        ? psk
                                : cfg->serve.tls_verify_peer ? verify
                                                             : NULL;
    if (s)
      return loader_error_at (ld, s,
                              "given but serve.tls is \"off\": set tls = "
                              "\"on\" or \"require\", or remove it");
    return 0;
  }
  if (!certs && !psk)
    return loader_error_at (ld, tls,
                            "\"%s\" needs serve.tls_certificates (a "
                            "directory) or serve.tls_psk (a file)",
                            cfg->serve.tls == TLS_ON ? "on" : "require");
  if (certs && psk) {
    const config_setting_t *later =
      config_setting_index (psk) > config_setting_index (certs) ? psk : certs;
    return loader_error_at (
      ld, later,
      "serve.tls_certificates (line %u) and "
      "serve.tls_psk (line %u) cannot both be given: choose "
      "X.509 certificates or a pre-shared key",
      config_setting_source_line (certs), config_setting_source_line (psk));
  }
  if (cfg->serve.tls_verify_peer && !certs)
    return loader_error_at (ld, verify,
                            "needs serve.tls_certificates: client "
                            "certificates are verified against its CA (with a "
                            "pre-shared key the key itself authenticates the "
                            "client)");
  return 0;
}

static int set_default (struct loader *ld, char **field, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static int
set_default (struct loader *ld, char **field, const char *fmt, ...)
{
  va_list args;
  int r;

  if (*field)
    return 0;
  va_start (args, fmt);
  r = vasprintf (field, fmt, args);
  va_end (args);
  if (r == -1) {
    *field = NULL;
    return loader_error_line (ld, 0, "out of memory");
  }
  return 0;
}

static int
set_defaults (struct loader *ld)
{
  struct stripe_config *cfg = ld->cfg;

  if (cfg->serve.port == 0) {
    if (set_default (ld, &cfg->serve.socket, DEFAULT_RUN_DIR "/%s.sock",
                     cfg->name)
        == -1)
      return -1;
  }
  else if (set_default (ld, &cfg->serve.address, "127.0.0.1") == -1)
    return -1;
  if (set_default (ld, &cfg->serve.export_name, "%s", "") == -1
      || set_default (ld, &cfg->health.status_file,
                      DEFAULT_RUN_DIR "/%s.status.json", cfg->name)
           == -1)
    return -1;
  return 0;
}

static int load (const char *path, const char *text,
                 struct stripe_config *cfg, char *err, size_t errlen);

int
config_load (const char *path, struct stripe_config *cfg, char *err,
             size_t errlen)
{
  return load (path, NULL, cfg, err, errlen);
}

int
config_load_text (const char *path, const char *text,
                  struct stripe_config *cfg, char *err, size_t errlen)
{
  return load (path, text, cfg, err, errlen);
}

/* text NULL: read path. */
static int
load (const char *path, const char *text, struct stripe_config *cfg,
      char *err, size_t errlen)
{
  struct loader ld = {
    .path = path, .cfg = cfg, .err = err, .errlen = errlen
  };
  struct config_text_found found;
  config_t conf;
  char why[256];
  int line, r = -1;

  memset (cfg, 0, sizeof *cfg);
  cfg->chunk = LAYOUT_DEFAULT_CHUNK;
  cfg->metadata = METADATA_HEADER;
  cfg->layout = LAYOUT_MD_ALT;
  cfg->data_offset = HEADER_DEFAULT_DATA_OFFSET;
  cfg->cache = CACHE_WRITEBACK;
  cfg->serve.threads = 16;
  cfg->serve.tls = TLS_OFF;
  cfg->health.set = health_defaults ();
  cfg->remote.connections = MEMBER_CONNECTIONS_DEFAULT;
  if (err && errlen)
    err[0] = '\0';

  cfg->path = strdup (path);
  if (cfg->path == NULL)
    return loader_error_line (&ld, 0, "out of memory");

  if (text) {
    ld.text.len = strlen (text);
    ld.text.text = strdup (text);
    if (ld.text.text == NULL)
      return loader_error_line (&ld, 0, "out of memory");
  }
  else if (config_text_read (path, &ld.text, &line, why, sizeof why) == -1)
    return loader_error_line (&ld, line, "%s", why);
  config_text_scan (&ld.text, &found);
  if (found.include_line > 0) {
    config_text_free (&ld.text);
    return loader_error_line (&ld, found.include_line,
                              "@include is not supported: one file "
                              "describes one volume");
  }

  config_init (&conf);
  if (config_read_string (&conf, ld.text.text) == CONFIG_FALSE) {
    if (err && errlen)
      snprintf (err, errlen, "%s:%d: %s", path, config_error_line (&conf),
                config_error_text (&conf));
    goto out;
  }
  /* Only now: a syntax error is the first thing to fix. */
  if (found.truncated_line > 0) {
    loader_error_line (
      &ld, found.truncated_line,
      "integer %s does not fit in 32 bits, and "
      "libconfig would silently truncate it: write a size as a "
      "string such as \"4G\", or add the L suffix",
      found.truncated);
    goto out;
  }

  if (loader_walk_group (&ld, config_root_setting (&conf), loader_top_keys)
        == -1
      || loader_check_required (&ld) == -1 || loader_check_reshape (&ld) == -1
      || loader_check_spares (&ld, &conf) == -1
      || loader_check_data_offset (&ld, &conf) == -1
      || loader_check_serve (&ld, &conf) == -1
      || loader_check_tls (&ld, &conf) == -1 || set_defaults (&ld) == -1)
    goto out;
  r = 0;

out:
  for (unsigned j = 0; j < ld.nr_joining; ++j)
    free (ld.joining[j]);
  free (ld.leaving);
  config_destroy (&conf);
  config_text_free (&ld.text);
  return r;
}

void
config_free (struct stripe_config *cfg)
{
  free (cfg->path);
  free (cfg->name);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i) {
    free (cfg->members[i]);
    free (cfg->removed[i]);
    free (cfg->spares[i]);
  }
  free (cfg->serve.socket);
  free (cfg->serve.address);
  free (cfg->serve.export_name);
  free (cfg->serve.pidfile);
  free (cfg->serve.tls_certificates);
  free (cfg->serve.tls_psk);
  free (cfg->health.status_file);
  free (cfg->health.prometheus_file);
  free (cfg->health.on_change);
  for (unsigned i = 0; i < cfg->nr_warnings; ++i)
    free (cfg->warnings[i]);
  memset (cfg, 0, sizeof *cfg);
}
