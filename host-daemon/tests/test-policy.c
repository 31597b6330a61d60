/*
 * Policy names: one table, both ways, and the list error messages give.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "policy.h"

static void
test_policy_round_trip (void)
{
  for (gint i = 0; i < VMCE_POLICY_COUNT; i++) {
    VmcePolicy back = VMCE_POLICY_COUNT;

    g_assert_true (vmce_policy_from_string (vmce_policy_to_string (i), &back));
    g_assert_cmpint (back, ==, i);
  }
}

static void
test_policy_bad (void)
{
  VmcePolicy policy = VMCE_POLICY_STOP;

  g_assert_false (vmce_policy_from_string ("Forward", &policy));
  g_assert_false (vmce_policy_from_string ("", &policy));
  g_assert_false (vmce_policy_from_string (NULL, &policy));
  g_assert_cmpint (policy, ==, VMCE_POLICY_STOP);
  g_assert_cmpstr (vmce_policy_to_string (VMCE_POLICY_COUNT), ==, "unknown");
}

static void
test_policy_choices (void)
{
  g_assert_cmpstr (vmce_policy_choices (), ==, "forward, ignore-ao, pass, stop or force");
}

static void
test_migration_policy (void)
{
  VmceMigrationPolicy m = VMCE_MIGRATION_REFUSE;

  g_assert_true (vmce_migration_policy_from_string ("carry", &m));
  g_assert_cmpint (m, ==, VMCE_MIGRATION_CARRY);
  g_assert_true (vmce_migration_policy_from_string ("refuse", &m));
  g_assert_cmpint (m, ==, VMCE_MIGRATION_REFUSE);
  /* the name before part 21, in vmced.conf files written then */
  g_assert_true (vmce_migration_policy_from_string ("allow-zero", &m));
  g_assert_cmpint (m, ==, VMCE_MIGRATION_CARRY);
  g_assert_cmpstr (vmce_migration_policy_to_string (VMCE_MIGRATION_REFUSE), ==, "refuse");
  g_assert_cmpstr (vmce_migration_policy_to_string (VMCE_MIGRATION_CARRY), ==, "carry");
  g_assert_false (vmce_migration_policy_from_string ("allow", &m));
  g_assert_cmpint (m, ==, VMCE_MIGRATION_CARRY);
  g_assert_cmpstr (vmce_migration_policy_to_string (VMCE_MIGRATION_REFUSE + 1), ==, "unknown");
}

static void
test_hugepage_policy (void)
{
  VmceHugepagePolicy h = VMCE_HUGEPAGE_ONE;

  g_assert_true (vmce_hugepage_policy_from_string ("all", &h));
  g_assert_cmpint (h, ==, VMCE_HUGEPAGE_ALL);
  g_assert_cmpstr (vmce_hugepage_policy_to_string (VMCE_HUGEPAGE_ONE), ==, "one");
  g_assert_cmpstr (vmce_hugepage_policy_to_string (VMCE_HUGEPAGE_ALL), ==, "all");
  g_assert_false (vmce_hugepage_policy_from_string ("every", &h));
  g_assert_false (vmce_hugepage_policy_from_string (NULL, &h));
  g_assert_cmpint (h, ==, VMCE_HUGEPAGE_ALL);
  g_assert_cmpstr (vmce_hugepage_policy_to_string (VMCE_HUGEPAGE_SALVAGE + 1), ==, "unknown");
  g_assert_true (vmce_hugepage_policy_from_string ("salvage", &h));
  g_assert_cmpint (h, ==, VMCE_HUGEPAGE_SALVAGE);
  g_assert_cmpint (VMCE_HUGEPAGE_DEFAULT, ==, VMCE_HUGEPAGE_SALVAGE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/policy/round-trip", test_policy_round_trip);
  g_test_add_func ("/policy/bad", test_policy_bad);
  g_test_add_func ("/policy/choices", test_policy_choices);
  g_test_add_func ("/policy/migration", test_migration_policy);
  g_test_add_func ("/policy/hugepage", test_hugepage_policy);
  return g_test_run ();
}
