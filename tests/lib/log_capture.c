/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: the engine's log lines, captured.  See log_capture.h. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "log_capture.h"

struct line {
  int priority;
  char *text;
};

static struct line *lines;
static unsigned nr_lines, cap_lines;
static void (*saved) (int priority, const char *fmt, va_list args);
static bool capturing;

static void
capture_vline (int priority, const char *fmt, va_list args)
{
  char *s;

  if (vasprintf (&s, fmt, args) < 0)
    return;
  if (nr_lines == cap_lines) {
    unsigned cap = cap_lines ? 2 * cap_lines : 32;
    struct line *l = realloc (lines, cap * sizeof *l);
    if (l == NULL) {
      free (s);
      return;
    }
    lines = l;
    cap_lines = cap;
  }
  lines[nr_lines++] = (struct line){ priority, s };
}

void
log_capture_start (void)
{
  if (capturing)
    return;
  saved = stripe_log_vline;
  stripe_log_vline = capture_vline;
  capturing = true;
}

void
log_capture_clear (void)
{
  for (unsigned i = 0; i < nr_lines; ++i)
    free (lines[i].text);
  nr_lines = 0;
}

void
log_capture_stop (void)
{
  if (!capturing)
    return;
  stripe_log_vline = saved;
  capturing = false;
  log_capture_clear ();
  free (lines);
  lines = NULL;
  cap_lines = 0;
}

unsigned
log_captured_count (void)
{
  return nr_lines;
}

bool
log_captured (const char *needle)
{
  for (unsigned i = 0; i < nr_lines; ++i)
    if (strstr (lines[i].text, needle))
      return true;
  return false;
}

bool
log_captured_all (int max_priority, const char *first, ...)
{
  va_list ap;

  for (unsigned i = 0; i < nr_lines; ++i) {
    bool all = lines[i].priority <= max_priority;

    va_start (ap, first);
    for (const char *p = first; all && p; p = va_arg (ap, const char *))
      all = strstr (lines[i].text, p) != NULL;
    va_end (ap);
    if (all)
      return true;
  }
  return false;
}

void
log_capture_print (FILE *fp)
{
  fprintf (fp, "-- %u line(s) logged:\n", nr_lines);
  for (unsigned i = 0; i < nr_lines; ++i)
    fprintf (fp, "  %s: %s\n", log_priority_name (lines[i].priority),
             lines[i].text);
}
