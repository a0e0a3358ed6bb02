/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: a RAID-0 volume over N files or block devices.
 *
 * Thin glue: parameters and nbdkit callbacks in, volume calls out.  The
 * striping itself lives in layout.c / plan.c / volume.c / ioexec.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "array.h"
#include "assemble.h"
#include "cmdline.h"
#include "config.h"
#include "control.h"
#include "drive.h"
#include "health.h"
#include "ioexec.h"
#include "layout.h"
#include "log.h"
#include "meta.h"
#include "log_nbdkit.h"
#include "notify.h"
#include "registry.h"
#include "mover.h"
#include "replace.h"
#include "reshape.h"
#include "scrub.h"
#include "volume.h"

/* -D stripe.io_uring=0 forces the portable I/O path (for tests). */
NBDKIT_DLL_PUBLIC int stripe_debug_io_uring = 1;
/* For tests of nbdstripe replace (replace.h): -D stripe.replace_hold_ms=N
 * keeps each window of the copy N ms between reading the old member and
 * writing the new one; -D stripe.replace_crash=N kills the server at step
 * N of the end (1: NEW's metadata written, 2: the config rewritten).
 */
NBDKIT_DLL_PUBLIC int stripe_debug_replace_hold_ms = 0;
NBDKIT_DLL_PUBLIC int stripe_debug_replace_crash = 0;
/* -D stripe.replace_gate=1 holds the copier at each phase boundary until
 * the control socket's "step" lets it go on (replace.h).
 */
NBDKIT_DLL_PUBLIC int stripe_debug_replace_gate = 0;
/* -D stripe.meta_log=1 logs each header write with its number, and
 * -D stripe.meta_crash=N kills the server right after the Nth (meta.h):
 * the crash tests of the metadata updates.
 */
NBDKIT_DLL_PUBLIC int stripe_debug_meta_log = 0;
NBDKIT_DLL_PUBLIC int stripe_debug_meta_crash = 0;

static const char *paths[LAYOUT_MAX_MEMBERS];
static unsigned nr_paths;
static bool too_many_paths;
static uint64_t chunk = LAYOUT_DEFAULT_CHUNK;
static enum cache_mode cache = CACHE_WRITEBACK;
static bool adhoc_given;        /* file=, chunk= or cache= seen */
static const char *config_file; /* config=FILE */
static const char *status_file; /* status=FILE (ad hoc) */
static bool degraded;           /* degraded=1: without missing members */
static unsigned connections = MEMBER_CONNECTIONS_DEFAULT; /* connections= */
static unsigned io_timeout = HEALTH_DEFAULT_IO_TIMEOUT;   /* timeout= */
static struct stripe_config cfg;
/* The served array (array.h); its volume is what every request uses. */
static struct array array;
static struct volume *const volume = &array.volume;
static struct control *control;   /* the control socket (control.h) */
static bool array_opened;

static void
stripe_load (void)
{
  log_nbdkit_init ();
  notify_init ();
  member_set_config_namer (config_volume_name);
}

/* The volume's name in log lines: the config's, else "stripe" (as the
 * status file says).
 */
static const char *
volume_name (void)
{
  return config_file ? cfg.name : "stripe";
}

/* Set once the server is ready (.after_fork), until .cleanup. */
static bool serving;

static void
stripe_cleanup (void)
{
  if (serving) {
    notify_send ("STOPPING=1");
    stripe_info ("volume '%s': stopping", volume_name ());
    registry_remove ();
    serving = false;
  }
  /* No more requests on the control socket, then the array stops: no
   * replace onto a spare starts, the jobs stop, health writes its last
   * status (array.h).
   */
  control_stop (control);
  control = NULL;
  if (array_opened)
    array_stop (&array);
}

static void
stripe_unload (void)
{
  stripe_cleanup (); /* in case .cleanup was not called */
  if (array_opened)
    array_close (&array);
  array_opened = false;
  config_free (&cfg);
}

