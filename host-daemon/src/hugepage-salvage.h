/*
 * A lost huge page of guest RAM given back to the guest but for its raw
 * poisoned 4 KiB page(s): hugepage = salvage.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "proc-maps.h"
#include "vm.h"

/* Why a loss of @size bytes in @vma (the mapping that held it, NULL if
 * none) cannot be salvaged, or NULL if it can. @simulated: vmced's own
 * error, the file behind it is whole; else the host kernel's, readable
 * piece by piece only from Linux 6.4 (@kernel_release, uname -r).
 * @mem_available and @reserve in bytes: the copy must leave @reserve
 * free. Pure. */
gchar *vmce_hugepage_salvage_refusal (const VmceVma *vma,
                                      guint64 size,
                                      gboolean simulated,
                                      const gchar *kernel_release,
                                      guint64 mem_available,
                                      guint64 reserve);

/* Whether a kernel release ("6.12.57+deb13-amd64") is @major.@minor or
 * later. Pure. */
gboolean vmce_kernel_release_at_least (const gchar *release, guint major, guint minor);

/* The same for @vm's loss at [@base, @base + @size), from the host as it
 * is now (QEMU's mappings, MemAvailable, uname) */
gchar *vmce_hugepage_salvage_check (VmceVm *vm, guint64 base, guint64 size, gboolean simulated);

/* Salvages the loss of [@base, @base + @size) that @ev showed (journaled:
 * @ev->seq is set) and @pages (VmceGuestPage) are, at QEMU's next stop:
 * reads the healthy 4 KiB pieces from the hugetlbfs file, maps fresh 4 KiB
 * memory over the whole range with them in it, leaves the raw page(s)
 * poisoned and tells the guest of those it was not told of; a record in
 * the journal either way. From the main loop. */
void vmce_hugepage_salvage_start (VmceVm *vm, const VmceMceEvent *ev, guint64 base, guint64 size, GArray *pages);

/* A thread of @vm stopped for a fault (SIGSEGV, or SIGBUS with an address)
 * in a range being salvaged is held until the salvage is done, then tries
 * again; one in a range salvaged since it faulted tries again at once.
 * TRUE when taken. */
gboolean vmce_hugepage_salvage_fault (VmceVm *vm, pid_t tid, const siginfo_t *info);

/* A memory error journaled in @vm while its range is being salvaged: its
 * page stays poisoned, with the raw ones */
void vmce_hugepage_salvage_on_event (VmceVm *vm, const VmceMceEvent *ev);

/* vmced lets go of @vm: held threads go (they fault again, and QEMU gets
 * the signal as without vmced) */
void vmce_hugepage_salvage_cancel_all (VmceVm *vm);

/* The salvaged ranges (no longer huge-page backed), for vmcectl vm */
void vmce_hugepage_salvage_to_json (VmceVm *vm, JsonBuilder *b);

/* Keeps @reserve_bytes of the host's memory free: a salvage that would
 * leave less falls back to `all` (vmced.conf salvage-reserve-mb) */
void vmce_hugepage_salvage_set_reserve (guint64 reserve_bytes);
