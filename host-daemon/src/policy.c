/*
 * Policy names.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "policy.h"

/* The index of @str in @names (of @n), or -1: one lookup for every table */
static gint
vmce_name_index (const gchar *const *names, guint n, const gchar *str)
{
  for (guint i = 0; i < n; i++) {
    if (g_strcmp0 (str, names[i]) == 0)
      return (gint) i;
  }
  return -1;
}

static const gchar *const vmce_policy_names[VMCE_POLICY_COUNT] = {
  [VMCE_POLICY_FORWARD] = "forward",
  [VMCE_POLICY_IGNORE_AO] = "ignore-ao",
  [VMCE_POLICY_PASS] = "pass",
  [VMCE_POLICY_STOP] = "stop",
  [VMCE_POLICY_FORCE] = "force",
};

const gchar *
vmce_policy_to_string (VmcePolicy policy)
{
  return (guint) policy < G_N_ELEMENTS (vmce_policy_names) ? vmce_policy_names[policy] : "unknown";
}

gboolean
vmce_policy_from_string (const gchar *str, VmcePolicy *policy)
{
  gint i = vmce_name_index (vmce_policy_names, G_N_ELEMENTS (vmce_policy_names), str);

  if (i < 0)
    return FALSE;
  *policy = (VmcePolicy) i;
  return TRUE;
}

const gchar *
vmce_policy_choices (void)
{
  static gsize choices;

  /* built from the table, so a new policy cannot be left out of the
   * messages that list them */
  if (g_once_init_enter (&choices)) {
    GString *s = g_string_new (NULL);

    for (guint i = 0; i < G_N_ELEMENTS (vmce_policy_names); i++) {
      if (i > 0)
        g_string_append (s, i + 1 == G_N_ELEMENTS (vmce_policy_names) ? " or " : ", ");
      g_string_append (s, vmce_policy_names[i]);
    }
    g_once_init_leave (&choices, (gsize) g_string_free (s, FALSE));
  }
  return (const gchar *) choices;
}

static const gchar *const vmce_migration_policy_names[] = {
  [VMCE_MIGRATION_CARRY] = "carry",
  [VMCE_MIGRATION_REFUSE] = "refuse",
};

const gchar *
vmce_migration_policy_to_string (VmceMigrationPolicy policy)
{
  return (guint) policy < G_N_ELEMENTS (vmce_migration_policy_names) ? vmce_migration_policy_names[policy]
                                                             : "unknown";
}

gboolean
vmce_migration_policy_from_string (const gchar *str, VmceMigrationPolicy *policy)
{
  gint i = vmce_name_index (vmce_migration_policy_names, G_N_ELEMENTS (vmce_migration_policy_names), str);

  /* part 21's carry does what allow-zero promised, safely: a vmced.conf
   * written before keeps working */
  if (g_strcmp0 (str, "allow-zero") == 0)
    i = VMCE_MIGRATION_CARRY;
  if (i < 0)
    return FALSE;
  *policy = (VmceMigrationPolicy) i;
  return TRUE;
}

static const gchar *const vmce_hugepage_policy_names[] = {
  [VMCE_HUGEPAGE_ONE] = "one",
  [VMCE_HUGEPAGE_ALL] = "all",
  [VMCE_HUGEPAGE_SALVAGE] = "salvage",
};

const gchar *
vmce_hugepage_policy_to_string (VmceHugepagePolicy policy)
{
  return (guint) policy < G_N_ELEMENTS (vmce_hugepage_policy_names) ? vmce_hugepage_policy_names[policy]
                                                                    : "unknown";
}

gboolean
vmce_hugepage_policy_from_string (const gchar *str, VmceHugepagePolicy *policy)
{
  gint i = vmce_name_index (vmce_hugepage_policy_names, G_N_ELEMENTS (vmce_hugepage_policy_names), str);

  if (i < 0)
    return FALSE;
  *policy = (VmceHugepagePolicy) i;
  return TRUE;
}
