/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume config loader.  See include/config.h.
 *
 * The settings are walked in file order, each key through its setter, so
 * that the first error reported is the first one in the file.  Rules that
 * involve several keys (socket or port, TLS files, data_offset with
 * metadata "none") are checked afterwards, pointing at the line of the
 * setting that has to change.  The raw text, which libconfig parses, is
 * read and scanned by config_text.c.  config_impl.h says which file holds
 * which keys.
 */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libconfig.h>

#include "config_impl.h"
#include "member.h"
#include "header.h"

const char *
config_run_dir (void)
{
  const char *d = getenv ("NBDSTRIPE_RUNDIR");

  return d && *d ? d : "/run/nbdstripe";
}

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

int
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
    if (set_default (ld, &cfg->serve.socket, "%s/%s.sock", config_run_dir (),
                     cfg->name)
        == -1)
      return -1;
  }
  else if (set_default (ld, &cfg->serve.address, "127.0.0.1") == -1)
    return -1;
  if (set_default (ld, &cfg->serve.export_name, "%s", "") == -1
      || set_default (ld, &cfg->health.status_file, "%s/%s.status.json",
                      config_run_dir (), cfg->name)
           == -1)
    return -1;
  return 0;
}

/* libconfig's "syntax error", and when the line holds a size without
 * quotes (chunk = 128K: libconfig has no size suffixes) the fix.  When
 * the value ends a line without a ';', libconfig trips over the next
 * line: the line before is looked at too.
 */
static void
syntax_error (struct loader *ld, const config_t *conf)
{
  int line = config_error_line (conf);
  char key[64], size[32];

  if (ld->err == NULL || ld->errlen == 0)
    return;
  for (int at = line; at >= line - 1 && at > 0; --at)
    if (config_text_unquoted_size (&ld->text, at, key, size)) {
      snprintf (ld->err, ld->errlen, "%s:%d: %s: quote sizes: %s%s\"%s\";",
                ld->path, at, config_error_text (conf), key,
                key[0] ? " = " : "", size);
      return;
    }
  snprintf (ld->err, ld->errlen, "%s:%d: %s", ld->path, line,
            config_error_text (conf));
}

static int load (const char *path, const char *text,
                 struct stripe_config *cfg, char *err, size_t errlen);

int
config_load (const char *path, struct stripe_config *cfg, char *err,
             size_t errlen)
{
  return load (path, NULL, cfg, err, errlen);
}

bool
config_volume_name (const char *path, char *name, size_t len)
{
  struct stripe_config cfg;
  char err[256];
  bool ok;

  memset (&cfg, 0, sizeof cfg);
  ok = config_load (path, &cfg, err, sizeof err) == 0;
  if (ok)
    snprintf (name, len, "%s", cfg.name);
  config_free (&cfg);
  return ok;
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
    syntax_error (&ld, &conf);
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
