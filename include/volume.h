/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume = members + layout.
 *
 * Turns one request into per-member work (one operation per touched
 * member: reads and writes through plan.h, trim, zero and block status one
 * range per member; a flush syncs the members that hold writes, trims or
 * zeroes completed since their last sync, none when no member does --
 * dirty.h says why that covers every write completed on any connection
 * before the flush), runs it concurrently through ioexec,
 * records each member's outcome with health and gathers the result: errno
 * of the first failure goes back to the caller.  Knows members only
 * through member.h and nothing of nbdkit; the plugin translates callbacks
 * and flags into these calls.
 *
 * volume_open checks everything before the volume is usable and writes
 * nothing: members exist, are files, block devices or NBD exports, none
 * is another's alias (identity.h: the same file, a loop device over
 * another member's file, overlapping partitions, two spellings of one NBD
 * export), each is at least one chunk, the chunk is valid, the volume's
 * size fits NBD's signed 64 bits.  A served volume owns its members
 * (claim.h).
 *
 * A request the members cannot take -- not aligned to the largest of
 * their minimum I/O sizes, or beyond the end -- is the client's error:
 * EINVAL before any member is touched, and no member's health.  A request
 * touching a failed member fails at once with EIO, touching nothing.
 *
 * Identity and freshness: a member that fails is re-probed (health) and
 * adopted again only if it proves to be the same member.  Without a
 * header: the same inode or device.  With a header: the volume's array
 * UUID, the member's index and member UUID, and its generation (events):
 * when a member drops out of a writable volume that goes on being served,
 * the generation is bumped on every member still in it -- the one
 * dropping out too, through the descriptor still open, when it answers --
 * so that an older copy of a member, put in its place, is told apart and
 * refused ("older generation 41 < 42"), at re-probe and at the next
 * assembly.  A member adopted again gets the current generation.
 *
 * A write never makes a truncated member file look whole again: a write
 * that reaches a regular-file member's end (the last bytes the volume
 * needs: the only writes that can bring a cut file back to its size)
 * checks before it that the member is still as large as the volume
 * needs, and after it that its size has not changed meanwhile; other
 * writes cost no check, and a member cut short under them is found by
 * health's prober, which checks every member's size every second
 * (member_ops.check).  A member found truncated is failed (named), and a
 * write that found it fails with EIO.
 */
#ifndef NBDSTRIPE_VOLUME_H
#define NBDSTRIPE_VOLUME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache_mode.h"
#include "dirty.h"
#include "health_record.h"
#include "jobs.h"
#include "layout.h"
#include "member.h"
#include "meta.h"

struct assembly;
struct member_op;
struct json_object;
struct jobs_running;
struct volume;

/* Runs a request's member operations (the volume's own path). */
typedef int (*volume_run_fn) (struct volume *v, struct member_op *ops,
                              unsigned nr);

/* Block status runs, in order, through add (see volume_extents). */
typedef int (*volume_extent_fn) (void *opaque, uint64_t offset,
                                 uint64_t length, uint32_t flags);

/* The members seen as one layout: the layout's member j is the volume's
 * member map[j].  The volume's own (v->view), or a restripe's old and new.
 */
struct volume_view {
  const struct layout *layout;
  const uint8_t *map;
};

/* One client request, as the volume's entry points take it. */
struct volume_request {
  enum op_kind kind; /* OP_READ, _WRITE, _TRIM, _ZERO, _EXTENTS */
  void *buf;         /* read, write */
  uint64_t count, offset;
  bool fua, may_trim, fast;
  bool req_one;            /* extents */
  volume_extent_fn add;
  void *opaque;
};

/* A job moving data while the volume is served (mover.h), as the volume
 * sees it: a hook on every request while it is published, and what the
 * volume needs to report it and to shut it down.
 */
