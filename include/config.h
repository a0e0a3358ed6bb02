/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume config file (libconfig) -> a validated config.
 *
 * One file describes one volume.  Every error names the file and line
 * (where libconfig gives one) and what was expected; an unknown key is an
 * error.  No I/O beyond reading the file (members are not opened here).
 *
 * Example (conf/example.conf is the commented reference):
 *
 *   name = "fast0";
 *   chunk = "128K";                      # or an integer number of bytes
 *   members = [ "/dev/nvme0n1", "/dev/nvme1n1" ];
 *   metadata = "header";                 # or "md" (Linux md v1.2), "none"
 *   data_offset = "1M";                  # default: 1M; "none": 0
 *   layout = "alternate";                # md raid0's "original" or
 *                                        # "alternate" (members of mixed
 *                                        # sizes only)
 *   uuid = "...";                        # the array UUID the members
 *                                        # must carry (optional)
 *   cache = "writeback";                 # writethrough | direct
 *   spares = [ "/dev/nvme2n1" ];         # hot spares, held while served
 *   on_failing = "alert";                # or "replace": onto a spare
 *   serve = {
 *     socket = "/run/nbdstripe/fast0.sock";   # or: address + port
 *     # address = "127.0.0.1"; port = 10809;   (TCP: tls must be given)
 *     export_name = "";                  # set: clients must ask for it
 *     threads = 16;
 *     pidfile = "/run/nbdstripe/fast0.pid";
 *     tls = "off";                       # off | on | require
 *     # tls_certificates = "/etc/pki/nbdkit"; tls_psk = "/etc/nbdstripe/psk";
 *     # tls_verify_peer = false;
 *   };
 *   health = {                           # see include/health.h
 *     status_file = "/run/nbdstripe/fast0.status.json";
 *     interval = 5;                      # seconds
 *     slow_factor = 4.0; slow_floor_us = 1000;
 *     error_threshold = 8;
 *     window = 10; min_samples = 20; io_timeout = 30; probe_interval = 2;
 *     on_change_timeout = 10;
 *     # prometheus_file = "..."; on_change = "/path/to/program";
 *   };
 *   remote = { connections = 4; };      # members that are NBD URIs
 */
#ifndef NBDSTRIPE_CONFIG_H
#define NBDSTRIPE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "health.h"
#include "layout.h"
#include "cache_mode.h"

/* What a member becoming failing sets off (on_failing): an alert only
 * (the event, the log line, the status), or also a replace onto a spare
 * (the array's spare policy, array.h).
 */
enum on_failing { ON_FAILING_ALERT, ON_FAILING_REPLACE };

#define CONFIG_MAX_WARNINGS 4

enum metadata_mode { METADATA_HEADER, METADATA_NONE, METADATA_MD };
enum tls_mode { TLS_OFF, TLS_ON, TLS_REQUIRE };

struct stripe_config {
  char *path; /* the config file itself */
  char *name; /* 1..63 chars of [A-Za-z0-9._-] */
  uint64_t chunk;
  unsigned nr_members;
  char *members[LAYOUT_MAX_MEMBERS];
  /* A reshape under way (nbdstripe grow, shrink): the last nr_joining
   * members are the config's joining list (being added); with
   * has_leaving, member leaving is being removed.  The members' headers
   * number them all, in this order.
   */
  unsigned nr_joining;
  bool has_leaving;
  unsigned leaving;
  /* Devices once members, removed (nbdstripe shrink, a replace onto a
   * spare): never served.
   */
  unsigned nr_removed;
  char *removed[LAYOUT_MAX_MEMBERS];
  /* Hot spares: devices (paths or NBD URIs) held -- opened and claimed --
   * while the volume is served, none of them a member, a joining or a
   * removed one; what on_failing = "replace" moves a failing member to.
   */
  unsigned nr_spares;
  char *spares[LAYOUT_MAX_MEMBERS];
  enum on_failing on_failing; /* default ON_FAILING_ALERT */
  enum metadata_mode metadata;
  uint64_t data_offset; /* "none": 0 unless given */
  bool data_offset_given; /* in the file (not the default) */
  uint32_t layout;        /* LAYOUT_MD_*: default LAYOUT_MD_ALT */
  bool layout_given;
  uint8_t uuid[16]; /* the array UUID, when uuid_given */
  bool uuid_given;
  enum cache_mode cache;
  struct {
    char *socket;      /* Unix socket, or NULL when TCP */
    char *address;     /* TCP: default "127.0.0.1" */
    int port;          /* TCP: 1..65535, 0 when Unix */
    char *export_name; /* default "" */
    unsigned threads;  /* default 16 */
    char *pidfile;     /* may be NULL */
    enum tls_mode tls;
    char *tls_certificates; /* directory, must exist when set */
    char *tls_psk;          /* file, must exist when set */
    bool tls_verify_peer;
  } serve;
  struct {
    char *status_file;          /* default /run/nbdstripe/NAME.status.json */
    char *prometheus_file;      /* may be NULL */
    char *on_change;            /* may be NULL */
    struct health_settings set; /* health_defaults () unless given */
  } health;
  struct {
    unsigned connections; /* per NBD member at most, default 4 (1..16) */
  } remote;
  /* What loads but must be heard, "FILE:LINE: KEY: ..." lines (TCP with
   * tls = "off", a TLS key others can read): check and serve print them.
   */
  unsigned nr_warnings;
  char *warnings[CONFIG_MAX_WARNINGS];
};

