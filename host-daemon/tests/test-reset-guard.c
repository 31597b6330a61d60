/*
 * reset-guard's decision, as a table: what a memory-error stop on a page
 * means while a guest may be resetting
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "reset-guard.h"

typedef struct {
  const gchar *what;
  VmceResetFacts facts; /* poisoned, main thread, in ROM, pass running, monitor pending, again,
                         * found only (AO) */
  VmceResetAction want;
} Row;

static const Row rows[] = {
  { "a page vmced does not know: forwarded as usual",
    { FALSE, TRUE, TRUE, TRUE, TRUE, FALSE, FALSE }, VMCE_RESET_PASS_ON },
  { "QEMU's main thread rewriting its ROM into a known page: replace it",
    { TRUE, TRUE, TRUE, FALSE, FALSE, FALSE, FALSE }, VMCE_RESET_REPLACE_NOW },
  { "... even while a pass runs (it is what the reset needs first)",
    { TRUE, TRUE, TRUE, TRUE, TRUE, TRUE, FALSE }, VMCE_RESET_REPLACE_NOW },
  { "a vCPU in a ROM page is not QEMU reloading it: waits for the pass",
    { TRUE, FALSE, TRUE, TRUE, FALSE, FALSE, FALSE }, VMCE_RESET_WAIT },
  { "a vCPU while the pass holds the others: waits",
    { TRUE, FALSE, FALSE, TRUE, FALSE, FALSE, FALSE }, VMCE_RESET_WAIT },
  { "... also the second time round",
    { TRUE, FALSE, FALSE, TRUE, FALSE, TRUE, FALSE }, VMCE_RESET_WAIT },
  { "a vCPU with QEMU's RESET maybe unread: waits for the monitor",
    { TRUE, FALSE, FALSE, FALSE, TRUE, FALSE, FALSE }, VMCE_RESET_WAIT },
  { "... once: after that the monitor's input was not a reset",
    { TRUE, FALSE, FALSE, FALSE, TRUE, TRUE, FALSE }, VMCE_RESET_PASS_ON },
  { "a known page, nothing pending: a refault, forwarded",
    { TRUE, FALSE, FALSE, FALSE, FALSE, FALSE, FALSE }, VMCE_RESET_PASS_ON },
  { "QEMU's main thread outside any ROM (device emulation): forwarded",
    { TRUE, TRUE, FALSE, FALSE, FALSE, FALSE, FALSE }, VMCE_RESET_PASS_ON },
  { "an AO of a known page in a ROM blob on the main thread (a repeat) is no ROM write: "
    "forwarded (e2e-campaign's repeat lost its signal to a replacement here)",
    { TRUE, TRUE, TRUE, FALSE, FALSE, FALSE, TRUE }, VMCE_RESET_PASS_ON },
  { "... but waits for a pass under way, as any stop of a known page",
    { TRUE, TRUE, TRUE, TRUE, FALSE, FALSE, TRUE }, VMCE_RESET_WAIT },
};

static void
test_reset_guard_decide (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    VmceResetAction got = vmce_reset_guard_decide (&rows[i].facts);
    if (got != rows[i].want)
      g_error ("row %u (%s): got %d, want %d", i, rows[i].what, got, rows[i].want);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/reset-guard/decide", test_reset_guard_decide);
  return g_test_run ();
}