struct volume_mover {
  int (*run_ops) (struct volume_mover *vm, struct volume *v,
                  struct member_op *ops, unsigned nr, volume_run_fn plain);
  /* Optional: takes every request whole instead (checked, counted),
   * running it through volume_request_view.
   */
  int (*request) (struct volume_mover *vm, struct volume *v,
                  const struct volume_request *rq);
  bool (*ended) (struct volume_mover *vm); /* its state is final */
  void (*status) (struct volume_mover *vm, struct json_object *root);
  void (*stop) (struct volume_mover *vm);  /* ask it to stop, wait */
  void (*free) (struct volume_mover *vm);
  /* How far it is, as a refusal says it after what (jobs.h): "3 -> 4
   * members, 41% done"; true when it is paused.
   */
  bool (*describe) (struct volume_mover *vm, char *detail, size_t len);
  /* Optional: the logical byte member i's byte rel (from its data
   * offset) holds in the view a read of it takes now (the job's: a
   * restripe's old or new layout, by its position); false when no read
   * reaches it.  Without it: the volume's view.
   */
  bool (*locate) (struct volume_mover *vm, struct volume *v, unsigned i,
                  uint64_t rel, uint64_t *logical);
  enum job_kind kind;
  struct volume_mover *next;               /* the volume's jobs so far */
  char what[128];                          /* "a replace of member 1" */
  /* Ended but still published (a restripe stopped half-way): nothing
   * will let go of the slot until the volume is served again.
   */
  _Atomic bool stays;
};

/* Every request is counted from its start, before it looks at a member or
 * at v->mover, to its end (volume_drain, volume_quiesce).  Two counters and
 * an epoch: a request counts itself in the epoch's counter and checks the
 * epoch again (it changed meanwhile: it counts itself again, in the new
 * one).  A drain flips the epoch and waits for the old counter to reach
 * zero: every request that started before the flip has ended, however
 * many start after it.  Bit 1 of the epoch closes the gate: new requests
 * wait at the entry, before they touch anything.
 */
struct volume_gate {
  _Atomic unsigned epoch;       /* bit 0: the counter; bit 1: closed */
  _Atomic unsigned long count[2];
  _Atomic bool draining;        /* a drainer waits: wake it at zero */
  _Atomic unsigned waiters;     /* requests waiting for it to open */
  pthread_mutex_t lock;         /* cond: the drainer, and requests waiting
                                 * for the gate to open */
  pthread_cond_t cond;
  pthread_mutex_t drain_lock;   /* one drain (or quiesce) at a time */
  uint64_t closed_ns;           /* monotonic: when the last quiesce
                                 * closed the gate */
};

/* Everything a volume is opened with: no global settings. */
struct volume_options {
  uint64_t chunk;
  enum cache_mode cache;
  bool readonly;
  /* Own the members (serving): O_EXCL, OFD locks.  false: only look
   * (nbdstripe check).
   */
  bool claim;
  bool uring;           /* io_uring (false: the portable path) */
  bool raw;             /* members opened raw (member.h): a check, no
                         * threads, one plain connection per NBD member */
  unsigned connections; /* per NBD member at most (multi-conn) */
  unsigned timeout;     /* s: an NBD request unanswered this long is cut
                         * (health.io_timeout); 0 never */
  /* What assemble() found: layout, size rule, each member's data offset
   * and size (metadata: the members'; "none": the config's).  NULL (ad
   * hoc, file=...): md's alternate layout, data from byte 0, each
   * member's usable size its size rounded down to whole chunks.
   */
  const struct assembly *assembly;
  /* array_open: member stale_index may be behind the others'
   * generation (replace --offline --accept-stale: it dropped out while
   * served and cannot be written; the operator's word, as for `nbdstripe
   * accept`).
   */
  bool accept_stale;
  unsigned stale_index;
};

