/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: members in memory.  See member_mem.h; the model is
 * the local backend, plugin/member/member_local.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "ioexec.h"
#include "log.h"
#include "member.h"
#include "member_mem.h"
#include "util.h"

/* No real block device has this number: the devices' st_dev. */
#define MEM_DEV_MAJOR 4094u
#define MEM_DEV_MINOR 4094u

struct injection {
  int op; /* enum mem_op or MEM_ANY_OP */
  uint64_t offset, length;
  int err;
  unsigned count; /* 0: for ever */
};

struct dev {
  unsigned id; /* its "inode" */
  uint8_t *data;
  uint64_t size;
  unsigned opens;    /* members open on it */
  bool claimed_excl; /* claimed by a writer */
  unsigned claimed_shared;
  struct mem_record *rec;
  size_t nr_rec, cap_rec;
  struct injection *inj;
  size_t nr_inj;
};

struct name {
  char *name;
  struct dev *dev;
};

/* A member's backend state. */
struct mem {
  struct dev *dev;
  enum { CLAIM_NONE, CLAIM_EXCL, CLAIM_SHARED } claim;
};

#define M(m) ((struct mem *) (m)->be)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct name *names;
static size_t nr_names;
static struct dev **devs; /* every device, to free them */
static size_t nr_devs;
static unsigned next_id = 1;

static void __attribute__ ((noreturn, format (printf, 1, 2)))
die (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  fprintf (stderr, "member_mem: ");
  vfprintf (stderr, fmt, ap);
  fprintf (stderr, "\n");
  va_end (ap);
  abort ();
}

static void *
xrealloc (void *p, size_t n)
{
  p = realloc (p, n ? n : 1);
  if (p == NULL)
    die ("out of memory");
  return p;
}

/* Called with lock held. */
static struct dev *
find (const char *name)
{
  for (size_t i = 0; i < nr_names; ++i)
    if (strcmp (names[i].name, name) == 0)
      return names[i].dev;
  return NULL;
}

static struct dev *
find_or_die (const char *name)
{
  struct dev *d = find (name);

  if (d == NULL)
    die ("no device named %s", name);
  return d;
}

static void
add_name (const char *name, struct dev *d)
{
  if (find (name))
    die ("%s: name in use", name);
  names = xrealloc (names, (nr_names + 1) * sizeof *names);
  names[nr_names].name = strdup (name);
  if (names[nr_names].name == NULL)
    die ("out of memory");
  names[nr_names++].dev = d;
}

void
mem_create (const char *name, uint64_t size)
{
  struct dev *d = calloc (1, sizeof *d);

  if (d == NULL || (d->data = calloc (1, size ? size : 1)) == NULL)
    die ("%s: cannot allocate %" PRIu64 " bytes", name, size);
  pthread_mutex_lock (&lock);
  d->id = next_id++;
  d->size = size;
  add_name (name, d);
  devs = xrealloc (devs, (nr_devs + 1) * sizeof *devs);
  devs[nr_devs++] = d;
  pthread_mutex_unlock (&lock);
}

void
mem_alias (const char *alias, const char *existing)
{
  pthread_mutex_lock (&lock);
  add_name (alias, find_or_die (existing));
  pthread_mutex_unlock (&lock);
}

void
mem_rebind (const char *name, const char *existing)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (existing);
  find_or_die (name);
  for (size_t i = 0; i < nr_names; ++i)
    if (strcmp (names[i].name, name) == 0)
      names[i].dev = d;
  pthread_mutex_unlock (&lock);
}

void
mem_resize (const char *name, uint64_t size)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  d->data = xrealloc (d->data, size);
  if (size > d->size)
    memset (d->data + d->size, 0, size - d->size);
  d->size = size;
  pthread_mutex_unlock (&lock);
}

