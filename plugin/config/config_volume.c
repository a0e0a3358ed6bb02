/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume's own keys in a config (name, chunk, members and
 * spares, metadata, layout...), and the table of the top level.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"
#include "member.h"
#include "header.h"

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
 *
 * libconfig joins adjacent strings, so a comma forgotten between two
 * members, [ "/a/m0.img" "/a/m1.img" ], gives one member
 * "/a/m0.img/a/m1.img".  The rule: an element written as adjacent
 * strings, one of which after the first starts with "/" or is a URI
 * ("nbd://...") -- a member on its own -- is refused.  It is read from
 * the text, not guessed from the joined path (does it exist? does it
 * hold ".img/"?): what the file says, whatever is on disk today.  A long
 * path split on purpose, "/srv/volumes/" "m0.img", is still one member.
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
    char what[32], first[64], second[64];
    const char *path;
    int line;

    snprintf (what, sizeof what, "a %s (a string)", noun);
    path = loader_get_string (ld, m, what);
    if (path == NULL)
      return -1;
    if (config_text_element_joined (&ld->text, config_setting_name (s), i,
                                    &line, first, second))
      return loader_error_line (
        ld, line,
        "%s[%d]: %s %s are two strings, which libconfig joins into one "
        "%s %s: missing comma between %ss?",
        config_setting_name (s), i, first, second, noun, QUOTE_LONG (path),
        noun);
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

const struct key loader_top_keys[] = { { "name", set_name },
                                       { "chunk", set_chunk },
                                       { "members", set_members },
                                       { "metadata", set_metadata },
                                       { "data_offset", set_data_offset },
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