struct volume {
  struct layout layout;
  uint8_t map[LAYOUT_MAX_MEMBERS]; /* the layout's member j is members[map[j]] */
  struct volume_view view;         /* { &layout, map } */
  unsigned nr_members;
  struct member members[LAYOUT_MAX_MEMBERS];
  /* Bit i: member i is missing, the volume served degraded (read-only):
   * a stand-in failing with EIO (member_open_absent).  Every request
   * touching it fails with EIO at once, its chunks' block status is
   * data (never a hole that reads as zeros).  Set by volume_open.
   */
  uint64_t missing;
  /* Bit i: member i was removed by a shrink while served
   * (volume_remove_member): in no layout, synced, then closed with its
   * claim released.  Its index stays unused (the members keep the
   * numbers they had) until the volume is served again.  Set with
   * swap_lock held; read anywhere.
   */
  _Atomic uint64_t removed;
  bool readonly;
  bool uring;
  enum cache_mode cache;
  uint32_t min_block;       /* the largest of the members' min_io */
  uint32_t preferred_block; /* avoids read-modify-write on members */
  /* Optional.  With it, every member operation is recorded, and requests
   * touching a failed member fail at once with EIO.
   */
  struct health *health;
  /* The members' metadata: format, identity, generation (meta.h). */
  struct meta meta;
  /* How many lost ranges meta holds (lost.h), read by every request
   * after it: only when there are any does it look at them.
   */
  _Atomic unsigned lost_nr;
  /* The job moving data now (mover.h), read on every request; the jobs
   * so far (kept until close: requests may still hold one).
   */
  struct volume_mover *_Atomic mover;
  struct volume_mover *movers;
  pthread_mutex_t mover_lock;
  /* Set (under mover_lock) while a job is being started: its devices
   * opened, checked and claimed without the lock held.
   */
  bool mover_starting;
  enum job_kind mover_starting_kind;
  /* Held while a member's state changes under it: a re-probe adopting
   * it, a replace switching to the new device, a generation bump writing
   * records.  Never taken on the I/O path.
   */
  pthread_mutex_t swap_lock;
  struct volume_gate gate;
  /* Jobs that run outside the job slot (the array's scrub, array.h):
   * added to what a job starting is checked against (jobs.h).  Called
   * before mover_lock is taken.  NULL: none.
   */
  void (*other_jobs) (void *opaque, struct jobs_running *r);
  void *other_jobs_opaque;
  /* Which members hold writes not yet synced (dirty.h), by index: a
   * member switched in by a replace takes over its index's state.  An
   * array of LAYOUT_MAX_MEMBERS of its own, cache-line aligned (the
   * volume itself may be malloc'd).
   */
  struct dirty *dirty;
  /* Which regions may hold data (alloc.h); NULL: the volume has no map
   * (metadata "md" or "none", or a header without room for one), and
   * every region is taken to hold data.
   */
  struct alloc *alloc;
};

/* Without an allocation map (md, none, an old volume): what member i
 * itself says of [off, off + len) from off on -- its block status (a
 * file's holes, an NBD export's): how far it reads as zeros, or holds
 * data (*used), the run's length.  A device that cannot tell holds data
 * everywhere.
 */
extern uint64_t volume_member_holes (struct volume *v, unsigned i,
                                     uint64_t off, uint64_t len, bool *used);

/* From rel on (bytes after member i's data offset), how many of len
 * bytes hold logical bytes the allocation map says are all in use, or
 * all free (*used): the run's length.  Without a map, what the member
 * says (volume_member_holes).
 */
extern uint64_t volume_member_run (struct volume *v, unsigned i,
                                   uint64_t rel, uint64_t len, bool *used);

/* The same through the volume's own layout, not counted in the gate:
 * for a job that moves data (a replace's copier), which must not wait
 * behind a switch of its own making.
 */
extern uint64_t volume_member_run_view (struct volume *v, unsigned i,
                                        uint64_t rel, uint64_t len,
                                        bool *used);

/* The bytes of member i's data a replace copies: those in use. */
extern uint64_t volume_member_used_bytes (struct volume *v, unsigned i);

/* A writable volume whose format can keep an allocation map and which
 * has none (made before maps): one, every region in use, written on
 * every member; the next update of the records (the generation bump of
 * the serve) says so.  Call before any request.  -1: logged, and the
 * volume goes on without.
 */
extern int volume_adopt_map (struct volume *v);

/* Write the allocation map's changes out to the members (alloc.h). */
extern int volume_alloc_sync (struct volume *v);

/* Wait until every request that started before this call has ended
 * (requests that start meanwhile go on).  Not on the I/O path.
 */
extern void volume_drain (struct volume *v);
/* Hold new requests at the entry (they wait, none fails) and wait for
 * every request in flight to end: nothing touches a member until
 * volume_resume.  Then a member may change under the volume (a replace's
 * switch).  The time in between is all clients' wait: keep it short.
 */
extern void volume_quiesce (struct volume *v);
/* Let requests in again; returns how long they were held (ns). */
extern uint64_t volume_resume (struct volume *v);

/* Bump the generation on every member not failed (formats that record
 * drop-outs: meta_records_dropouts), so that
 * an older copy of any of them -- member skip's, which dropped out, or a
 * replaced one -- is told apart.  why: for the log.
 */
extern void volume_bump_generation (struct volume *v, int skip,
                                    const char *why);

/* The job slot (mover.h), for a job of kind.  reserve: -1 with why when
 * the volume is read-only (errno EROFS), or a job runs or is being
 * started that jobs.h's table says it may not run with (EAGAIN; one that
 * has ended is waited for, 10 s at most, to let go).  publish: requests
 * from now on see vm (its kind set).  withdraw: no request sees it any
 * more, and those that did have ended.
 */