/* The run directory: $NBDSTRIPE_RUNDIR when set (the tests give each run
 * its own), else /run/nbdstripe.  A config's default socket and status
 * file are there, servers register there (plugin/registry.c), and
 * nbdstripe list and stop look there.
 */
extern const char *config_run_dir (void);

/* Load and validate.  On error returns -1 and writes one line into err:
 * "FILE:LINE: what is wrong (what was expected)" -- or "FILE: ..." when
 * there is no line.  cfg needs config_free in both cases.
 */
extern int config_load (const char *path, struct stripe_config *cfg, char *err,
                        size_t errlen);
extern void config_free (struct stripe_config *cfg);
/* The name of the volume the config file path describes, in name;
 * false when it cannot be loaded (member.h's member_config_namer).
 */
extern bool config_volume_name (const char *path, char *name, size_t len);
/* The same, of text (NUL-terminated) rather than the file's; path only
 * names it in messages (and becomes cfg->path).
 */
extern int config_load_text (const char *path, const char *text,
                             struct stripe_config *cfg, char *err,
                             size_t errlen);

/* Parse a size into bytes: "4096" or "4096B", "8s" (512-byte sectors),
 * "128K" or "128KiB", M/MiB, G/GiB, T/TiB, P/PiB, E/EiB (1024-based,
 * either case).  The one syntax of the config and of the plugin's
 * chunk=.  Returns -1 on a malformed or overflowing size.
 */
extern int config_parse_size (const char *s, uint64_t *out);

/* Make member index of the config file at path new_member instead of old
 * (nbdstripe replace): only that element of the top-level members list
 * changes -- comments, other settings and layout stay byte for byte --
 * and it must be old.  The file is replaced atomically: a new file in
 * its directory (unnamed until it is complete: O_TMPFILE, where the file
 * system has it), with the file's owner, group and mode, synced, renamed
 * over it, the directory synced (a failed sync is an error: the rename
 * may not last).  A symlinked config stays a symlink; the file it points
 * to is rewritten.  -1 with why when it cannot be (the file is then as it
 * was, unless the directory sync failed).  With a grow or shrink under way
 * (joining or leaving set: a member replaced while it is stopped), the
 * member may be a joining or the leaving one: the members, joining and
 * leaving settings are rewritten as config_rewrite_members does, index
 * naming new_member wherever it was named.
 */
extern int config_replace_member (const char *path, unsigned index,
                                  const char *old, const char *new_member,
                                  char *why, size_t len);

/* Member index of the config file at path becomes spare (one of its
 * spares), in one atomic rewrite as config_replace_member does it:
 * members[index] is old and becomes spare, spare leaves the spares list,
 * old is added to the removed list (created after the members setting
 * when there is none).  Comments and every other setting stay; the
 * result is loaded and checked before it replaces the file.  -1 with why
 * (the file is then as it was).
 */
extern int config_replace_with_spare (const char *path, unsigned index,
                                      const char *old, const char *spare,
                                      char *why, size_t len);

/* What a grow or a shrink writes in the config: the members (the
 * volume's, without the joining ones), the joining ones (being added),
 * the one leaving (NULL: none), the removed ones.
 */
struct config_members {
  unsigned nr_members;
  char *const *members;
  unsigned nr_joining;
  char *const *joining;
  const char *leaving;
  unsigned nr_removed;
  char *const *removed;
};

/* Rewrite the members, joining, leaving and removed settings of the
 * config file at path as m says, atomically as config_replace_member
 * does: every other setting, comment and line stays; the result is loaded
 * and checked before it replaces the file.  -1 with why.
 */
extern int config_rewrite_members (const char *path,
                                   const struct config_members *m, char *why,
                                   size_t len);
/* What config_rewrite_members would do, short of writing the file: the
 * rewritten text loaded and checked.  0, or -1 with why (the reason the
 * rewrite would fail), so that a caller can check before it writes
 * anything else.
 */
extern int config_check_members (const char *path,
                                 const struct config_members *m, char *why,
                                 size_t len);

/* "header", "none" or "md", as the config's metadata key: -1 for another
 * name.
 */
extern int config_metadata_parse (const char *name, enum metadata_mode *mode);

/* Parse an array UUID, "01234567-89ab-cdef-0123-456789abcdef" or mdadm's
 * "01234567:89abcdef:01234567:89abcdef" (hex digits either case); -1 when
 * it is neither.
 */
extern int config_parse_uuid (const char *s, uint8_t uuid[16]);

#endif /* NBDSTRIPE_CONFIG_H */
