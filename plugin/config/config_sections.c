/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the serve, health and remote sections of a config, and
 * the integers in a range that they hold.
 */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "config_impl.h"
#include "member.h"

#define NBD_MAX_EXPORT_NAME 4096 /* the NBD protocol's limit */
#define SOCKET_PATH_MAX (sizeof ((struct sockaddr_un *) 0)->sun_path - 1)

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
  { "health.slow_floor_us", FIELD (health.set.slow_floor_us), 0,
    HEALTH_MAX_SLOW_FLOOR_US, "a number of microseconds (0: no floor)" },
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

int
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
  { "slow_floor_us", set_number },
  { "error_threshold", set_number },
  { "window", set_number },
  { "min_samples", set_number },
  { "io_timeout", set_number },
  { "probe_interval", set_number },
  { "on_change_timeout", set_number },
  { "drive_interval", set_number },
  { NULL, NULL },
};

int
loader_set_serve (struct loader *ld, const config_setting_t *s)
{
  return loader_walk_group (ld, s, serve_keys);
}

int
loader_set_health (struct loader *ld, const config_setting_t *s)
{
  return loader_walk_group (ld, s, health_keys);
}