extern int volume_mover_reserve (struct volume *v, enum job_kind kind,
                                 char *why, size_t len);
/* The same, taking over from over, a job that has ended but is still
 * published (a restripe stopped half-way, continued): publish puts the
 * new job in its place.
 */
extern int volume_mover_reserve_over (struct volume *v,
                                      struct volume_mover *over, char *why,
                                      size_t len);
/* The jobs under way on v (jobs.h): the job slot's (running, paused or
 * being started) and the scrub's.
 */
extern void volume_jobs (struct volume *v, struct jobs_running *r);
/* The job slot's alone (mover_lock taken). */
extern void volume_mover_jobs (struct volume *v, struct jobs_running *r);
/* Whether a job of kind may start now beside those under way (-1 with
 * why naming the one it may not run with, errno EAGAIN): a look, the
 * start path asks again where it reserves.
 */
extern int volume_job_may_start (struct volume *v, enum job_kind kind,
                                 char *why, size_t len);
extern void volume_mover_unreserve (struct volume *v);
extern void volume_mover_publish (struct volume *v, struct volume_mover *vm);
extern void volume_mover_withdraw (struct volume *v);
/* The current or last job (NULL: never one). */
extern struct volume_mover *volume_mover_last (struct volume *v);
/* Stop every job and wait for it (shutting down). */
extern void volume_mover_stop (struct volume *v);

/* A member changes under the volume: swap_lock taken (a re-probe in
 * progress is waited for first), then the volume quiesced.  end lets
 * requests in again and returns how long they were held (ns).
 */
extern void volume_switch_begin (struct volume *v);
extern uint64_t volume_switch_end (struct volume *v);
/* Between the two: member i becomes *m (its data offset and need those
 * of the member it replaces); *m gets the old one.
 */
extern void volume_switch_member (struct volume *v, unsigned i,
                                  struct member *m);
/* Between the two as well: m (opened, claimed, its data offset set)
 * becomes member nr_members, watched by health (a grow); m is emptied.
 * -1 with why.
 */
extern int volume_add_member (struct volume *v, struct member *m, char *why,
                              size_t len);
/* ... and the volume is layout l from now on, its member j members[map[j]]
 * (the end of a grow or a shrink).
 */
extern void volume_switch_layout (struct volume *v, const struct layout *l,
                                  const uint8_t *map);

/* Between the two as well, once the layout no longer has member i (the
 * end of a shrink): i is synced (with nothing in flight, so that no
 * flush ever needs it again), its dirty mark cleared, and it is marked
 * removed: nothing checks, probes or counts it from now on.  Its device
 * stays open until volume_release_member.
 */
extern void volume_remove_member (struct volume *v, unsigned i);
/* After volume_switch_end: removed member i closed, its claim released
 * (another volume, create, a grow may take the device at once), under
 * swap_lock, which health's checks hold; then health told (removed).
 */
extern void volume_release_member (struct volume *v, unsigned i);
/* Whether some member's index in this server is not its position in the
 * layout, and so in the config: after a shrink while served removed a
 * member other than the last.  Requests that name a member by its
 * index (replace) are then refused until the volume is served again.
 */
extern bool volume_renumbered (struct volume *v);

/* Whether m is (or overlaps) a member of the volume: the first such in
 * *j, how in how.  Member identities are read under swap_lock.
 */
extern bool volume_alias_of (struct volume *v, const struct member *m,
                             unsigned *j, char *how, size_t len);
/* Client requests held at the entry now (a switch). */
extern unsigned volume_clients_held (struct volume *v);

extern int volume_open (struct volume *v, unsigned nr_members,
                        const char *const *paths,
                        const struct volume_options *o);
extern void volume_close (struct volume *v);
/* Start what needs threads (NBD members' dispatchers): after nbdkit
 * forks.
 */
extern int volume_start (struct volume *v);

extern int volume_pread (struct volume *v, void *buf, uint64_t count,
                         uint64_t offset);
extern int volume_pwrite (struct volume *v, const void *buf, uint64_t count,
                          uint64_t offset, bool fua);
extern int volume_flush (struct volume *v);
extern int volume_trim (struct volume *v, uint64_t count, uint64_t offset,
                        bool fua);
extern int volume_zero (struct volume *v, uint64_t count, uint64_t offset,
                        bool may_trim, bool fast, bool fua);