static int
stripe_config (const char *key, const char *value)
{
  if (strcmp (key, "config") == 0) {
    if (config_file) {
      stripe_error ("config=%s: config= may be given only once", value);
      return -1;
    }
    config_file = value;
    return 0;
  }
  /* A path reaches log lines: a newline in it could forge one. */
  if ((strcmp (key, "file") == 0 || strcmp (key, "status") == 0)
      && log_has_control (value)) {
    bool member = strcmp (key, "file") == 0;
    char q[512];

    stripe_error ("%s=%s holds a control character: %s must not (it would "
                  "reach log lines raw)",
                  key, log_quote (value, q, sizeof q),
                  member ? "a member's path or URI" : "a path");
    return -1;
  }
  if (strcmp (key, "status") == 0) {
    status_file = value;
    return 0;
  }
  if (strcmp (key, "degraded") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    degraded = r;
    return 0;
  }
  adhoc_given = true;
  if (strcmp (key, "file") == 0) {
    if (nr_paths == LAYOUT_MAX_MEMBERS) {
      too_many_paths = true;
      return 0;
    }
    paths[nr_paths++] = value; /* nbdkit keeps argv alive */
  }
  else if (strcmp (key, "chunk") == 0) {
    /* The config's syntax, not nbdkit_parse_size's: one for both. */
    uint64_t r;
    if (config_parse_size (value, &r) == -1) {
      stripe_error ("chunk=%s: expected a size such as 128K", value);
      return -1;
    }
    if (r == 0 || r % LAYOUT_CHUNK_ALIGN != 0) {
      stripe_error ("chunk=%s: %s", value, layout_strerror (LAYOUT_ERR_CHUNK));
      return -1;
    }
    chunk = r;
  }
  else if (strcmp (key, "connections") == 0) {
    if (nbdkit_parse_unsigned ("connections", value, &connections) == -1)
      return -1;
    if (connections < 1 || connections > MEMBER_CONNECTIONS_MAX) {
      stripe_error ("connections=%s: expected 1 to %d connections per "
                    "remote member",
                    value, MEMBER_CONNECTIONS_MAX);
      return -1;
    }
  }
  else if (strcmp (key, "timeout") == 0) {
    if (nbdkit_parse_unsigned ("timeout", value, &io_timeout) == -1)
      return -1;
    if (io_timeout > 3600) {
      stripe_error ("timeout=%s: expected 0 (never) to 3600 seconds", value);
      return -1;
    }
  }
  else if (strcmp (key, "cache") == 0) {
    if (cache_mode_parse (value, &cache) == -1) {
      stripe_error ("cache=%s: expected writeback, writethrough or direct "
                    "(or nbdkit's default or none)",
                    value);
      return -1;
    }
  }
  else {
    stripe_error ("unknown parameter '%s' (see nbdkit stripe --help)", key);
    return -1;
  }
  return 0;
}

static bool nbdkit_is_readonly (void);

static int
stripe_config_complete (void)
{
  if (config_file) {
    char err[1024];

    if (adhoc_given || status_file) {
      stripe_error ("config=%s: the volume comes from the config file; "
                    "do not give file=, chunk=, cache=, connections=, "
                    "timeout= or status= as well (the config's health and "
                    "remote groups say those)",
                    config_file);
      return -1;
    }
    /* Refused rather than made read-only behind the operator's back: a
     * client told the export is writable by nbdkit's command line would
     * be refused every write; with -r nbdkit and every filter know.
     */
    if (degraded && !nbdkit_is_readonly ()) {
      stripe_error ("config=%s: degraded=1 serves the volume without its "
                    "missing members, read-only: give nbdkit -r "
                    "(nbdstripe serve --degraded does)",
                    config_file);
      return -1;
    }
    if (config_load (config_file, &cfg, err, sizeof err) == -1) {
      stripe_error ("%s", err);
      return -1;
    }
    /* nbdstripe check and serve print them. */
    for (unsigned i = 0; i < cfg.nr_warnings; ++i)
      nbdkit_debug ("warning: %s", cfg.warnings[i]);
    return 0;
  }
  if (degraded) {
    stripe_error ("degraded=1 needs config=FILE: only a volume whose "
                  "headers record every member can be served without one");
    return -1;
  }
  if (nr_paths == 0) {
    stripe_error ("no members: give at least one file=PATH");
    return -1;
  }
  if (too_many_paths) {
    stripe_error ("too many file= parameters: at most %d members",
                  LAYOUT_MAX_MEMBERS);
    return -1;
  }
  return 0;
}

