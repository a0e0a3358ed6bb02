/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the operations a member is asked to do, one enum for the
 * executor, the members' backends and health.
 *
 * The first OP_NR_TRACKED are what health counts and times, in the order
 * of the status file's "ops"; extents (block status) are not tracked.
 */
#ifndef NBDSTRIPE_OP_H
#define NBDSTRIPE_OP_H

#include <stdbool.h>

enum op_kind {
  OP_READ,
  OP_WRITE,
  OP_TRIM,
  OP_ZERO,
  OP_FLUSH,
  OP_EXTENTS,
};

#define OP_NR_TRACKED 5 /* read, write, trim, zero, flush */

/* "read", "write", "trim", "zero", "flush", "block status". */
static inline const char *
op_name (enum op_kind op)
{
  switch (op) {
  case OP_READ: return "read";
  case OP_WRITE: return "write";
  case OP_TRIM: return "trim";
  case OP_ZERO: return "zero";
  case OP_FLUSH: return "flush";
  case OP_EXTENTS: return "block status";
  }
  return "?";
}

/* Whether op changes what the member holds (write, trim, zero): what a
 * job moving data must apply to both copies.
 */
static inline bool
op_changes_data (enum op_kind op)
{
  return op == OP_WRITE || op == OP_TRIM || op == OP_ZERO;
}

#endif /* NBDSTRIPE_OP_H */
