/*
 * What vmced asks a QEMU while it attaches, scripted (see fake-qemu.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fake-qemu.h"
#include "vm.h"

/* one RAM range, as `info mtree -f` prints it */
static const gchar *fake_qemu_mtree =
    "FlatView #0\\r\\n AS \\\"memory\\\", root: system\\r\\n AS \\\"cpu-memory-0\\\", root: "
    "system\\r\\n Root memory region: system\\r\\n  0000000000000000-000000001fffffff (prio 0, "
    "ram): pc.ram\\r\\n\\r\\n";

/* What vmced asks after the layout: QEMU's ROM blobs in RAM, whether the
 * guest runs, and MIGRATION events on */
static void
fake_qemu_script_attach_tail (FakeQmp *fake)
{
  fake_qmp_expect (fake, "human-monitor-command",
                   "\"addr=0000000001000000 size=0x200000 mem=ram name=\\\"vmlinux ELF program "
                   "header segment 0\\\"\\r\\nfw=genroms/kvmvapic.bin size=0x002400 "
                   "name=\\\"kvmvapic.bin\\\"\\r\\n\"");
  fake_qmp_expect (fake, "query-status", "{\"status\": \"running\", \"running\": true}");
  fake_qmp_expect (fake, "migrate-set-capabilities", "{}");
}

/* What vmced asks before the layout: the QEMU, its accelerator and CPU */
static void
fake_qemu_script_attach_head (FakeQmp *fake, TestChild *child, gboolean kvm)
{
  g_autofree gchar *cpus = g_strdup_printf (
      "[{\"cpu-index\": 0, \"thread-id\": %d, \"qom-path\": \"/machine/unattached/device[0]\", "
      "\"target\": \"x86_64\"}]",
      child->pid);

  fake_qmp_expect (fake, "query-name", "{\"name\": \"fake-qemu\"}");
  fake_qmp_expect (fake, "query-version",
                   "{\"qemu\": {\"major\": 10, \"minor\": 0, \"micro\": 2}, "
                   "\"package\": \" (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\"}");
  fake_qmp_expect (fake, "query-kvm",
                   kvm ? "{\"enabled\": true, \"present\": true}" : "{\"enabled\": false, \"present\": true}");
  fake_qmp_expect (fake, "query-cpus-fast", cpus);
  if (kvm) {
    fake_qmp_expect (fake, "qom-get", "\"AuthenticAMD\"");
    fake_qmp_expect (fake, "qom-get", "25");
    fake_qmp_expect (fake, "qom-get", "1");
    fake_qmp_expect (fake, "qom-get", "true");
  } else {
    fake_qmp_expect (fake, "qom-get", "\"GenuineIntel\"");
    fake_qmp_expect (fake, "qom-get", "6");
    fake_qmp_expect (fake, "qom-get", "94");
    fake_qmp_expect (fake, "qom-get", "error:Property 'x86_64-cpu.succor' not found");
  }
}

void
fake_qemu_script_attach (FakeQmp *fake, TestChild *child, const gchar *layout_reply, const gchar *mtree,
                         gboolean kvm)
{
  g_autofree gchar *mtree_reply = g_strdup_printf ("\"%s\"", mtree != NULL ? mtree : fake_qemu_mtree);

  fake_qemu_script_attach_head (fake, child, kvm);
  /* a QEMU with qemu-patches/: vmced will inject through QMP */
  if (layout_reply == NULL) {
    fake_qmp_expect (fake, "query-commands", "[{\"name\": \"query-status\"}, {\"name\": \"inject-mce\"}]");
    fake_qmp_expect (fake, "human-monitor-command", mtree_reply);
    fake_qmp_expect (fake, "human-monitor-command",
                     "\"Host virtual address for 0x0 (pc.ram) is 0x7f0000000000\\r\\n\"");
  } else {
    fake_qmp_expect (fake, "query-commands", "[{\"name\": \"inject-mce\"}, {\"name\": \"query-ram-layout\"}]");
    fake_qmp_expect (fake, "query-ram-layout", layout_reply);
  }
  fake_qemu_script_attach_tail (fake);
}

void
fake_qemu_script_attach_remapped (FakeQmp *fake, TestChild *child, guint remaps)
{
  g_autofree gchar *mtree_reply = g_strdup_printf ("\"%s\"", fake_qemu_mtree);

  fake_qemu_script_attach_head (fake, child, FALSE);
  fake_qmp_expect (fake, "query-commands", "[{\"name\": \"query-status\"}, {\"name\": \"inject-mce\"}]");
  for (guint i = 0; i < MIN (remaps + 1, VMCE_VM_LAYOUT_READS); i++) {
    fake_qmp_expect (fake, "human-monitor-command", mtree_reply);
    /* the two answers QEMU gives for a range PAM moved: ROM now, or
     * nothing (sent to PCI) */
    fake_qmp_expect (fake, "human-monitor-command",
                     i == remaps ? "\"Host virtual address for 0x0 (pc.ram) is 0x7f0000000000\\r\\n\""
                     : i % 2 == 0 ? "\"Host virtual address for 0x0 (pc.rom) is 0x7f0000000000\\r\\n\""
                                  : "\"No memory is mapped at address 0x0\\r\\n\"");
  }
  if (remaps < VMCE_VM_LAYOUT_READS)
    fake_qemu_script_attach_tail (fake);
}

void
fake_qemu_script_attach_arm (FakeQmp *fake, TestChild *child, const gchar *layout_reply, const gchar *commands,
                             gboolean ras, const gchar *machine, gboolean acpi)
{
  g_autofree gchar *cpus = g_strdup_printf (
      "[{\"cpu-index\": 0, \"thread-id\": %d, \"qom-path\": \"/machine/unattached/device[0]\", "
      "\"target\": \"aarch64\"}]",
      child->pid);
  g_autofree gchar *machine_reply = g_strdup_printf ("\"%s\"", machine);

  fake_qmp_expect (fake, "query-name", "{\"name\": \"fake-arm\"}");
  fake_qmp_expect (fake, "query-version",
                   "{\"qemu\": {\"major\": 10, \"minor\": 2, \"micro\": 2}, "
                   "\"package\": \" (Debian 1:10.2.2+ds-1)\"}");
  fake_qmp_expect (fake, "query-kvm", "{\"enabled\": false, \"present\": false}");
  fake_qmp_expect (fake, "query-cpus-fast", cpus);
  /* no x86 CPU properties asked */
  fake_qmp_expect (fake, "query-commands", commands);
  fake_qmp_expect (fake, "qom-get", ras ? "true" : "false");
  fake_qmp_expect (fake, "qom-get", machine_reply);
  /* booted with UEFI firmware and ACPI: the GED answers */
  fake_qmp_expect (fake, "query-acpi-ospm-status",
                   acpi ? "[]" : "error:command is not supported, missing ACPI device");
  fake_qmp_expect (fake, "query-ram-layout", layout_reply);
  fake_qemu_script_attach_tail (fake);
}

gchar *
fake_qemu_one_page_layout (TestChild *child, guint64 gpa)
{
  return g_strdup_printf ("[{\"name\": \"pc.ram\", \"hva\": %" G_GUINT64_FORMAT ", \"size\": 4096, "
                          "\"page-size\": 4096, \"ranges\": [{\"gpa\": %" G_GUINT64_FORMAT
                          ", \"size\": 4096, \"offset\": 0, \"readonly\": false}]}]",
                          child->page, gpa);
}
