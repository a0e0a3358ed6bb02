/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the command.  Sub-commands, one file each; cli.c the
 * grammar they share.
 */
#ifndef NBDSTRIPE_DAEMON_H
#define NBDSTRIPE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "config.h"

/* One sub-command: what `nbdstripe --help` and `nbdstripe NAME --help`
 * print of it (cli.c), and the function that runs it, given argv from
 * the command's name on.
 */
struct command {
  const char *name;
  int (*run) (const struct command *cmd, int argc, char **argv);
  const char *synopsis; /* options, then operands; "\n" + 8 spaces wraps */
  const char *summary;  /* one line for nbdstripe --help */
  const char *help;     /* what it does and its options, for NAME --help */
  int usage_status;     /* exit status of a usage error: 2 (status: 3) */
};

/* The table, ended by a NULL name. */
extern const struct command commands[];
extern const struct command *command_named (const char *name);

extern int cmd_create (const struct command *, int argc, char **argv);
extern int cmd_serve (const struct command *, int argc, char **argv);
extern int cmd_check (const struct command *, int argc, char **argv);
extern int cmd_inspect (const struct command *, int argc, char **argv);
extern int cmd_status (const struct command *, int argc, char **argv);
extern int cmd_accept (const struct command *, int argc, char **argv);
extern int cmd_import (const struct command *, int argc, char **argv);
extern int cmd_list (const struct command *, int argc, char **argv);
extern int cmd_stop (const struct command *, int argc, char **argv);
extern int cmd_replace (const struct command *, int argc, char **argv);
extern int cmd_grow (const struct command *, int argc, char **argv);
extern int cmd_shrink (const struct command *, int argc, char **argv);
extern int cmd_scrub (const struct command *, int argc, char **argv);
extern int cmd_lost_files (const struct command *, int argc, char **argv);

/* nbdstripe --help. */
extern void usage (FILE *fp);
/* The commands' names and where to read more, for a bare `nbdstripe`. */
extern void short_usage (FILE *fp);

/* NAME --help on fp; returns status. */
extern int cli_help (const struct command *cmd, FILE *fp, int status);

/* A usage error: the reason (printf-style; NULL when getopt has said
 * it) and the synopsis on stderr.  Returns the command's usage_status.
 */
