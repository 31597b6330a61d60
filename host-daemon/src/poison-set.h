/*
 * The poisoned pages of one QEMU: what its guest was told about, and which
 * host pages are bad (or taken away by vmced) and must be replaced before
 * the guest runs again after a reset.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "mce-event.h"

typedef struct {
  guint64 gpa; /* page address */
  guint64 hva; /* the host page */
  VmceMceKind kind;
  gint64 time_us;
  gboolean simulated;
  /* the host page is poisoned (or vmced took it away): QEMU cannot read
   * it, and a reset must replace it. FALSE for `vmcectl inject`, which
   * tells the guest of a page that is fine on the host. */
  gboolean host_poisoned;
  VmceResult result;
  guint count;      /* errors reported on this page */
  gint64 last_us;   /* monotonic time of the last error */
  guint refaults;   /* AR again after its machine check was in */
  guint64 last_seq; /* the journal record of its last error */
  gboolean restored; /* rebuilt from the journal after a vmced restart */
  /* lent to a migration's thread as a zeroed page, poisoned again since
   * (migration-lend.c): how many times in this migration */
  guint lent;
  /* brought by a migration from its source QEMU (migration-incoming.c) */
  gboolean migrated;
  /* found in QEMU's page table, with no journal record (poison-scan.c) */
  gboolean found_in_qemu;
  /* lost with a huge page on the host: the seq of the error that showed
   * the loss (hugepage-loss.c); count stays 0 until the guest is told */
  guint64 lost_with;
  /* handed over again: its last machine check went to QEMU so short a
   * time before the source stopped for a migration that the vCPU may not
   * have taken it (a pending interrupt does not migrate): told again on
   * the destination (twice is harmless to a guest, never is not) */
  gboolean retell;
} VmcePoisonedPage;

/* gpa -> VmcePoisonedPage, owned */
GHashTable *vmce_poison_set_new (void);
VmcePoisonedPage *vmce_poison_set_lookup (GHashTable *set, guint64 gpa);
/* A memory-error event (with a GPA) vmced handled: returns its page, or
 * NULL if the event changes nothing (a machine check that failed with no
 * host side, say) */
VmcePoisonedPage *vmce_poison_set_add_event (GHashTable *set, const VmceMceEvent *ev);
/* The same from its journal record; FALSE if the record is not about a
 * page (or not one this set keeps) */
gboolean vmce_poison_set_add_record (GHashTable *set, JsonObject *record);
/* A page QEMU cannot read, which no record explains: the kernel poisoned
 * it (or vmced took it away) and the record of it was lost, or came while
 * no vmced watched. Returns NULL if the set knows the page already. */
/* A host error whose machine check waits in the forwarder's queue: its
 * page is bad on the host already (a migration must not read it, and
 * hands it over untold), its record adds the count (NULL: known already,
 * or no host page) */
VmcePoisonedPage *vmce_poison_set_add_pending (GHashTable *set, const VmceMceEvent *ev);
VmcePoisonedPage *vmce_poison_set_add_found (GHashTable *set,
                                             guint64 gpa,
                                             guint64 hva,
                                             gboolean simulated);
/* A page of a lost huge page (hugepage-loss.c), bad on the host whether
 * the guest is told of it or not. Returns NULL if the set knows the page
 * already. */
VmcePoisonedPage *vmce_poison_set_add_lost (GHashTable *set,
                                            guint64 gpa,
                                            guint64 hva,
                                            gboolean simulated,
                                            guint64 lost_with);
/* A page a migration brought, poisoned on its source: told or not
 * (@lost_with != 0 and @count 0: a lost huge page's page never reported),
 * as it was there. Returns NULL if the set knows the page already. */
VmcePoisonedPage *vmce_poison_set_add_migrated (GHashTable *set,
                                                const VmcePoisonedPage *source,
                                                guint64 hva);
/* The pages of a huge-page-loss journal record (hugepage-loss.c), as
 * add_lost() put them in when the loss happened: what a restarted vmced
 * rebuilds. Returns how many it added; a record without per-range HVAs
 * (vmced before they were journaled) adds none. */
guint vmce_poison_set_add_loss_record (GHashTable *set, JsonObject *record);
/* Whether the guest was told of @p: FALSE only for a page of a lost huge
 * page that no error reported yet (its first read is a first error, not a
 * refault) */
gboolean vmce_poisoned_page_told (const VmcePoisonedPage *p);
/* What a set holds, counted: vmcectl status shows it for every VM, where
 * the pages themselves would be thousands of lines after a storm */
typedef struct {
  guint pages;    /* all of them */
  guint told;     /* the guest was told of (vmce_poisoned_page_told()) */
  guint untold;   /* lost with a huge page, not reported to the guest yet */
  guint host;     /* bad on the host: a reset replaces them */
  guint restored; /* rebuilt from the journal after a vmced restart */
} VmcePoisonCounts;
void vmce_poison_set_count (GHashTable *set, VmcePoisonCounts *counts);
/* Pages that must be replaced at a reset, sorted by GPA (not owned) */
GPtrArray *vmce_poison_set_host_pages (GHashTable *set);
/* All, sorted by GPA (not owned) */
GPtrArray *vmce_poison_set_sorted (GHashTable *set);

void vmce_poisoned_page_to_json (const VmcePoisonedPage *p, JsonBuilder *b);
/* What a migration carries of a page (its GPA, whether the guest was told,
 * the kind and count of its errors, the loss it belongs to, simulated or
 * not), as an object of a migration record; and back, for a vmced that
 * must finish a destination's marks after a restart. NULL for an object
 * without a page address. */
void vmce_poisoned_page_carried_to_json (const VmcePoisonedPage *p, JsonBuilder *b);
VmcePoisonedPage *vmce_poisoned_page_carried_from_json (JsonObject *obj);