void
mem_destroy_all (void)
{
  pthread_mutex_lock (&lock);
  for (size_t i = 0; i < nr_names; ++i)
    free (names[i].name);
  free (names);
  names = NULL;
  nr_names = 0;
  /* A device still open (a test that failed before closing its volume)
   * is left alone rather than freed under the member.
   */
  for (size_t i = 0; i < nr_devs; ++i)
    if (devs[i]->opens == 0) {
      free (devs[i]->data);
      free (devs[i]->rec);
      free (devs[i]->inj);
      free (devs[i]);
    }
  free (devs);
  devs = NULL;
  nr_devs = 0;
  pthread_mutex_unlock (&lock);
}

uint8_t *
mem_data (const char *name, uint64_t *size)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  pthread_mutex_unlock (&lock);
  if (size)
    *size = d->size;
  return d->data;
}

uint64_t
mem_size (const char *name)
{
  uint64_t size;

  mem_data (name, &size);
  return size;
}

static struct dev *
range_or_die (const char *name, uint64_t offset, uint64_t len)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  pthread_mutex_unlock (&lock);
  if (offset > d->size || len > d->size - offset)
    die ("%s: bytes %" PRIu64 "+%" PRIu64 " beyond its %" PRIu64, name, offset,
         len, d->size);
  return d;
}

void
mem_write (const char *name, uint64_t offset, const void *buf, size_t len)
{
  memcpy (range_or_die (name, offset, len)->data + offset, buf, len);
}

void
mem_read (const char *name, uint64_t offset, void *buf, size_t len)
{
  memcpy (buf, range_or_die (name, offset, len)->data + offset, len);
}

void
mem_fill (const char *name, uint64_t offset, uint64_t len, uint8_t byte)
{
  memset (range_or_die (name, offset, len)->data + offset, byte, len);
}

void
mem_corrupt (const char *name, uint64_t offset)
{
  range_or_die (name, offset, 1)->data[offset] ^= 0xff;
}

void
mem_inject (const char *name, int op, uint64_t offset, uint64_t length,
            int err, unsigned count)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  d->inj = xrealloc (d->inj, (d->nr_inj + 1) * sizeof *d->inj);
  d->inj[d->nr_inj++] = (struct injection){ op, offset, length, err, count };
  pthread_mutex_unlock (&lock);
}

void
mem_heal (const char *name)
{
  pthread_mutex_lock (&lock);
  find_or_die (name)->nr_inj = 0;
  pthread_mutex_unlock (&lock);
}

const struct mem_record *
mem_records (const char *name, size_t *nr)
{
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  *nr = d->nr_rec;
  pthread_mutex_unlock (&lock);
  return d->rec;
}

unsigned
mem_count (const char *name, enum mem_op op)
{
  unsigned n = 0;
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find_or_die (name);
  for (size_t i = 0; i < d->nr_rec; ++i)
    if (d->rec[i].op == op)
      n++;
  pthread_mutex_unlock (&lock);
  return n;
}

void
mem_clear_records (const char *name)
{
  pthread_mutex_lock (&lock);
  if (name)
    find_or_die (name)->nr_rec = 0;
  else
    for (size_t i = 0; i < nr_devs; ++i)
      devs[i]->nr_rec = 0;
  pthread_mutex_unlock (&lock);
}

const char *
mem_op_name (enum mem_op op)
{
  static const char *const n[] = {
    "read",  "write",  "trim", "zero",    "flush", "extents",
    "pread", "pwrite", "sync", "discard", "open",  "claim",
  };
  return op < MEM_NR_OPS ? n[op] : "?";
}

/* Record an operation and say whether it is to fail (0 or the errno
 * injected).  length 0 with offset 0: an operation without a range.
 */