/* Run request rq (checked) through view vw, none of the job's hooks:
 * for the job that moves data (a restripe), on its old or new layout.
 */
extern int volume_request_view (struct volume *v, const struct volume_view *vw,
                                const struct volume_request *rq);

/* Whether a fast zero can ever work (every member advertises it or can
 * learn it): what the plugin advertises.
 */
extern bool volume_can_fast_zero (const struct volume *v);

/* Report block status runs of [offset, offset + count) in order through
 * add (which may merge adjacent runs of the same type); stops early after
 * the first run when req_one.  flags (MEMBER_EXTENT_HOLE, _ZERO) are
 * those of the member range underneath, unchanged: a hole is zero only
 * where the member says so.  Each touched member is asked once, all at
 * once (more only when its range has more runs than were sent).
 */
extern int volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                           bool req_one, volume_extent_fn add, void *opaque);

/* For the scrub (scrub.h): member i's bytes [offset, offset + count)
 * read from the device itself, past any cache (member_pread, fresh),
 * counted in the gate as a request is (a replace's switch waits for it),
 * outside health's books.  Returns the bytes read (fewer only at the end
 * of the member), or -1 with errno and why; member i failed: -1 with
 * ENODEV, nothing read.
 */
extern ssize_t volume_member_read (struct volume *v, unsigned i, void *buf,
                                   size_t count, uint64_t offset, char *why,
                                   size_t len);

/* Member i's byte rel (from its data offset) through view vw: false
 * when vw has no member i or does not use that byte of it.
 */
extern bool volume_view_unmap (const struct volume_view *vw, unsigned i,
                               uint64_t rel, uint64_t *logical);
/* The logical byte member i's byte rel (from its data offset) holds in
 * the view a read of it takes now: the published job's (a restripe's
 * layouts by its position), or the volume's.  False when none does (a
 * member no layout has, a place a restripe has left or not reached).
 */
extern bool volume_member_logical (struct volume *v, unsigned i, uint64_t rel,
                                   uint64_t *logical);

/* Lost ranges (lost.h): logical bytes whose data is gone.  A read that
 * touches one fails with EIO, and a write, trim or write of zeroes that
 * covers one takes it off the list -- once what it wrote is durable, and
 * the list without it on every member (a generation of its own), before
 * the request completes: a crash never turns a lost range into zeros.
 *
 * volume_lost_add: [offset, offset + length) is lost from now on, in
 * memory (reads fail at once); volume_lost_record makes the list durable
 * on every member (-1 with why).  A job that leaves a range zeroed
 * somewhere a read could reach adds it before it writes there, and
 * records the list before its record points reads there.
 */
extern void volume_lost_add (struct volume *v, uint64_t offset,
                             uint64_t length);
extern int volume_lost_record (struct volume *v, const char *what, char *why,
                               size_t len);
/* The volume is size bytes from now on (a shrink's end): ranges past it
 * dropped, in memory (the shrink's final record writes the list).
 */
extern void volume_lost_truncate (struct volume *v, uint64_t size);
/* Whether member i's bytes [offset, offset + length) (member offsets,
 * the volume's layout) hold lost data.
 */
extern bool volume_lost_on_member (struct volume *v, unsigned i,
                                   uint64_t offset, uint64_t length);
/* The list: {"ranges": [{"offset", "length"}...], "bytes"}. */
extern struct json_object *volume_lost_json (struct volume *v);

/* What health's prober asks of the volume's members (health.h's
 * health_ops, which the array fills with these: array_health_ops), from
 * its thread.  check: member i is still there, the same and big enough
 * (0, or -1 and why).  probe: member i opened afresh by its name,
 * checked to be the same member at the volume's generation, its first
 * block read; *fresh is what adopt takes in its place or discard
 * closes.  dropped: member i has just failed -- the generation is
 * bumped on every member still in the volume (and on i through the
 * descriptor still open, when it answers).
 */
extern int volume_member_check (struct volume *v, unsigned i, char *why,
                                size_t len);
extern int volume_member_probe (struct volume *v, unsigned i, void **fresh,
                                char *why, size_t len);
extern void volume_member_adopt (struct volume *v, unsigned i, void *fresh);
extern void volume_member_discard (void *fresh);
extern void volume_member_dropped (struct volume *v, unsigned i);

#endif /* NBDSTRIPE_VOLUME_H */
