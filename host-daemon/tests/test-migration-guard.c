/*
 * migration-guard's decisions, as tables: what a MIGRATION event means for
 * a VM with poisoned pages, and which reads of a page are the migration's
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "migration-guard.h"

#define REFUSE VMCE_MIGRATION_REFUSE
#define ZERO VMCE_MIGRATION_ALLOW_ZERO

typedef struct {
  const gchar *was, *status;
  gboolean incoming;
  VmceMigrationPolicy policy;
  guint poisoned, zeroed;
  VmceMigrationAction want;
} Row;

static const Row rows[] = {
  /* it starts */
  { NULL, "setup", FALSE, REFUSE, 1, 0, VMCE_MIGRATION_ACT_REFUSE },
  { "completed", "setup", FALSE, REFUSE, 2, 0, VMCE_MIGRATION_ACT_REFUSE },
  { "none", "active", FALSE, REFUSE, 1, 0, VMCE_MIGRATION_ACT_REFUSE },
  { NULL, "setup", FALSE, ZERO, 1, 0, VMCE_MIGRATION_ACT_ALLOW },
  { NULL, "setup", FALSE, REFUSE, 0, 0, VMCE_MIGRATION_ACT_NONE },
  /* it goes on */
  { "setup", "active", FALSE, REFUSE, 1, 0, VMCE_MIGRATION_ACT_NONE },
  { "active", "device", FALSE, ZERO, 1, 1, VMCE_MIGRATION_ACT_NONE },
  { "active", "cancelling", FALSE, REFUSE, 1, 1, VMCE_MIGRATION_ACT_NONE },
  /* it ends */
  { "active", "completed", FALSE, ZERO, 1, 1, VMCE_MIGRATION_ACT_HAND_OVER },
  { "device", "completed", FALSE, ZERO, 1, 0, VMCE_MIGRATION_ACT_NONE },
  { "cancelling", "cancelled", FALSE, REFUSE, 1, 1, VMCE_MIGRATION_ACT_TAKE_BACK },
  { "active", "failed", FALSE, ZERO, 3, 2, VMCE_MIGRATION_ACT_TAKE_BACK },
  { "cancelling", "cancelled", FALSE, REFUSE, 1, 0, VMCE_MIGRATION_ACT_NONE },
  /* a second end event changes nothing */
  { "completed", "completed", FALSE, ZERO, 1, 1, VMCE_MIGRATION_ACT_NONE },
  /* a destination's own events */
  { NULL, "setup", TRUE, REFUSE, 1, 0, VMCE_MIGRATION_ACT_NONE },
  { "active", "completed", TRUE, ZERO, 0, 0, VMCE_MIGRATION_ACT_LOADED },
  { "active", "failed", TRUE, ZERO, 0, 0, VMCE_MIGRATION_ACT_NONE },
};

static void
test_migration_decide (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    const Row *r = &rows[i];
    VmceMigrationAction got = vmce_migration_decide (r->was, r->status, r->incoming, r->policy,
                                                     r->poisoned, r->zeroed);
    if (got != r->want)
      g_error ("row %u (%s -> %s): got %d, want %d", i, r->was, r->status, got, r->want);
  }
}

static void
test_migration_takes_read (void)
{
  /* status, incoming, vcpu, poisoned -> the migration's */
  g_assert_true (vmce_migration_takes_read ("active", FALSE, FALSE, TRUE));
  g_assert_true (vmce_migration_takes_read ("setup", FALSE, FALSE, TRUE));
  g_assert_false (vmce_migration_takes_read ("active", FALSE, TRUE, TRUE));   /* the guest's own */
  g_assert_false (vmce_migration_takes_read ("active", FALSE, FALSE, FALSE)); /* a fresh error */
  g_assert_false (vmce_migration_takes_read ("active", TRUE, FALSE, TRUE));   /* a destination */
  g_assert_false (vmce_migration_takes_read ("completed", FALSE, FALSE, TRUE));
  g_assert_false (vmce_migration_takes_read (NULL, FALSE, FALSE, TRUE));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/migration-guard/decide", test_migration_decide);
  g_test_add_func ("/migration-guard/takes-read", test_migration_takes_read);
  return g_test_run ();
}
