/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: the server registered in the run directory.  See
 * registry.h.
 */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h"
#include "json.h"
#include "log.h"
#include "registry.h"
#include "util.h"

static char path[PATH_MAX]; /* "": nothing registered */

/* An absolute path of file (as the readers compare it with a command
 * line's config=), else file itself.
 */
static struct json_object *
abs_text (const char *file)
{
  char *r;
  struct json_object *o;

  if (file == NULL)
    return NULL;
  r = realpath (file, NULL);
  o = json_text (r ? r : file);
  free (r);
  return o;
}

void
registry_add (const char *name, const char *config, const char *status_file)
{
  struct json_object *o = json_object_new_object ();
  const char *text;
  long pid = (long) getpid ();

  json_put (o, "name", json_text (name));
  json_put (o, "pid", json_object_new_int64 (pid));
  json_put (o, "config", abs_text (config));
  json_put (o, "status_file", abs_text (status_file));
  text = json_object_to_json_string_ext (o, JSON_C_TO_STRING_PLAIN);
  if (snprintf (path, sizeof path, "%s/%s.%ld.served", config_run_dir (), name,
                pid)
      >= (int) sizeof path)
    errno = ENAMETOOLONG;
  else if (write_file_atomic (path, text, strlen (text)) == 0) {
    json_object_put (o);
    return;
  }
  stripe_warning ("%s: cannot register the server (%m): nbdstripe list "
                  "finds it by its process only",
                  path);
  path[0] = '\0';
  json_object_put (o);
}

void
registry_remove (void)
{
  if (path[0] && unlink (path) == -1 && errno != ENOENT)
    stripe_warning ("%s: cannot remove: %m", path);
  path[0] = '\0';
}