/* nbdkit gives a plugin no way to know whether it runs with -r, yet a
 * read-only member is fine with -r and an error without.  So read our own
 * command line as nbdkit's getopt did (cmdline.h).
 */
static bool
nbdkit_is_readonly (void)
{
  size_t len;
  char *args = cmdline_read_self (&len);
  bool ro;

  if (args == NULL)
    return false;
  ro = cmdline_readonly (args, len, getenv ("POSIXLY_CORRECT") != NULL);
  free (args);
  return ro;
}

/* The health monitor's parameters, from the config's health group (or
 * the defaults with status=FILE ad hoc).  Its threads start after the
 * fork.
 */
static void
health_params_of (struct health_params *p)
{
  *p = (struct health_params){
    .name = config_file ? cfg.name : "stripe",
    .config = config_file,
    .status_file = config_file ? cfg.health.status_file : status_file,
    .set = health_defaults (),
  };
  p->set.io_timeout = io_timeout;
  if (config_file) {
    p->prometheus_file = cfg.health.prometheus_file;
    p->on_change = cfg.health.on_change;
    p->set = cfg.health.set;
  }
}

/* Open and check every member before nbdkit forks or serves anything:
 * any problem makes nbdkit exit non-zero, and nothing has been written.
 */
static int
stripe_get_ready (void)
{
  const char *sf = config_file ? cfg.health.status_file : status_file;
  bool ro = nbdkit_is_readonly ();
  /* Served: the members are claimed (claim.h). */
  struct volume_options o = {
    .chunk = chunk,
    .cache = cache,
    .readonly = ro,
    .claim = true,
    .uring = stripe_debug_io_uring != 0,
    .connections = connections,
    .timeout = io_timeout,
  };
  if (!o.uring)
    nbdkit_debug ("io_uring switched off (-D stripe.io_uring=0)");
  mover_debug_hold_ms = stripe_debug_replace_hold_ms;
  mover_debug_crash = stripe_debug_replace_crash;
  mover_debug_gate = stripe_debug_replace_gate;
  meta_debug_log = stripe_debug_meta_log;
  meta_debug_crash = stripe_debug_meta_crash;
  struct health_params hp;
  struct array_options ao = {
    .volume = o,
    .cfg = config_file ? &cfg : NULL,
    .config_file = config_file,
    .nr_paths = nr_paths,
    .paths = paths,
    .health = &hp,
    .degraded = degraded,
  };

  health_params_of (&hp);
  array_opened = true; /* closed whatever array_open did */
  if (array_open (&array, &ao) == -1)
    return -1;
  if (array.assembly.reshape.active && volume->readonly) {
    stripe_error ("%s: a reshape is under way on the members: serve the "
                  "volume writable, so that it can go on (its data is in "
                  "two layouts until it ends)",
                  config_file);
    return -1;
  }
  /* The control socket, beside the status file (replace, live status):
   * there before the pidfile is, answering once the server runs.
   */
  if (sf) {
    char path[4096];
    control_path (sf, path, sizeof path);
    control = control_listen (path, &array);
    /* Something else planted there does not keep the volume from being
     * served: only replace and the live status are missing.
     */
    if (control == NULL && errno == EEXIST)
      stripe_error ("control socket %s: something that is not a socket is "
                    "there: serving without one (no replace, no live "
                    "status) until it is removed and the server restarted",
                    path);
    else if (control == NULL) {
      stripe_error ("control socket %s: %m", path);
      return -1;
    }
  }
  return 0;
}

/* Threads do not survive nbdkit's fork: they start here.  Then the
 * server is ready: nbdkit listens, and accepts once we return (notify.h).
 */
