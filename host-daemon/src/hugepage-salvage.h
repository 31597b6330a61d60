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

/* The loss of [@base, @base + @size) that @ev showed, journaled (@ev->seq
 * is set): salvaged at QEMU's next stop if no earlier stop began it (the
 * healthy 4 KiB pieces read from the hugetlbfs file into fresh 4 KiB memory
 * over the whole range, the raw page(s) left poisoned), then a record in
 * the journal either way, and the raw pages the guest was not told of
 * told. From the main loop. */
void vmce_hugepage_salvage_start (VmceVm *vm, const VmceMceEvent *ev, guint64 base, guint64 size);

/* Whether the range at @base is salvaged, or being salvaged */
gboolean vmce_hugepage_salvage_knows (VmceVm *vm, guint64 base);

/* At each signal-stop of @vm (@stop_us, monotonic), before anything else
 * sees it. A thread stopped for a fault (SIGSEGV, or SIGBUS with an
 * address) in a range being salvaged is held until the salvage is done,
 * then tries again; one in a range salvaged since it faulted tries again
 * at once. Under @salvage (the VM's policy), the first error in a
 * hugetlbfs range of its RAM begins that range's salvage at once. The
 * host's AO for a range being salvaged is held too, and handed to @redo
 * (the rest of the signal-stop's way) once the salvage is done: telling
 * the guest needs its vCPUs, and those that read the range wait for the
 * salvage (HMP mce waited 10 s for one, for a 1 GiB copy). TRUE when the
 * thread was taken. */
typedef void (*VmceSalvageRedo) (VmceVm *vm, pid_t tid, siginfo_t *info, gint64 stop_us, gpointer user_data);
gboolean vmce_hugepage_salvage_fault (VmceVm *vm,
                                      pid_t tid,
                                      const siginfo_t *info,
                                      gboolean salvage,
                                      gint64 stop_us,
                                      VmceSalvageRedo redo,
                                      gpointer redo_data);

/* vmced lets go of @vm: held threads go (they fault again, and QEMU gets
 * the signal as without vmced) */
void vmce_hugepage_salvage_cancel_all (VmceVm *vm);

/* The salvaged ranges (no longer huge-page backed), for vmcectl vm */
void vmce_hugepage_salvage_to_json (VmceVm *vm, JsonBuilder *b);

/* Keeps @reserve_bytes of the host's memory free: a salvage that would
 * leave less falls back to `all` (vmced.conf salvage-reserve-mb) */
void vmce_hugepage_salvage_set_reserve (guint64 reserve_bytes);
