/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: how its files share the work (status.c: the
 * command).
 *
 *   status_read.c      the status file, its text as JSON, typed fields
 *   status_judge.c     a live server behind it? the volume's verdict
 *   status_fmt.c       fields as text for people: escaped, in columns
 *   status_table.c     the table: volume, members, spares, last errors
 *   status_drives.c    the drives side by side
 *   status_progress.c  a replace, reshape or scrub in one line
 *
 * A status is untrusted input (status.c says how it is shown).
 */
#ifndef NBDSTRIPE_DAEMON_STATUS_H
#define NBDSTRIPE_DAEMON_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"
#include "nbdstripe.h"

/* The exit status of `nbdstripe status`: the monitoring plugins'. */
enum verdict { V_OK = 0, V_DEGRADED = 1, V_FAILED = 2, V_UNKNOWN = 3 };

/* A status, read and judged.  state is the verdict (ok, degraded,
 * failed; not-running, stale or unknown when nothing can be said of the
 * volume) and reason why (a member not ok, the surest reason the status
 * cannot be trusted; "" when ok); v its exit status.  Every reason is
 * also printed on stderr, one line each, when print is set (status;
 * list and stop judge quietly).
 */
struct view {
  bool print;
  char *buf; /* the file's text */
  size_t len;
  struct json_object *st; /* NULL: not a JSON object */
  bool format_ok;         /* of STATUS_FORMAT */
  bool live, alive;
  bool from_socket; /* the control socket's live answer */
  enum seen_state state;
  char reason[1024];
  enum verdict v;
};

/* status_read.c */
extern struct json_object *field (struct json_object *o, const char *key,
                                  enum json_type type);
extern bool text_is (struct json_object *o, const char *key, const char *s);
extern bool is_null (struct json_object *o, const char *key);
extern bool get_uint (struct json_object *o, const char *key, uint64_t *out);
extern bool get_number (struct json_object *o, const char *key, double *out);
extern int read_file (const char *path, char **out, size_t *outlen, char *why,
                      size_t whylen);
extern struct json_object *parse_status (const char *buf, size_t len,
                                         char *why, size_t whylen);

/* status_fmt.c: each returns buf, or a constant ("?", "-"). */
extern const char *get_text (struct json_object *o, const char *key, char *buf,
                             size_t len);
extern const char *fmt_uint (struct json_object *o, const char *key, char *buf,
                             size_t len);
extern const char *fmt_count (struct json_object *o, const char *key,
                              char *buf, size_t len);
extern const char *fmt_bytes (struct json_object *o, const char *key,
                              char *buf, size_t len);
extern const char *fmt_latency (struct json_object *o, const char *key,
                                char *buf, size_t len);
extern const char *fmt_duration (double s, char *buf, size_t len);
extern const char *fmt_ago (struct json_object *o, const char *key, double now,
                            char *buf, size_t len);

/* status_judge.c: judge reads the file, judge_live asks the control
 * socket ctl (false, nothing said, when it does not answer).
 */
extern void judge (const char *file, const char *name, unsigned interval,
                   double now, bool print, struct view *w);
extern bool judge_live (const char *ctl, const char *name, unsigned interval,
                        double now, bool print, struct view *w);
extern void view_free (struct view *w);
extern enum verdict seen_verdict (enum seen_state s);

/* status_table.c, status_drives.c */
extern void print_volume (const struct view *w,
                          const struct stripe_config *cfg, double now,
                          const char *ctl);
extern void print_members (struct json_object *st);
extern void print_spares (struct json_object *st);
extern void print_last_errors (struct json_object *st, double now);
extern void print_drives (struct json_object *st);

#endif /* NBDSTRIPE_DAEMON_STATUS_H */