static int
account (struct dev *d, struct mem_record r, bool ranged)
{
  pthread_mutex_lock (&lock);
  for (size_t k = d->nr_inj; k-- > 0;) {
    struct injection *j = &d->inj[k];
    bool match = (j->op == MEM_ANY_OP || j->op == (int) r.op)
                 && (!ranged || j->length == 0
                     || (r.offset < j->offset + j->length
                         && j->offset < r.offset + r.length));
    if (!match)
      continue;
    r.err = j->err;
    if (j->count > 0 && --j->count == 0) {
      memmove (j, j + 1, (d->nr_inj - k - 1) * sizeof *j);
      d->nr_inj--;
    }
    break;
  }
  if (d->nr_rec == d->cap_rec) {
    d->cap_rec = d->cap_rec ? 2 * d->cap_rec : 64;
    d->rec = xrealloc (d->rec, d->cap_rec * sizeof *d->rec);
  }
  d->rec[d->nr_rec++] = r;
  pthread_mutex_unlock (&lock);
  return r.err;
}

static void
record_err (struct dev *d, int err)
{
  pthread_mutex_lock (&lock);
  d->rec[d->nr_rec - 1].err = err;
  pthread_mutex_unlock (&lock);
}

static int fail (char *why, size_t len, int err, const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

static int
fail (char *why, size_t len, int err, const char *fmt, ...)
{
  va_list ap;

  if (why && len) {
    va_start (ap, fmt);
    vsnprintf (why, len, fmt, ap);
    va_end (ap);
  }
  errno = err;
  return -1;
}

/* The backend. */

static int
mem_open (struct member *m, char *why, size_t len)
{
  const char *name = m->path + strlen (MEM_PREFIX);
  struct mem *s;
  struct dev *d;
  int err;

  pthread_mutex_lock (&lock);
  d = find (name);
  pthread_mutex_unlock (&lock);
  if (d == NULL)
    return fail (why, len, ENOENT, "no in-memory device named %s", name);
  err = account (d, (struct mem_record){ .op = MEM_OPEN }, false);
  if (err)
    return fail (why, len, err, "open: %s", strerror (err));
  s = calloc (1, sizeof *s);
  if (s == NULL)
    return fail (why, len, ENOMEM, "out of memory");
  s->dev = d;
  pthread_mutex_lock (&lock);
  d->opens++;
  pthread_mutex_unlock (&lock);
  m->be = s;
  m->kind = MEMBER_FILE;
  m->size = d->size;
  m->min_io = 1;
  m->logical_block = 512;
  m->physical_block = 4096;
  memset (&m->id, 0, sizeof m->id);
  m->id.kind = ID_FILE;
  m->id.st_dev = makedev (MEM_DEV_MAJOR, MEM_DEV_MINOR);
  m->id.st_ino = d->id;
  m->id.extent.base = EXTENT_FILE;
  m->id.extent.dev = m->id.st_dev;
  m->id.extent.ino = d->id;
  m->id.extent.start = 0;
  m->id.extent.end = d->size;
  return 0;
}

static void
mem_close (struct member *m)
{
  struct mem *s = M (m);

  pthread_mutex_lock (&lock);
  if (s->claim == CLAIM_EXCL)
    s->dev->claimed_excl = false;
  else if (s->claim == CLAIM_SHARED)
    s->dev->claimed_shared--;
  s->dev->opens--;
  pthread_mutex_unlock (&lock);
  free (s);
  m->be = NULL;
}

static int
mem_claim (struct member *m, char *why, size_t len)
{
  struct mem *s = M (m);
  struct dev *d = s->dev;
  bool busy;
  int err;

  err = account (d, (struct mem_record){ .op = MEM_CLAIM }, false);
  if (err)
    return fail (why, len, err, "claim: %s", strerror (err));
  pthread_mutex_lock (&lock);
  busy = d->claimed_excl || (!m->readonly && d->claimed_shared > 0);
  if (!busy && m->readonly) {
    d->claimed_shared++;
    s->claim = CLAIM_SHARED;
  }
  else if (!busy) {
    d->claimed_excl = true;
    s->claim = CLAIM_EXCL;
  }
  pthread_mutex_unlock (&lock);
  if (busy)
    return fail (why, len, EBUSY,
                 "in use: claimed by another opener of "
                 "in-memory device %u",
                 d->id);
  return 0;
}

static int
mem_current_size (struct member *m, uint64_t *size)
{
  pthread_mutex_lock (&lock);
  *size = M (m)->dev->size;
  pthread_mutex_unlock (&lock);
  return 0;
}

static ssize_t
mem_pread (struct member *m, void *buf, size_t count, uint64_t offset,
           bool fresh, char *why, size_t len)
{
  struct dev *d = M (m)->dev;
  int err;

  (void) fresh;
  err = account (
    d,
    (struct mem_record){ .op = MEM_PREAD, .offset = offset, .length = count },
    true);
  if (err)
    return fail (why, len, err, "read: %s", strerror (err));
  if (offset >= d->size)
    return 0;
  if (count > d->size - offset)
    count = d->size - offset;
  memcpy (buf, d->data + offset, count);
  return count;
}

static int
mem_pwrite (struct member *m, const void *buf, size_t count, uint64_t offset,
            char *why, size_t len)
{
  struct dev *d = M (m)->dev;
  int err;

  err = account (
    d,
    (struct mem_record){ .op = MEM_PWRITE, .offset = offset, .length = count },
    true);
  if (err == 0 && (offset > d->size || count > d->size - offset))
    record_err (d, err = ENOSPC);
  if (err)
    return fail (why, len, err, "write: %s", strerror (err));
  memcpy (d->data + offset, buf, count);
  return 0;
}

static int
mem_sync (struct member *m, char *why, size_t len)
{
  int err = account (M (m)->dev, (struct mem_record){ .op = MEM_SYNC }, false);

  if (err)
    return fail (why, len, err, "fdatasync: %s", strerror (err));
  return 0;
}

static int
mem_discard (struct member *m, uint64_t offset, uint64_t length, char *why,
             size_t len)
{
  struct dev *d = M (m)->dev;
  int err;

  err = account (d,
                 (struct mem_record){
                   .op = MEM_DISCARD, .offset = offset, .length = length },
                 true);
  if (err == 0 && (offset > d->size || length > d->size - offset))
    record_err (d, err = EINVAL);
  if (err)
    return fail (why, len, err, "discard: %s", strerror (err));
  memset (d->data + offset, 0, length);
  return 0;
}

static int
mem_probe_fd (struct member *m, char *why, size_t len)
{
  (void) m;
  return fail (why, len, EOPNOTSUPP, "an in-memory device has no descriptor");
}

/* One executor operation, done at once: 0 or an errno, logged naming the
 * member as the local backend does.
 */
static int
do_op (struct member *m, struct member_op *op)
{
  struct dev *d = M (m)->dev;
  struct mem_record r = {
    .op = (enum mem_op) op->kind,
    .offset = op->offset,
    .length = op->kind == OP_FLUSH ? 0 : op->length,
    .fua = op->kind == OP_WRITE && op->fua,
    .may_trim = op->kind == OP_ZERO && op->may_trim,
    .fast = op->kind == OP_ZERO && op->fast,
  };
  bool beyond = op->offset > d->size || op->length > d->size - op->offset;
  int err;

  if ((op->kind == OP_READ || op->kind == OP_WRITE)
      && iov_total (op->iov, op->nr_iov) != op->length)
    die ("%s: %s of %" PRIu64 " bytes with an iovec of %zu", m->path,
         op_name (op->kind), op->length, iov_total (op->iov, op->nr_iov));
  err = account (d, r, op->kind != OP_FLUSH);

  if (err == 0 && beyond && op->kind != OP_FLUSH) {
    err = op->kind == OP_WRITE ? ENOSPC : op->kind == OP_READ ? EIO : EINVAL;
    record_err (d, err);
  }
  if (err) {
    member_io_error (m,
                     op->kind == OP_READ    ? "pread"
                     : op->kind == OP_WRITE ? "pwrite"
                                            : op_name (op->kind),
                     op->offset, err);
    return err;
  }
  switch (op->kind) {
  case OP_READ: iov_scatter (op->iov, op->nr_iov, d->data + op->offset); break;
  case OP_WRITE: iov_gather (d->data + op->offset, op->iov, op->nr_iov); break;
  case OP_TRIM:
    if (!m->readonly) /* as the local backend: nothing, read-only */
      memset (d->data + op->offset, 0, op->length);
    break;
  case OP_ZERO: memset (d->data + op->offset, 0, op->length); break;
  case OP_FLUSH: break;
  case OP_EXTENTS:
    /* All data: an in-memory device has no holes. */
    if (extent_list_add (op->extents, op->length, 0) == -1)
      return errno;
    break;
  }
  return 0;
}

static void
mem_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  int err = do_op (m, op);

  if (err)
    ioexec_done (x, op, err);
}

