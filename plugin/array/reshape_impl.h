/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what reshape.c (the start and the end) and reshape_io.c
 * (clients, the copy, checkpoints and the journal) share.
 */
#ifndef NBDSTRIPE_RESHAPE_IMPL_H
#define NBDSTRIPE_RESHAPE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"
#include "meta.h"
#include "mover.h"
#include "plan.h"
#include "reshape.h"
#include "restripe.h"
#include "volume.h"

extern const char *const reshape_kind_names[];

struct reshape {
  struct mover mv; /* first */
  enum reshape_kind kind;
  struct layout from, to;
  uint8_t from_map[LAYOUT_MAX_MEMBERS], to_map[LAYOUT_MAX_MEMBERS];
  struct volume_view old_view, new_view;
  struct restripe rs;
  unsigned nr_union;
  bool has_leaving;
  unsigned leaving;
  uint64_t journal_cap;        /* bytes the journal holds */
  struct meta_reshape rec;     /* what the headers say (copier's) */
  struct io_plan rplan, wplan; /* the copy's reads and writes in flight */
  bool rplan_set, wplan_set;
  char *config;
  unsigned nr_joining;         /* the last members of the union */
  unsigned checkpoints, journaled;
  /* The reshape is on the members' records (its first record written,
   * or it was resumed from them): until then no window is written.
   */
  bool on_record;
  /* A journaled window from its journal's record on to its own (the
   * copier's; read by requests once the move has stopped): the window's
   * old places may be overwritten, its bytes are the journal's.  If the
   * move stops there, requests over it fail with EIO until it goes on
   * (reshape_continue, or served again: the journal replayed).
   */
  bool fenced;
  uint64_t fence_pos, fence_len;
  uint32_t fence_crc;
};

static inline struct reshape *
reshape_of_mover (struct mover *mv)
{
  return (struct reshape *) mv;
}

static inline struct reshape *
reshape_of_vm (struct volume_mover *vm)
{
  return (struct reshape *) vm;
}

/* reshape_io.c: the job's hooks. */
extern int reshape_request (struct volume_mover *vm, struct volume *v,
                            const struct volume_request *rq);
extern int reshape_run_ops (struct mover *mv, struct volume *v,
                            struct member_op *ops, unsigned nr,
                            volume_run_fn plain);
extern unsigned reshape_read_ops (struct mover *mv, uint8_t *buf,
                                  uint64_t pos, uint64_t len,
                                  struct member_op *ops, struct iovec *iov);
extern unsigned reshape_write_ops (struct mover *mv, uint8_t *buf,
                                   uint64_t pos, uint64_t len,
                                   struct member_op *ops, struct iovec *iov);
extern uint64_t reshape_window_size (struct mover *mv, uint64_t pos,
                                     bool *exclusive);
extern int reshape_before_write (struct mover *mv, const uint8_t *buf,
                                 uint64_t pos, uint64_t len);
extern int reshape_after_write (struct mover *mv, uint64_t pos, uint64_t len);
extern bool reshape_logical (struct mover *mv, uint64_t pos,
                             uint64_t *logical);
extern void reshape_write_failed (struct mover *mv,
                                  const struct member_op *op);
extern const char *reshape_unreadable (struct mover *mv, char *why,
                                       size_t len);
extern bool reshape_locate (struct volume_mover *vm, struct volume *v,
                            unsigned i, uint64_t rel, uint64_t *logical);

/* Every member of the union synced; the reshape's state on each of them,
 * durably (the data first); positions below pos recorded as moved and no
 * request using an old place below it; the journal's bytes read or
 * written; the bytes the journal holds.  -1: the move failed (said).
 */
extern int reshape_sync_all (struct reshape *rs);
extern int reshape_record (struct reshape *rs);
extern int reshape_checkpoint (struct reshape *rs, uint64_t pos);
extern uint64_t reshape_used (struct mover *mv, uint64_t pos, uint64_t end,
                              bool *used);
extern uint64_t reshape_buf_at (struct mover *mv, uint64_t pos, uint64_t w,
                                uint64_t at, uint64_t len);
extern unsigned reshape_zero_ops (struct mover *mv, uint64_t pos,
                                  uint64_t len, struct member_op *ops);
/* Where the journal starts on every member: after the metadata area and
 * the allocation map (alloc.h).
 */
extern uint64_t reshape_journal_start (const struct volume *v);
extern int reshape_journal_io (struct reshape *rs, enum op_kind kind,
                               uint8_t *buf, uint64_t len);
extern uint64_t reshape_journal_room (const struct volume *v,
                                      unsigned nr_union);

/* reshape.c: the job's start (its mover, at position, at rate) and its
 * free, which reshape_start.c needs too.
 */
extern int reshape_go (struct reshape *rs, struct volume *v, uint64_t position,
                       uint64_t rate, char *why, size_t len);
extern void reshape_free (struct mover *mv);
/* The table's kind (jobs.h) of a restripe of kind. */
extern enum job_kind reshape_job_kind (enum reshape_kind kind);

#endif /* NBDSTRIPE_RESHAPE_IMPL_H */