static int
stripe_after_fork (void)
{
  char state[256];

  if (array_start (&array) == -1)
    return -1;
  if (control && control_serve (control) == -1) {
    stripe_error ("control socket: %m");
    return -1;
  }
  serving = true;
  registry_add (volume_name (), config_file,
                config_file ? cfg.health.status_file : status_file);
  stripe_info ("volume '%s': serving %u member%s, %" PRIu64 " bytes, chunk "
               "%" PRIu64,
               volume_name (), volume->nr_members,
               volume->nr_members == 1 ? "" : "s", volume->layout.size,
               volume->layout.chunk);
  for (unsigned i = 0; i < volume->nr_members; ++i)
    if (volume->missing >> i & 1)
      stripe_warning ("volume '%s': served degraded, read-only, without "
                      "member %u (%s): reads of its chunks fail with EIO",
                      volume_name (), i, volume->members[i].path);
  snprintf (
    state, sizeof state, "READY=1\nSTATUS=serving volume '%s' (%u member%s)",
    volume_name (), volume->nr_members, volume->nr_members == 1 ? "" : "s");
  if (notify_send (state) == -1)
    stripe_warning ("cannot tell the service manager that the server is "
                    "ready: %m");
  return 0;
}

/* The export a config names (serve.export_name), or NULL: any name. */
static const char *
served_export (void)
{
  if (config_file && cfg.serve.export_name && cfg.serve.export_name[0])
    return cfg.serve.export_name;
  return NULL;
}

/* nbdkit serves whatever export name a client asks for (its -e only
 * matters to --run), so a config that names its export is enforced here:
 * that name and no other, not even the default export "" -- a client
 * that does not say which export it wants may be attaching the wrong
 * volume->  Ad hoc, without a config, every name is this volume->
 */
static void *
stripe_open (int readonly)
{
  const char *want = served_export ();

  if (want) {
    const char *name = nbdkit_export_name ();
    char qn[128], qw[128];

    if (name == NULL || strcmp (name, want) != 0) {
      stripe_error ("export %s: not served here: volume '%s' is exported as "
                    "%s only (serve.export_name in %s)",
                    log_quote (name ? name : "", qn, sizeof qn), cfg.name,
                    log_quote (want, qw, sizeof qw), config_file);
      errno = ENOENT;
      return NULL;
    }
  }
  if (!readonly && volume->readonly) {
    stripe_error ("the members were opened read-only: serve with -r");
    return NULL;
  }
  return NBDKIT_HANDLE_NOT_NEEDED;
}

/* What NBD_OPT_LIST shows: the one export a config names. */
static int
stripe_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  const char *want = served_export ();

  if (want)
    return nbdkit_add_export (exports, want, NULL);
  return nbdkit_use_default_export (exports);
}

static int64_t
stripe_get_size (void *handle)
{
  return volume->layout.size;
}

static int
stripe_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                   uint32_t *maximum)
{
  *minimum = volume->min_block;
  *preferred = volume->preferred_block;
  *maximum = 0xffffffff;
  return 0;
}

static int
stripe_can_write (void *handle)
{
  return !volume->readonly;
}

static int
stripe_can_true (void *handle)
{
  return 1;
}

/* Fast zero cannot be emulated: advertised only when every member that
 * says what it can do (NBD servers) can.  Local members learn by trying.
 */
static int
stripe_can_fast_zero (void *handle)
{
  return volume_can_fast_zero (volume);
}

static int
stripe_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/* What the client is told.  NBD has a handful of error codes and nbdkit
 * maps errno onto them; a member that is gone (ENODEV, ENOTCONN,
 * ETIMEDOUT...) is an I/O error of the volume -- and ESHUTDOWN, which
 * NBD reserves for "the server is shutting down", must not leak out.
 */
static int
io_result (int r)
{
  if (r == -1) {
    switch (errno) {
    case EIO:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EPERM:
    case EROFS:
    case EINVAL:
    case ENOMEM:
    case EOPNOTSUPP:
    case EOVERFLOW: break;
    default: errno = EIO;
    }
  }
  return r;
}

static int
stripe_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  return io_result (volume_pread (volume, buf, count, offset));
}

static int
stripe_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  return io_result (
    volume_pwrite (volume, buf, count, offset, flags & NBDKIT_FLAG_FUA));
}

static int
stripe_flush (void *handle, uint32_t flags)
{
  return io_result (volume_flush (volume));
}

