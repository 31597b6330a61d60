/*
 * What vmced asks a QEMU while it attaches, scripted on a fake monitor for
 * a child process standing for QEMU (test-child.h): for the tests that
 * need a vm attached.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "fake-qmp.h"
#include "test-child.h"

/* One vCPU (@child's main thread), a TCG guest of an Intel CPU (@kvm: a
 * KVM guest of an AMD CPU with SUCCOR), QEMU 10.0.2 with inject-mce. The
 * RAM layout: @layout_reply, query-ram-layout's answer, or (NULL) from HMP
 * text: @mtree, `info mtree -f` escaped (NULL: one 512 MiB pc.ram), and
 * gpa2hva. Then QEMU's ROM blobs, whether the guest runs, MIGRATION
 * events on. */
void fake_qemu_script_attach (FakeQmp *fake,
                              TestChild *child,
                              const gchar *layout_reply,
                              const gchar *mtree,
                              gboolean kvm);
/* As fake_qemu_script_attach() without query-ram-layout, where the guest
 * remaps its memory between `info mtree -f` and `gpa2hva` @remaps times
 * in a row: vmced reads the layout again each time, up to
 * VMCE_VM_LAYOUT_READS reads (@remaps that many or more: it gives up) */
void fake_qemu_script_attach_remapped (FakeQmp *fake, TestChild *child, guint remaps);
/* An Arm64 QEMU 10.2.2 (query-cpus-fast's target "aarch64"): TCG, one
 * vCPU, @commands query-commands' answer (with query-ram-layout, whose
 * answer is @layout_reply), the virt machine's ras (@ras) and QOM type
 * (@machine), an ACPI device or none (@acpi: booted without UEFI) */
void fake_qemu_script_attach_arm (FakeQmp *fake,
                                  TestChild *child,
                                  const gchar *layout_reply,
                                  const gchar *commands,
                                  gboolean ras,
                                  const gchar *machine,
                                  gboolean acpi);
/* query-ram-layout's answer for guest RAM that is one page of @child, at @gpa */
gchar *fake_qemu_one_page_layout (TestChild *child, guint64 gpa);