static bool
mem_rw_now (struct member *m, struct member_op *op)
{
  op->err = do_op (m, op);
  return true;
}

static bool
mem_zero_known_unsupported (const struct member *m, uint64_t offset,
                            uint64_t len, bool may_trim, bool fast)
{
  (void) m;
  (void) offset;
  (void) len;
  (void) may_trim;
  (void) fast;
  return false;
}

static bool
mem_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                     bool may_trim)
{
  (void) m;
  (void) offset;
  (void) len;
  (void) may_trim;
  return true;
}

static bool
mem_can_fast_zero (const struct member *m)
{
  (void) m;
  return true;
}

static void
mem_learn_zero (struct member *m, uint64_t offset, uint64_t len)
{
  (void) m;
  (void) offset;
  (void) len;
}

/* Still there under its name, the same device, big enough? */
static int
mem_check (struct member *m, char *why, size_t len)
{
  const char *name = m->path + strlen (MEM_PREFIX);
  struct dev *d;

  pthread_mutex_lock (&lock);
  d = find (name);
  pthread_mutex_unlock (&lock);
  if (d == NULL)
    return fail (why, len, ENODEV, "device gone: %s", m->path);
  if (d != M (m)->dev)
    return fail (why, len, ENODEV,
                 "device gone: %s now names another "
                 "device (replaced?)",
                 m->path);
  if (d->size < m->need)
    return fail (why, len, ENODEV,
                 "device gone: %s truncated to %" PRIu64
                 " bytes, the volume needs %" PRIu64,
                 m->path, d->size, m->need);
  return 0;
}

/* Take over fresh's device when it is another one (fresh is closed
 * after: it gets ours back).
 */
static void
mem_adopt (struct member *m, struct member *fresh)
{
  void *be;

  if (identity_same (&m->id, &fresh->id))
    return;
  be = m->be;
  m->be = fresh->be;
  fresh->be = be;
  m->id = fresh->id;
}

static const struct member_ops member_mem_ops = {
  .open = mem_open,
  .close = mem_close,
  .claim = mem_claim,
  .current_size = mem_current_size,
  .pread = mem_pread,
  .pwrite = mem_pwrite,
  .sync = mem_sync,
  .discard = mem_discard,
  .probe_fd = mem_probe_fd,
  .async = false,
  .start_op = mem_start_op,
  .rw_now = mem_rw_now,
  .zero_known_unsupported = mem_zero_known_unsupported,
  .fast_zero_known = mem_fast_zero_known,
  .can_fast_zero = mem_can_fast_zero,
  .learn_zero = mem_learn_zero,
  .check = mem_check,
  .adopt = mem_adopt,
};

void
mem_register (void)
{
  if (member_register_backend (MEM_PREFIX, &member_mem_ops) == -1)
    die ("member_register_backend: %s", strerror (errno));
}