static int
stripe_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return io_result (
    volume_trim (volume, count, offset, flags & NBDKIT_FLAG_FUA));
}

static int
stripe_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return io_result (
    volume_zero (volume, count, offset, flags & NBDKIT_FLAG_MAY_TRIM,
                 flags & NBDKIT_FLAG_FAST_ZERO, flags & NBDKIT_FLAG_FUA));
}

static int
add_extent (void *opaque, uint64_t offset, uint64_t length, uint32_t flags)
{
  return nbdkit_add_extent (
    opaque, offset, length,
    (flags & MEMBER_EXTENT_HOLE ? NBDKIT_EXTENT_HOLE : 0)
      | (flags & MEMBER_EXTENT_ZERO ? NBDKIT_EXTENT_ZERO : 0));
}

static int
stripe_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
                struct nbdkit_extents *extents)
{
  return io_result (volume_extents (
    volume, count, offset, flags & NBDKIT_FLAG_REQ_ONE, add_extent, extents));
}

static void
stripe_dump_plugin (void)
{
  printf ("stripe_io_uring=%s\n", ioexec_uring_available () ? "yes" : "no");
  printf ("stripe_layout=%u\n", LAYOUT_MD_ALT);
  printf ("stripe_max_members=%d\n", LAYOUT_MAX_MEMBERS);
  printf ("stripe_default_chunk=%u\n", LAYOUT_DEFAULT_CHUNK);
  /* Drive health backends built in (drive.h): nvme, ata. */
  printf ("stripe_drive_health=%s\n", drive_backends ());
}

#define stripe_config_help                                                    \
  "config=<FILE>   A volume config file (nbdstripe(8)).\n"                    \
  "degraded=1      With config= and -r: serve it without the members that\n"  \
  "                cannot be opened or read (their chunks read as EIO).\n"    \
  "Or, ad hoc:\n"                                                             \
  "file=<PATH|URI> (required, repeat) A member: file, block device or NBD\n"  \
  "                URI (nbd://HOST/EXPORT, nbd+unix:///?socket=PATH, ...).\n" \
  "                The order of file= parameters is the member order.\n"      \
  "chunk=<SIZE>    Chunk size, a multiple of 4K (default 128K): bytes, 8s,\n" \
  "                128K or 128KiB (1024-based; see nbdstripe(8), SIZES).\n"   \
  "cache=<MODE>    writeback (default), writethrough or direct (O_DIRECT);\n" \
  "                nbdkit file's default (writeback) and none (direct).\n"    \
  "status=<FILE>   Keep the health status (JSON) in FILE.\n"                  \
  "connections=<N> Connections per NBD member (multi-conn servers; def. "     \
  "4).\n"                                                                     \
  "timeout=<SECS>  A request unanswered this long fails its member (30)."

static struct nbdkit_plugin plugin = {
  .name = "stripe",
  .longname = "nbdkit RAID-0 stripe plugin",
  .version = PACKAGE_VERSION,
  .load = stripe_load,
  .unload = stripe_unload,
  .config = stripe_config,
  .config_complete = stripe_config_complete,
  .config_help = stripe_config_help,
  .magic_config_key = "file",
  .get_ready = stripe_get_ready,
  .after_fork = stripe_after_fork,
  .cleanup = stripe_cleanup,
  .dump_plugin = stripe_dump_plugin,
  .list_exports = stripe_list_exports,
  .open = stripe_open,
  .get_size = stripe_get_size,
  .block_size = stripe_block_size,
  .can_write = stripe_can_write,
  .can_flush = stripe_can_true,
  .can_fua = stripe_can_fua,
  .can_trim = stripe_can_true,
  .can_zero = stripe_can_true,
  .can_fast_zero = stripe_can_fast_zero,
  .can_extents = stripe_can_true,
  .can_multi_conn = stripe_can_true,
  .pread = stripe_pread,
  .pwrite = stripe_pwrite,
  .flush = stripe_flush,
  .trim = stripe_trim,
  .zero = stripe_zero,
  .extents = stripe_extents,
  .errno_is_preserved = 1,
};

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

NBDKIT_REGISTER_PLUGIN (plugin)
