/*
 * What an Arm64 guest's kernel log says of an error told through GHES:
 * the lines are as Debian 12's arm64 6.1 prints them (drivers/acpi/apei/
 * ghes.c and cper.c, mm/memory-failure.c), taken from e2e-arm64's guests.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "guest-answer.h"

static const gchar *const handled[] = {
  "random: crng init done",
  "[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
  "[Hardware Error]: event severity: recoverable",
  "[Hardware Error]:  Error 0, type: recoverable",
  "[Hardware Error]:   section_type: memory error",
  "[Hardware Error]:   physical_address: 0x000000004a1c3000",
  "[Hardware Error]:   physical_address_mask: 0xfffffffffffff000",
  "Memory failure: 0x4a1c3: Sending SIGBUS to vmce-victim:214 due to hardware memory corruption",
  "Memory failure: 0x4a1c3: recovery action for dirty LRU page: Recovered",
};

static void
test_guest_answer_handled (void)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

  g_assert_cmpint (vmce_guest_answer_judge (handled, G_N_ELEMENTS (handled), 0x4a1c3000, kept), ==,
                   VMCE_GUEST_ANSWER_HANDLED);
  /* the record's address and memory_failure()'s lines, not the rest */
  g_assert_cmpuint (kept->len, ==, 3);
  g_assert_cmpstr (g_ptr_array_index (kept, 0), ==, handled[5]);
  g_assert_cmpstr (g_ptr_array_index (kept, 2), ==, handled[8]);
  g_assert_cmpstr (vmce_guest_answer_kind_to_string (VMCE_GUEST_ANSWER_HANDLED), ==, "handled");
}

static void
test_guest_answer_other_page (void)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

  /* a neighbour's lines are not this error's (0x4a1c3 is not 0x4a1c) */
  g_assert_cmpint (vmce_guest_answer_judge (handled, G_N_ELEMENTS (handled), 0x4a1c000, kept), ==,
                   VMCE_GUEST_ANSWER_SILENT);
  g_assert_cmpint (vmce_guest_answer_judge (handled, G_N_ELEMENTS (handled), 0x4a1c4000, kept), ==,
                   VMCE_GUEST_ANSWER_SILENT);
  g_assert_cmpuint (kept->len, ==, 0);
  /* an address within the page is the page */
  g_assert_cmpint (vmce_guest_answer_judge (handled, G_N_ELEMENTS (handled), 0x4a1c3a48, NULL), ==,
                   VMCE_GUEST_ANSWER_HANDLED);
}

static void
test_guest_answer_rejected (void)
{
  static const gchar *const lines[] = {
    "[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
    "[Hardware Error]:   physical_address: 0x000000005e000000",
    "[Firmware Warn]: GHES: Invalid address in generic error data: 0x5e000000",
  };
  static const gchar *const unreadable[] = {
    "[Firmware Warn]: GHES: Failed to read error status block!",
  };
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

  g_assert_cmpint (vmce_guest_answer_judge (lines, G_N_ELEMENTS (lines), 0x5e000000, kept), ==,
                   VMCE_GUEST_ANSWER_REJECTED);
  g_assert_cmpuint (kept->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (kept, 1), ==, lines[2]);
  g_assert_cmpint (vmce_guest_answer_judge (lines, G_N_ELEMENTS (lines), 0x5f000000, NULL), ==,
                   VMCE_GUEST_ANSWER_SILENT);
  g_assert_cmpint (vmce_guest_answer_judge (unreadable, 1, 0x5f000000, NULL), ==, VMCE_GUEST_ANSWER_REJECTED);
  /* 7.3: memory_failure() refuses it, not GHES */
  static const gchar *const outside[] = { "Memory failure: 0x5e000: memory outside kernel control" };
  g_assert_cmpint (vmce_guest_answer_judge (outside, 1, 0x5e000000, NULL), ==, VMCE_GUEST_ANSWER_REJECTED);
  g_assert_cmpstr (vmce_guest_answer_kind_to_string (VMCE_GUEST_ANSWER_REJECTED), ==, "rejected");
}

static void
test_guest_answer_kept_bounded (void)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) many = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < 40; i++)
    g_ptr_array_add (many, g_strdup_printf ("Memory failure: 0x4a1c3: line %u", i));
  g_assert_cmpint (vmce_guest_answer_judge ((const gchar *const *) many->pdata, many->len, 0x4a1c3000, kept),
                   ==, VMCE_GUEST_ANSWER_HANDLED);
  g_assert_cmpuint (kept->len, ==, VMCE_GUEST_ANSWER_MAX_LINES);
  g_assert_cmpint (vmce_guest_answer_judge (NULL, 0, 0x4a1c3000, kept), ==, VMCE_GUEST_ANSWER_SILENT);
  g_assert_cmpstr (vmce_guest_answer_kind_to_string (VMCE_GUEST_ANSWER_SILENT), ==, "silent");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/guest-answer/handled", test_guest_answer_handled);
  g_test_add_func ("/guest-answer/other-page", test_guest_answer_other_page);
  g_test_add_func ("/guest-answer/rejected", test_guest_answer_rejected);
  g_test_add_func ("/guest-answer/kept-bounded", test_guest_answer_kept_bounded);
  return g_test_run ();
}
