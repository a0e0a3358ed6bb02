/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: moving data while the volume is served -- the part every
 * move shares.  A replace (replace.h: one member's bytes to a new device)
 * and a restripe (reshape.h: the volume from one layout to another) are
 * jobs of it.
 *
 * A mover copies [start, end) of its job's coordinates (a member's
 * offsets for a replace, the volume's logical bytes for a restripe)
 * window by window, in increasing order, on a thread of its own, while
 * clients go on:
 *
 * - The job is published on the volume (volume.h, struct volume_mover):
 *   every request counted from then on sees it on its way to the members.
 *   First of all the copier waits for the requests that started before
 *   (volume_drain): they saw no job.
 * - The watermark: everything below it is copied.  What a request does
 *   below and above it is the job's (mover_enter tells it where the
 *   watermark is, with the request registered).
 * - Windows: the copier announces a window (client writes that start
 *   from then on and overlap it wait for it), then waits for the client
 *   writes over it that started before; a client write waits only for the
 *   windows announced before it started.  So no write races the copy (a
 *   client's data is never overwritten by older data), a hot region at
 *   any queue depth cannot keep the copier out, and a trim over the whole
 *   volume waits for at most the two windows of the pipeline.
 * - Unthrottled, the copy is a pipeline: window k is written while window
 *   k + 1 is read.  With a rate, one window at a time, none held while it
 *   waits.
 * - Read errors: a window is read again, then block by block; blocks that
 *   stay unreadable stop the move (or, with skip_unreadable, are written
 *   as zeros and listed as the volume's logical byte ranges).
 * - At the end the job finishes (the switch); the state says how it
 *   ended.  A test gate (mover_debug_gate) holds the copier at each
 *   phase until the control socket's "step".
 *
 * Locking: mv->lock guards the fields marked so; it is never held across
 * I/O.  Every wait on mv->cond gives up when the move stops.
 */
#ifndef NBDSTRIPE_MOVER_H
#define NBDSTRIPE_MOVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lost.h"
#include "volume.h"

struct json_object;
struct member_op;

/* The copy's window: large enough for the devices to stream; read and
 * written as MOVER_PIECES requests at once, for devices that need a queue
 * to reach their rate.
 */
#define MOVER_WINDOW (4u * 1024 * 1024)
#define MOVER_PIECES 4u
#define MOVER_PIECE (MOVER_WINDOW / MOVER_PIECES)
/* Unreadable blocks are found this finely. */
#define MOVER_BLOCK 4096u
/* Operations at most that one job's read or write of a window makes. */
#define MOVER_MAX_OPS (2 * LAYOUT_MAX_MEMBERS + 2 * MOVER_PIECES)

enum mover_state {
  MOVER_COPYING,
  MOVER_SWITCHING,
  MOVER_DONE,
  MOVER_FAILED,
  MOVER_CANCELLED,
};

extern const char *mover_state_name (enum mover_state s);

struct mover;

/* What a job is.  The ops it builds for the copy are put in flight at
 * once by the mover (ioexec_run); nr is at most MOVER_MAX_OPS.
 */
struct mover_job {
  const char *status_key; /* the status object's key: "replace", "reshape" */
  /* The volume's hook, on every request while the job is published:
   * its member operations, or (request, optional) each request whole.
   */
  int (*run_ops) (struct mover *mv, struct volume *v, struct member_op *ops,
                  unsigned nr, volume_run_fn plain);
  int (*request) (struct volume_mover *vm, struct volume *v,
                  const struct volume_request *rq);
  /* Read (from where the data is) and write (to where it goes) of
   * [pos, pos + len), from or into buf.
   */
  unsigned (*read_ops) (struct mover *mv, uint8_t *buf, uint64_t pos,
                        uint64_t len, struct member_op *ops,
                        struct iovec *iov);
  unsigned (*write_ops) (struct mover *mv, uint8_t *buf, uint64_t pos,
                         uint64_t len, struct member_op *ops,
                         struct iovec *iov);
  /* Optional (a volume with an allocation map, alloc.h): from pos on
   * (< end), how far the positions all may hold data or all are free
   * (*used says which).  A free window is never read: the mover makes
   * it read zeros where it goes instead (zero_ops), and passes its
   * hooks (before_write: a journal) a window of zeros -- what a read of
   * it returns.
   */
  uint64_t (*used) (struct mover *mv, uint64_t pos, uint64_t end,
                    bool *used);
  /* Optional, with used: where in a window's buffer (window [pos, pos +
   * w)) the bytes of positions [at, at + len) inside it are (default at
   * - pos: a restripe running backward keeps its buffer in logical
   * order).
   */
  uint64_t (*buf_at) (struct mover *mv, uint64_t pos, uint64_t w,
                      uint64_t at, uint64_t len);
  /* Optional, with used: the ops that make [pos, pos + len) read zeros
   * where it goes, without writing them where the devices can (a zero
   * that may trim).  0: some device cannot; the mover writes zeros.
   */
  unsigned (*zero_ops) (struct mover *mv, uint64_t pos, uint64_t len,
                        struct member_op *ops);
  /* Optional: the window at pos (default MOVER_WINDOW), and whether it
   * is exclusive (client reads of it wait too).
   */
  uint64_t (*window_size) (struct mover *mv, uint64_t pos, bool *exclusive);
  /* Optional: before [pos, pos + len) (its bytes in buf) is written --
   * a checkpoint, a journal -- and after, before clients may write it.
   * -1 stops the move (the job has failed it).
   */
  int (*before_write) (struct mover *mv, const uint8_t *buf, uint64_t pos,
                       uint64_t len);
  int (*after_write) (struct mover *mv, uint64_t pos, uint64_t len);
  /* Where position pos is in the volume's logical bytes (false: it is
   * not in the volume), for unreadable blocks.
   */
  bool (*logical) (struct mover *mv, uint64_t pos, uint64_t *logical);
  /* A write of the copy failed: why, in the job's words. */
  void (*write_failed) (struct mover *mv, const struct member_op *op);
  /* Unreadable blocks stop the copy: why (without skip_unreadable). */
  const char *(*unreadable) (struct mover *mv, char *why, size_t len);
  /* Everything copied: the switch.  Sets the state (DONE, FAILED,
   * CANCELLED) through mover_* before it returns.
   */
  void (*finish) (struct mover *mv);
  /* Optional: whether the job stops seeing requests once the move has
   * ended (default: yes; a restripe stopped half-way must go on serving
   * through both layouts).
   */
  bool (*withdraw) (struct mover *mv);
  /* After the move has ended (and, if withdrawn, no request reaches the
   * job any more).
   */
  void (*ended) (struct mover *mv);
  /* The job's fields of the status, after the shared ones, which it
   * may put its own way (mv->lock held).
   */
  void (*status) (struct mover *mv, struct json_object *o);
  void (*free) (struct mover *mv);
  /* Optional: how far it is, as a refusal says it (struct volume_mover's
   * describe); default: the share copied.
   */
  bool (*describe) (struct mover *mv, char *detail, size_t len);
  /* Optional: struct volume_mover's locate (default: the volume's view). */
  bool (*locate) (struct volume_mover *vm, struct volume *v, unsigned i,
                  uint64_t rel, uint64_t *logical);
};

struct mover_flight;

struct mover_window {
  uint64_t a, b;
  unsigned id;
  bool used;
  bool exclusive; /* reads wait for it too (its old bytes are overwritten) */
};

struct mover {
  struct volume_mover vm; /* what the volume sees: first */
  const struct mover_job *job;
  struct volume *v;
  uint64_t start, end; /* what to copy */
  uint64_t rate;       /* bytes per second at most, 0: as fast as it goes */
  bool skip_unreadable;
  pthread_t thread;
  bool thread_started;
  /* The copier could not be started: job->ended was called by
   * mover_start, which returns -1 (so the job's end is its caller's to
   * report, not ended's).
   */
  bool start_failed;

  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Under lock. */
  enum mover_state state;
  uint64_t watermark;          /* copied up to here */
  uint64_t skipped;            /* of which free (alloc.h): zeroed, not
                                * copied */
  uint64_t recorded;           /* durably recorded as moved up to here
                                * (a restripe's checkpoints) */
  struct mover_window win[2];  /* the pipeline: the one written, the one read */
  unsigned next_win;           /* the next window's id */
  struct mover_flight *flights;
  bool cancel;
  char error[512];
  uint64_t t_start, t_end;     /* monotonic ns */
  struct lost lost;            /* what it could not read (logical) */
  uint64_t hold_ns;            /* clients held at the switch */
  uint64_t max_wait_ns;        /* the longest a client write waited */
  unsigned nr_waiting;         /* client writes waiting for a window now */
  const char *phase;           /* the test gate: held at, reached, let past */
  unsigned phase_seq, released_seq;
};

/* A client request's part in the job's coordinates, registered from
 * mover_enter to mover_leave.
 */
struct mover_flight {
  uint64_t a, b;
  bool write;    /* write, trim or zero */
  bool waiting;  /* held by a window announced before it */
  unsigned seen; /* the windows announced before it: ids below this */
  uint64_t old_a; /* it may use the old places of positions from here
                   * (the recorded position when it went on; UINT64_MAX
                   * while it waits) */
  struct mover_flight *next;
};

/* Where the move was when a request went on (mover_enter). */
struct mover_at {
  enum mover_state state;
  uint64_t watermark;
  uint64_t recorded;
};

/* Test hooks, set from the plugin's -D flags (stripe.replace_*): hold
 * each window this many ms after it is read; kill the process (SIGKILL)
 * at step 1 (the new metadata written) or 2 (the config rewritten) of
 * the switch; hold the copier at each phase boundary (gate) until
 * mover_debug_release.  The phases, in order:
 *   published  the job is visible to requests from now on
 *   drained    the requests that started before it have ended
 *   locked     a window taken (the first; later ones as the pipeline
 *              reads ahead, or one at a time with a rate)
 *   advanced   a window written, the watermark past it
 *   copied     the copy done and flushed; clients still write both
 *   quiesced   clients held, nothing in flight
 *   metadata   the new metadata written
 *   config     the config rewritten (or the old member marked)
 *   switched   the volume is on the new devices, clients go on
 */
extern int mover_debug_hold_ms;
extern int mover_debug_crash;
extern int mover_debug_gate;

/* Set up mv (zeroed by the caller, job, v, start, end, rate and
 * skip_unreadable filled in).
 */
extern void mover_init (struct mover *mv);

/* Reserve the volume's job slot for a job of kind (set it in mv->vm.kind
 * too): -1 with why when a job runs or is being started that it may not
 * run with (jobs.h; errno EAGAIN), or the volume is read-only (EROFS).  Then
 * mover_start publishes mv and starts its copier, or mover_unreserve gives the
 * slot back.
 */
extern int mover_reserve (struct volume *v, enum job_kind kind, char *why,
                          size_t len);
extern void mover_unreserve (struct volume *v);
extern int mover_start (struct mover *mv, char *why, size_t len);

/* The volume's current or last job (NULL: never one). */
extern struct mover *mover_last (struct volume *v);

/* The request [a, b) (write: a write, trim or zero) begins: registered,
 * and held while a window announced before it overlaps it (writes; reads
 * too for an exclusive window).  Returns where the move is.
 */
extern struct mover_at mover_enter (struct mover *mv, struct mover_flight *f,
                                    uint64_t a, uint64_t b, bool write);
extern void mover_leave (struct mover *mv, struct mover_flight *f);
/* Positions below recorded are now durably in their new place: from now
 * on requests use only the new one there.  Returns once every request
 * that may still use an old place below it has ended (none of them waits
 * for the copier).
 */
extern void mover_record (struct mover *mv, uint64_t recorded);

/* Whether [a, b) is below the watermark while the copy goes on. */
extern bool mover_copied (struct mover *mv, uint64_t a, uint64_t b);

/* The state now. */
extern enum mover_state mover_state (struct mover *mv);

/* Fail the move (the first reason wins); _locked with mv->lock held. */
extern void mover_fail (struct mover *mv, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void mover_fail_locked (struct mover *mv, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* Whether the move is to stop (cancelled, failed); mv->lock held. */
extern bool mover_stopped_locked (struct mover *mv);
/* The switch: the state from COPYING to SWITCHING (false: it stopped). */
extern bool mover_switching (struct mover *mv);
extern void mover_done (struct mover *mv);

/* The test gate: hold the copier at phase name until released. */
extern void mover_phase (struct mover *mv, const char *name);

/* One synchronous operation for the copier, outside health's books. */
extern int mover_io (struct mover *mv, struct member *m, enum op_kind kind,
                     void *buf, uint64_t len, uint64_t off);

/* Record [logical, logical + len) of the volume as unreadable. */
extern void mover_add_lost (struct mover *mv, uint64_t logical, uint64_t len);

/* Ask the running job to stop (at the end of its window: nothing is
 * switched, the volume goes on as it was).  Wait for the last job to end
 * (the command's --offline): 0 when it was DONE.  The current or last
 * job's status (NULL: never one): state ("copying", "switching", "done",
 * "failed", "cancelled"), the job's fields, bytes_copied, bytes_total,
 * rate (B/s), eta_seconds, elapsed_seconds, longest_client_wait_seconds,
 * switch_hold_seconds, error, unreadable (the logical ranges).  Let the
 * copier held at a phase go on (at: the phase it must be held at, or
 * NULL for any): -1 with why when it is not held (there).
 */
extern int mover_cancel (struct volume *v, char *why, size_t len);
extern int mover_wait (struct volume *v);
extern struct json_object *mover_status (struct volume *v);
extern int mover_debug_release (struct volume *v, const char *at, char *why,
                                size_t len);

/* Stop every job of the volume and wait for their threads (the server
 * shuts down).
 */
extern void mover_stop (struct volume *v);

#endif /* NBDSTRIPE_MOVER_H */
