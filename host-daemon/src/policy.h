/*
 * What vmced does with a memory error in a VM, and with a migration of a VM
 * with poisoned memory: the policies, and their names (one table each, for
 * the config file, the control protocol and the journal).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

typedef enum {
  VMCE_POLICY_FORWARD,   /* inject it into the guest */
  VMCE_POLICY_IGNORE_AO, /* drop AO (the guest hears of the page when it consumes it) */
  VMCE_POLICY_PASS,      /* leave the signal to QEMU, as if vmced were not there */
  VMCE_POLICY_STOP,      /* pause the VM and report */
  VMCE_POLICY_FORCE,     /* inject even what the guest cannot recover from */
} VmcePolicy;

#define VMCE_POLICY_COUNT (VMCE_POLICY_FORCE + 1)

const gchar *vmce_policy_to_string (VmcePolicy policy);
gboolean vmce_policy_from_string (const gchar *str, VmcePolicy *policy);
/* "forward, ignore-ao, pass, stop or force", for error messages */
const gchar *vmce_policy_choices (void);

/* What vmced does when a VM with poisoned memory is migrated */
typedef enum {
  VMCE_MIGRATION_CARRY,  /* the pages go with it, poisoned on a destination vmced watches */
  VMCE_MIGRATION_REFUSE, /* cancel it, say why */
} VmceMigrationPolicy;

const gchar *vmce_migration_policy_to_string (VmceMigrationPolicy policy);
gboolean vmce_migration_policy_from_string (const gchar *str, VmceMigrationPolicy *policy);

/* What vmced tells a guest when the host loses a huge page under its RAM
 * (SIGBUS with si_addr_lsb above 12: the host kernel poisoned all of it,
 * hugepage-loss.c) */
typedef enum {
  VMCE_HUGEPAGE_ONE, /* the page the error was at, as QEMU does */
  VMCE_HUGEPAGE_ALL, /* then every other guest page of the lost range (SRAO each) */
  /* the healthy 4 KiB pieces read back from the hugetlbfs file and mapped
   * again in 4 KiB pages; only the raw poisoned page(s) lost and told
   * (hugepage-salvage.c); `all` where that cannot work. The default. */
  VMCE_HUGEPAGE_SALVAGE,
} VmceHugepagePolicy;

#define VMCE_HUGEPAGE_DEFAULT VMCE_HUGEPAGE_SALVAGE
#define VMCE_HUGEPAGE_NAMES "one, all or salvage"


const gchar *vmce_hugepage_policy_to_string (VmceHugepagePolicy policy);
gboolean vmce_hugepage_policy_from_string (const gchar *str, VmceHugepagePolicy *policy);
