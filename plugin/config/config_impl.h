/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the config loader's insides, shared by its files.  Not for
 * anyone else: include/config.h is the interface.
 *
 *   config.c          the loader: read, parse, walk the keys, defaults
 *   config_report.c   "FILE:LINE: KEY: what is wrong", and the values
 *                     as messages show them
 *   config_value.c    the value syntaxes (sizes, UUIDs) and the getters
 *                     that check a setting's type and range
 *   config_volume.c   the volume's own keys, and the top level's table
 *   config_sections.c the serve, health and remote sections
 *   config_check.c    the rules across keys, checked after the walk
 *   config_edit.c     rewriting the members of a config file
 *   config_commit.c   the rewritten text put in place of the file
 */
#ifndef NBDSTRIPE_CONFIG_IMPL_H
#define NBDSTRIPE_CONFIG_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <libconfig.h>

#include "config.h"
#include "config_text.h"
#include "log.h"

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

/* The keys.  Every integer in a range is set by set_number, after its
 * entry in numbers[]; every other key has a setter of its own, in the
 * order of include/config.h.
 */

struct key {
  const char *name;
  int (*set) (struct loader *ld, const config_setting_t *s);
};

/* The top level's keys (config_volume.c). */
extern const struct key loader_top_keys[];

/* Walks group, each key through its setter (config.c). */
extern int loader_walk_group (struct loader *ld, const config_setting_t *group,
                              const struct key *keys);

/* The sections (config_sections.c). */
extern int loader_set_serve (struct loader *ld, const config_setting_t *s);
extern int loader_set_health (struct loader *ld, const config_setting_t *s);
extern int loader_set_remote (struct loader *ld, const config_setting_t *s);

/* Messages (config_report.c).  error_at and error_line return -1;
 * warn_at 0 (-1 out of memory).
 */
extern void loader_setting_key (const config_setting_t *s, char *buf,
                                size_t len);
extern unsigned loader_setting_line (const struct loader *ld,
                                     const config_setting_t *s);
extern int loader_error_at (struct loader *ld, const config_setting_t *s,
                            const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
extern int loader_warn_at (struct loader *ld, const config_setting_t *s,
                           const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));
extern int loader_error_line (struct loader *ld, int line, const char *fmt,
                              ...) __attribute__ ((format (printf, 3, 4)));
extern const char *loader_value_text (const config_setting_t *s, char *buf,
                                      size_t len);
extern const char *loader_type_and_value (const config_setting_t *s, char *buf,
                                          size_t len);

#define VALUE(s) loader_value_text ((s), (char[96]){ 0 }, 96)
#define TYPE_AND_VALUE(s) loader_type_and_value ((s), (char[128]){ 0 }, 128)
#define QUOTE(str) log_quote ((str), (char[96]){ 0 }, 96)
/* For a string whose every byte matters (a control character in it). */
#define QUOTE_LONG(str) log_quote ((str), (char[512]){ 0 }, 512)

/* Getters (config_value.c): 0, or -1 after reporting. */
extern int loader_get_size (struct loader *ld, const config_setting_t *s,
                            uint64_t *out, const char *expected);
extern const char *loader_get_string (struct loader *ld,
                                      const config_setting_t *s,
                                      const char *expected);
extern int loader_dup_string (struct loader *ld, const config_setting_t *s,
                              const char *str, char **out);
extern int loader_get_abs_path (struct loader *ld, const config_setting_t *s,
                                char **out);
extern int loader_get_choice (struct loader *ld, const config_setting_t *s,
                              const char *const *names, int *out);

/* The rules across keys (config_check.c), in the order load runs them:
 * 0, or -1 after reporting.
 */
extern int loader_check_required (struct loader *ld);
extern int loader_check_reshape (struct loader *ld);
extern int loader_check_spares (struct loader *ld, const config_t *conf);
extern int loader_check_data_offset (struct loader *ld, const config_t *conf);
extern int loader_check_serve (struct loader *ld, const config_t *conf);
extern int loader_check_tls (struct loader *ld, const config_t *conf);

/* text replaces the regular file real (the config's real path),
 * atomically, keeping owner, group and mode (config_commit.c): 0, or -1
 * with the reason in why.
 */
extern int config_commit (const char *real, const char *text, char *why,
                          size_t len);

#endif /* NBDSTRIPE_CONFIG_IMPL_H */
