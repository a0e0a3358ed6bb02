/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the config's value syntaxes, and the loader's getters
 * (config_impl.h).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"

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
int
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
const char *
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

int
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
int
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
int
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
