/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: members, what every backend shares.  See include/member.h;
 * the backends are member_local.c and member_nbd.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "member.h"

extern const struct member_ops member_local_ops;
extern const struct member_ops member_nbd_ops;

/* Backends registered by tests (member_register_backend): few, set once
 * before any member is opened.
 */
#define MAX_TEST_BACKENDS 4
static struct {
  const char *prefix;
  const struct member_ops *ops;
} test_backends[MAX_TEST_BACKENDS];
static unsigned nr_test_backends;

int
member_register_backend (const char *prefix, const struct member_ops *ops)
{
  for (unsigned i = 0; i < nr_test_backends; ++i)
    if (strcmp (test_backends[i].prefix, prefix) == 0) {
      test_backends[i].ops = ops;
      return 0;
    }
  if (nr_test_backends == MAX_TEST_BACKENDS) {
    errno = ENOSPC;
    return -1;
  }
  test_backends[nr_test_backends].prefix = prefix;
  test_backends[nr_test_backends++].ops = ops;
  return 0;
}

static const struct member_ops *
backend_of (const char *name)
{
  for (unsigned i = 0; i < nr_test_backends; ++i)
    if (strncmp (name, test_backends[i].prefix,
                 strlen (test_backends[i].prefix))
        == 0)
      return test_backends[i].ops;
  return member_is_uri (name) ? &member_nbd_ops : &member_local_ops;
}

const char *
member_what (const struct member *m)
{
  switch (m->kind) {
  case MEMBER_FILE: return "file";
  case MEMBER_BLOCK: return "block device";
  case MEMBER_NBD: return "NBD export";
  }
  return "member";
}

bool
member_may_shrink (const struct member *m)
{
  return m->kind == MEMBER_FILE;
}

bool
member_cut_short (struct member *m)
{
  uint64_t size;

  return member_may_shrink (m)
         && (member_current_size (m, &size) == -1 || size < m->need);
}

bool
member_has_inode (const struct member *m)
{
  return m->kind != MEMBER_NBD;
}

bool
member_same_kind (const struct member *a, const struct member *b)
{
  return a->kind == b->kind;
}

bool
member_remote (const struct member *m)
{
  return m->kind == MEMBER_NBD;
}

void
member_io_error (const struct member *m, const char *what, uint64_t offset,
                 int err)
{
  errno = err;
  stripe_error ("member %u (%s): %s at member offset %" PRIu64 ": %m",
                m->index, m->path, what, offset);
  errno = err;
}

int
member_open (struct member *m, unsigned index, const char *name,
             const struct member_open_params *p, char *why, size_t len)
{
  memset (m, 0, sizeof *m);
  m->index = index;
  m->params = *p;
  m->readonly = p->readonly;
  m->ops = backend_of (name);
  m->path = strdup (name);
  if (m->path == NULL) {
    snprintf (why, len, "out of memory");
    errno = ENOMEM;
    return -1;
  }
  if (m->ops->open (m, why, len) == -1) {
    int err = errno;
    member_close (m);
    errno = err;
    return -1;
  }
  return 0;
}

void
member_release (struct member *m)
{
  if (m->ops && m->be)
    m->ops->close (m);
  m->be = NULL;
}

void
member_close (struct member *m)
{
  if (m->ops && m->be)
    m->ops->close (m);
  m->be = NULL;
  free (m->path);
  m->path = NULL;
}

int
extent_list_add (struct extent_list *l, uint64_t length, uint32_t flags)
{
  if (length == 0)
    return 0;
  if (l->nr > 0 && l->runs[l->nr - 1].flags == flags) {
    l->runs[l->nr - 1].length += length;
    return 0;
  }
  if (l->nr == l->cap) {
    unsigned cap = l->cap ? 2 * l->cap : 8;
    struct extent_run *r = realloc (l->runs, cap * sizeof *r);
    if (r == NULL) {
      errno = ENOMEM;
      return -1;
    }
    l->runs = r;
    l->cap = cap;
  }
  l->runs[l->nr++] = (struct extent_run){ length, flags };
  return 0;
}
