/*
 * migration-guard's decisions, as tables: what a MIGRATION event means for
 * a VM with poisoned pages, and which reads of a page are the migration's
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "migration-guard.h"

#define REFUSE VMCE_MIGRATION_REFUSE
#define CARRY VMCE_MIGRATION_CARRY

typedef struct {
  const gchar *was, *status;
  gboolean incoming;
  VmceMigrationPolicy policy;
  guint poisoned;
  gboolean destination, handing_over;
  VmceMigrationAction want;
} Row;

static const Row rows[] = {
  /* it starts: refuse */
  { NULL, "setup", FALSE, REFUSE, 1, FALSE, FALSE, VMCE_MIGRATION_ACT_REFUSE },
  { "completed", "setup", FALSE, REFUSE, 2, TRUE, FALSE, VMCE_MIGRATION_ACT_REFUSE },
  { "none", "active", FALSE, REFUSE, 1, FALSE, FALSE, VMCE_MIGRATION_ACT_REFUSE },
  /* ... carry: to a destination vmced watches, or not at all */
  { NULL, "setup", FALSE, CARRY, 1, TRUE, FALSE, VMCE_MIGRATION_ACT_HAND_OVER },
  { NULL, "setup", FALSE, CARRY, 3, FALSE, FALSE, VMCE_MIGRATION_ACT_NO_DESTINATION },
  /* nothing poisoned yet: a destination still waits for an error that may come */
  { NULL, "setup", FALSE, CARRY, 0, TRUE, FALSE, VMCE_MIGRATION_ACT_HAND_OVER },
  { NULL, "setup", FALSE, CARRY, 0, FALSE, FALSE, VMCE_MIGRATION_ACT_NONE },
  { NULL, "setup", FALSE, REFUSE, 0, TRUE, FALSE, VMCE_MIGRATION_ACT_HAND_OVER },
  { NULL, "setup", FALSE, REFUSE, 0, FALSE, FALSE, VMCE_MIGRATION_ACT_NONE },
  /* it goes on */
  { "setup", "active", FALSE, CARRY, 1, TRUE, TRUE, VMCE_MIGRATION_ACT_NONE },
  { "active", "device", FALSE, CARRY, 1, FALSE, TRUE, VMCE_MIGRATION_ACT_NONE },
  { "active", "cancelling", FALSE, REFUSE, 1, FALSE, FALSE, VMCE_MIGRATION_ACT_NONE },
  /* it ends */
  { "device", "completed", FALSE, CARRY, 1, FALSE, TRUE, VMCE_MIGRATION_ACT_HANDED_OVER },
  { "device", "completed", FALSE, CARRY, 0, FALSE, TRUE, VMCE_MIGRATION_ACT_HANDED_OVER },
  { "active", "failed", FALSE, CARRY, 3, FALSE, TRUE, VMCE_MIGRATION_ACT_ENDED },
  { "cancelling", "cancelled", FALSE, CARRY, 1, FALSE, TRUE, VMCE_MIGRATION_ACT_ENDED },
  /* ... a refused one, or one with nothing to hand over */
  { "cancelling", "cancelled", FALSE, REFUSE, 1, FALSE, FALSE, VMCE_MIGRATION_ACT_NONE },
  { "active", "completed", FALSE, CARRY, 0, FALSE, FALSE, VMCE_MIGRATION_ACT_NONE },
  /* a second end event changes nothing */
  { "completed", "completed", FALSE, CARRY, 1, FALSE, TRUE, VMCE_MIGRATION_ACT_NONE },
  /* a destination's own events are its own */
  { NULL, "setup", TRUE, REFUSE, 1, FALSE, FALSE, VMCE_MIGRATION_ACT_INCOMING },
  { "active", "completed", TRUE, CARRY, 0, FALSE, FALSE, VMCE_MIGRATION_ACT_INCOMING },
  { "active", "failed", TRUE, CARRY, 0, FALSE, FALSE, VMCE_MIGRATION_ACT_INCOMING },
};

static void
test_migration_decide (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    const Row *r = &rows[i];
    VmceMigrationAction got = vmce_migration_decide (r->was, r->status, r->incoming, r->policy,
                                                     r->poisoned, r->destination, r->handing_over);
    if (got != r->want)
      g_error ("row %u (%s -> %s): got %d, want %d", i, r->was, r->status, got, r->want);
  }
}

static void
test_migration_takes_read (void)
{
  /* handing over, incoming, vcpu, poisoned -> the migration's */
  g_assert_true (vmce_migration_takes_read (TRUE, FALSE, FALSE, TRUE));
  g_assert_false (vmce_migration_takes_read (TRUE, FALSE, TRUE, TRUE));   /* the guest's own */
  g_assert_false (vmce_migration_takes_read (TRUE, FALSE, FALSE, FALSE)); /* a fresh error */
  g_assert_false (vmce_migration_takes_read (TRUE, TRUE, FALSE, TRUE));   /* a destination */
  g_assert_false (vmce_migration_takes_read (FALSE, FALSE, FALSE, TRUE)); /* no migration, or refused */
}

static void
test_migration_told_here (void)
{
  /* injected, written at, the guest stopped at (us) -> told on the source */
  g_assert_true (vmce_migration_told_here (TRUE, 100, 0));             /* it still runs */
  g_assert_true (vmce_migration_told_here (TRUE, 100, 1000000));       /* long before the last pass */
  g_assert_true (vmce_migration_told_here (TRUE, 950000, 1000000));    /* the vCPU had 50 ms to take it */
  g_assert_false (vmce_migration_told_here (TRUE, 950001, 1000000));   /* less: it may still be pending */
  g_assert_false (vmce_migration_told_here (TRUE, 999999, 1000000));
  g_assert_false (vmce_migration_told_here (TRUE, 1000000, 1000000));
  g_assert_false (vmce_migration_told_here (TRUE, 3000000, 1000000));  /* after it: the destination tells */
  g_assert_false (vmce_migration_told_here (FALSE, 100, 0));           /* not injected at all */
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/migration-guard/decide", test_migration_decide);
  g_test_add_func ("/migration-guard/takes-read", test_migration_takes_read);
  g_test_add_func ("/migration-guard/told-here", test_migration_told_here);
  return g_test_run ();
}
