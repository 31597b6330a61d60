/*
 * A huge page of guest RAM lost on the host: the blast radius.
 *
 * When the host kernel finds an error in a huge page (hugetlbfs, or a THP
 * it cannot split) it poisons all of it and says so with si_addr_lsb 21
 * (2 MiB) or 30 (1 GiB). QEMU tells the guest about one 4 KiB page; the
 * guest later reads one of the other 511 (or 262143), which it was never
 * told about: another error, often in its kernel. vmced records the loss
 * once, remembers every lost page (the reset and migration guards need
 * them all), and under policy `all` tells the guest about each of them.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "ram-layout.h"
#include "vm.h"

/* The pages of guest RAM (no ROM) in the host range of 2^@lsb bytes that
 * holds @hva, in GPA order (of VmceGuestPage): what a guest loses with that
 * huge page. Pure: @layout in, pages out (none for an lsb that is no huge
 * page: 12 or less, above 30). */
GArray *vmce_hugepage_loss_pages (VmceRamLayout *layout, guint64 hva, guint lsb);

/* Whether a journaled memory error can show a huge page's loss: a host
 * error (not a page of a loss being told, not vmcectl inject, which has no
 * host side) in guest RAM, whose lsb is a huge page's. Pure. */
gboolean vmce_hugepage_loss_shown_by (guint lsb, gboolean have_gpa, const gchar *source);

/* Of a loss's @pages (VmceGuestPage, GPA order), the GPAs (guint64) the
 * guest is told of next: none under `one`; none, and @why_not says so,
 * when the page hit's machine check (@hit) was not injected; else every
 * page but the one hit. Pure. */
GArray *vmce_hugepage_loss_to_tell (VmceHugepagePolicy policy,
                                    VmceResult hit,
                                    GArray *pages,
                                    guint64 hit_gpa,
                                    const gchar **why_not);

/* What the operator chose for @vm (config, vmced --hugepage, vmcectl policy) */
VmceHugepagePolicy vmce_hugepage_loss_get_policy (VmceVm *vm);
void vmce_hugepage_loss_set_policy (VmceVm *vm, VmceHugepagePolicy policy);

/* A memory error vmced has journaled (@ev->seq is set). The first one
 * inside a lost huge page records the loss and its pages; under `all`,
 * once the guest got the machine check for the page that was hit, every
 * other page of the loss is told to it, as SRAO, through the forwarder's
 * queue (from the main loop: nothing here runs under a held thread). */
void vmce_hugepage_loss_on_event (VmceVm *vm, const VmceMceEvent *ev);

/* vmced lets go of @vm: pages not yet handed to the forwarder are dropped
 * (they stay in the poison set, as lost) */
void vmce_hugepage_loss_cancel_all (VmceVm *vm);

/* The policy and the losses seen, for vmcectl vm */
void vmce_hugepage_loss_to_json (VmceVm *vm, JsonBuilder *b);