extern int cli_usage_error (const struct command *cmd, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* The options every command takes, and getopt's '?' and ':': 'h' prints
 * the help (0), 'V' the version (0), anything else is a usage error.
 * Returns the exit status.
 */
#define CLI_COMMON_OPTIONS                                                    \
  { "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' }
extern int cli_option (const struct command *cmd, int opt);

/* After getopt: between min and max operands (max -1: no limit), what
 * naming them for the error.  Returns 0, or the usage error's status.
 */
extern int cli_operands (const struct command *cmd, int argc, char **argv,
                         int min, int max, const char *what);

/* The config directory ($NBDSTRIPE_CONFDIR, else /etc/nbdstripe) and the
 * runtime directory list and stop look in ($NBDSTRIPE_RUNDIR, else
 * /run/nbdstripe).
 */
extern const char *conf_dir (void);
extern const char *run_dir (void);

/* A VOLUME operand is a path when it holds a '/' or ends in ".conf";
 * otherwise a name, CONFDIR/NAME.conf.  volume_config_path returns the
 * config's path (malloc'd; NULL when out of memory).
 */
extern bool volume_is_path (const char *arg);
extern char *volume_config_path (const char *arg);
/* cfg's volume as a command's operand: its name when that leads to
 * cfg, else its config's path.
 */
extern const char *volume_operand (const struct stripe_config *cfg);

/* Load the config VOLUME names -- a path, CONFDIR/NAME.conf, else the
 * config of the volume served here under that name (served.c) --
 * printing the one-line error on failure (also copied into err when err
 * is not NULL).  Returns 0/-1; cfg needs
 * config_free either way.
 */
extern int load_volume (const char *arg, struct stripe_config *cfg, char *err,
                        size_t errlen);

/* Print o (indented, one newline) on stdout and drop it.  0/-1. */
extern int print_json (struct json_object *o);

/* The config's warnings (config.h), one line each on stderr: check and
 * serve print them.
 */
extern void print_config_warnings (const struct stripe_config *cfg);

/* Check that the volume described by cfg can be served: headers agree
 * with the config (metadata "header"), the members open, none is
 * another's alias, and they are big enough.  Nothing is written.  With
 * claim, members are also locked for the check (shared), so that one in
 * use by a server is refused, naming it.  Prints every problem; returns
 * 0/-1.  On success fills in the volume's size and UUID text ("" without
 * header).  degraded: members that cannot be opened or read are left
 * out (serve --degraded, assemble_degraded).
 */
extern int check_volume (const struct stripe_config *cfg, bool claim,
                         bool degraded, uint64_t *size, char uuid[37]);

/* The mkfs.ext4 and mkfs.xfs stripe options for this geometry
 * ("-b 4096 -E stride=32,stripe_width=128", "-d su=128k,sw=4").
 */
extern void mkfs_geometry (uint64_t chunk, unsigned nr_members, char *ext4,
                           size_t ext4len, char *xfs, size_t xfslen);

/* The same as two indented lines on stdout (check and status print them). */
extern void print_mkfs_geometry (uint64_t chunk, unsigned nr_members);

/* What libblkid (or our own magic, in first: the member's first 4 KiB)
 * recognises on a member, worded into what, or NULL.  A remote member is
 * probed through a copy (its probe_fd); one that cannot be copied is
 * reported as such, since nothing can be said of it.
 */
struct member;
extern const char *recognise_member (struct member *m, const uint8_t *first,
                                     char *what, size_t len);

/* "128KiB", "1.5GiB": human-readable size, rounded. */
extern const char *human_size (uint64_t bytes, char *buf, size_t len);

/* "128KiB", "1536KiB", "4097": exact, in the config's syntax. */
extern const char *exact_size (uint64_t bytes, char *buf, size_t len);

/* What a served volume's status says (status_judge.c): the verdict of
 * status (its exit status 0, 1, 2, then 3 for the last three) and list.
 * Named by seen_state_name, as status --json and list print them.
 */
enum seen_state {
  SEEN_OK,
  SEEN_DEGRADED,    /* a member slow, full or failing */
  SEEN_FAILED,      /* a member failed */
  SEEN_NOT_RUNNING, /* no file, "running": false, or its pid is gone */
  SEEN_STALE,       /* its pid alive, but not updated for 3 intervals */
  SEEN_UNKNOWN,     /* invalid, another volume's, ... */
};
struct seen {
  enum seen_state state;
  char reason[1024]; /* why not ok; "" when ok */
  long pid;          /* the server's, 0 when the file names none */
  char *name;        /* volume.name in the file, or NULL (malloc'd) */
  char *config;      /* volume.config in the file, or NULL (malloc'd) */
};
extern const char *seen_state_name (enum seen_state s);

/* Read and judge status_file quietly.  name (may be NULL) is the volume
 * it must be the status of; interval the config's (0: the default).
 * Free with seen_free.
 */
extern void status_seen (const char *status_file, const char *name,
                         unsigned interval, struct seen *out);
extern void seen_free (struct seen *s);

/* A volume configured or served on this host (served.c). */
struct served {
  char *name;        /* the config's, else the status file's, else the
                        file name's */
  char *config;      /* absolute, or NULL (an ad hoc server) */
  char *status_file; /* or NULL */
  char *pidfile;     /* or NULL */
  char *listen;      /* socket path or ADDRESS:PORT, or NULL */
  bool configured;   /* found in the config directory */
  bool loaded;       /* its config loads */
  struct seen seen;  /* what its status file says */
  long pid;          /* its server, verified; 0: none */
};

/* Every volume in the config directory, then every one served that is
 * not among them.  Returns 0, or -1 when a directory could not be read
 * (said on stderr; *out holds what was found).  Free with served_free.
 */
extern int served_list (struct served **out, size_t *n);
extern void served_free (struct served *v, size_t n);

/* Where the server of cfg writes its pid (malloc'd, NULL without
 * memory): the config's serve.pidfile, else beside its status file
 * (NAME.pid for NAME.status.json, as the control socket is NAME.ctl).
 * serve always has nbdkit write it and returns only once it names the
 * server; stop and list look there first.
 */
extern char *volume_pidfile (const struct stripe_config *cfg);

/* Whether pid's command line has config=CONFIG (an absolute path). */
extern bool pid_serves (long pid, const char *config);

/* The live process serving config, from the pidfile (may be NULL) or
 * the status file's pid (0: none): only a pid whose command line serves
 * config.  0 when there is none, with why naming a pid that was refused
 * ("" when none was).
 */
extern long server_pid (const char *config, const char *pidfile,
                        long status_pid, char *why, size_t whylen);

/* One request to a served volume's control socket (control.h, at path),
 * its answer (a JSON object).  NULL (errno, and why: one line naming the
 * path) when nothing answers there within timeout_ms (0: no limit), the
 * answer is not JSON, or the socket is not to be trusted: it must be a
 * socket owned by root (or by us) and usable by its owner only, and the
 * process answering must be root's (or ours) -- never a socket another
 * user planted while the server was down.
 */
extern struct json_object *control_ask (const char *path,
                                        struct json_object *req,
                                        int timeout_ms, char *why,
                                        size_t whylen);

/* A replace object (a status's "replace", replace.h) in one line for
 * people: "member 1 -> /dev/sdc: copying, 37% (1.2GiB of 3.2GiB),
 * 410MiB/s, ETA 5 s" (status_progress.c).
 */
extern const char *replace_progress (struct json_object *r, char *buf,
                                     size_t len);

/* A scrub object (a status's "scrub", scrub.h) in one line for people:
 * "running, 37% (1.2GiB of 3.2GiB), 410MiB/s, ETA 5 s, 2 unreadable
 * ranges" (status_progress.c).
 */
extern const char *scrub_progress (struct json_object *s, char *buf,
                                   size_t len);

/* Untrusted text (n bytes) made safe for a terminal (status_fmt.c). */
extern const char *safe_text (const char *s, size_t n, char *out, size_t len);

#endif /* NBDSTRIPE_DAEMON_H */
