/*
 * A vm session as JSON (see vm-json.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <string.h>

#include "json-util.h"
#include "vm-json.h"

static const gchar *
vmce_vm_state_to_string (VmceVmState state)
{
  switch (state) {
  case VMCE_VM_ATTACHING:
    return "attaching";
  case VMCE_VM_READY:
    return "attached";
  case VMCE_VM_DETACHING:
    return "detaching";
  case VMCE_VM_GONE:
    return "gone";
  }
  return "unknown";
}

/* What the guest sees, and so whether and how it can recover */
static void
vmce_vm_cpu_to_json (const VmceCpuModel *cpu, JsonBuilder *b)
{
  json_builder_set_member_name (b, "cpu");
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "vendor", cpu->vendor);
  vmce_json_builder_add_int (b, "family", cpu->family);
  vmce_json_builder_add_int (b, "model", cpu->model);
  vmce_json_builder_add_bool (b, "mca_broadcast", vmce_cpu_model_supports_mca_broadcast (cpu));
  vmce_json_builder_add_bool (b, "ser_p", cpu->ser_p);
  vmce_json_builder_add_bool (b, "succor", cpu->succor);
  vmce_json_builder_add_string (b, "recovery",
                                vmce_mce_style_to_string (vmce_mce_style_for (cpu, NULL)));
  json_builder_end_object (b);
}

static void
vmce_vm_vcpus_to_json (VmceVm *vm, JsonBuilder *b)
{
  GArray *vcpus = vmce_vm_get_vcpus (vm);

  json_builder_set_member_name (b, "vcpus");
  json_builder_begin_array (b);
  for (guint i = 0; vcpus != NULL && i < vcpus->len; i++) {
    const VmceVcpu *vcpu = &g_array_index (vcpus, VmceVcpu, i);

    json_builder_begin_object (b);
    vmce_json_builder_add_int (b, "index", vcpu->index);
    vmce_json_builder_add_int (b, "thread_id", vcpu->tid);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
}

typedef struct {
  VmceVm *vm;
  GHashTable *by_kind; /* (thread kind << 8 | stop code) -> VmcePtraceStopTally */
} VmceStopTally;

/* vCPU, QEMU's main thread, or any other (I/O, RCU, workers) */
static guint
vmce_vm_thread_kind (VmceVm *vm, pid_t tid)
{
  if (vmce_vm_find_vcpu_by_tid (vm, tid) != NULL)
    return 0;
  return tid == vmce_vm_get_pid (vm) ? 1 : 2;
}

static void
vmce_vm_tally_stop (pid_t tid, guint code, const VmcePtraceStopTally *tally, gpointer user_data)
{
  VmceStopTally *t = user_data;
  gpointer key = GUINT_TO_POINTER (vmce_vm_thread_kind (t->vm, tid) << 8 | code);
  VmcePtraceStopTally *sum = g_hash_table_lookup (t->by_kind, key);

  if (sum == NULL) {
    sum = g_new0 (VmcePtraceStopTally, 1);
    g_hash_table_insert (t->by_kind, key, sum);
  }
  sum->count += tally->count;
  sum->stopped_us += tally->stopped_us;
}

static gchar *
vmce_vm_stop_name (guint code)
{
  const gchar *abbrev;

  if (code & VMCE_PTRACE_STOP_EVENT) {
    const gchar *event = vmce_ptrace_stop_event_name (code);
    return event != NULL ? g_strdup (event) : g_strdup_printf ("event %u", code & 0x7f);
  }
  abbrev = sigabbrev_np ((int) code);
  return abbrev != NULL ? g_strdup_printf ("SIG%s", abbrev) : g_strdup_printf ("%u", code);
}

/* Every stop of a traced thread waits for vmced: by thread kind and what
 * stopped it (a signal, a clone, vmced's own interrupt), with the time the
 * threads waited and the time they were counted over, so that an operator
 * sees what vmced costs this QEMU (run/bench --overhead) */
static void
vmce_vm_stops_to_json (VmceVm *vm, JsonBuilder *b)
{
  static const gchar *const kinds[] = { "vcpu", "main", "other" };
  g_autoptr(GHashTable) by_kind = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  VmceStopTally t = { vm, by_kind };
  GHashTableIter iter;
  gpointer key, value;

  if (vmce_vm_get_watch (vm) != NULL)
    vmce_ptrace_watch_foreach_stop (vmce_vm_get_watch (vm), vmce_vm_tally_stop, &t);
  json_builder_set_member_name (b, "stops");
  json_builder_begin_array (b);
  g_hash_table_iter_init (&iter, by_kind);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    guint k = GPOINTER_TO_UINT (key);
    const VmcePtraceStopTally *sum = value;
    g_autofree gchar *name = vmce_vm_stop_name (k & 0xff);

    json_builder_begin_object (b);
    vmce_json_builder_add_string (b, "thread", kinds[k >> 8]);
    vmce_json_builder_add_string (b, "stop", name);
    vmce_json_builder_add_int (b, "count", (gint64) sum->count);
    vmce_json_builder_add_int (b, "stopped_us", (gint64) sum->stopped_us);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
}

static void
vmce_vm_poisoned_to_json (VmceVm *vm, JsonBuilder *b)
{
  g_autoptr(GPtrArray) pages = vmce_poison_set_sorted (vmce_vm_get_poisoned (vm));

  json_builder_set_member_name (b, "poisoned");
  json_builder_begin_array (b);
  for (guint i = 0; i < pages->len; i++)
    vmce_poisoned_page_to_json (g_ptr_array_index (pages, i), b);
  json_builder_end_array (b);
}

/* The lists' lengths, for a status of every VM: what vmcectl vm would list */
static void
vmce_vm_counts_to_json (VmceVm *vm, JsonBuilder *b)
{
  VmcePoisonCounts n;

  vmce_poison_set_count (vmce_vm_get_poisoned (vm), &n);
  json_builder_set_member_name (b, "counts");
  json_builder_begin_object (b);
  vmce_json_builder_add_int (b, "vcpus", vmce_vm_get_vcpus (vm) != NULL ? vmce_vm_get_vcpus (vm)->len : 0);
  vmce_json_builder_add_int (b, "poisoned", n.pages);
  vmce_json_builder_add_int (b, "told", n.told);
  vmce_json_builder_add_int (b, "untold", n.untold);
  vmce_json_builder_add_int (b, "host_poisoned", n.host);
  vmce_json_builder_add_int (b, "restored", n.restored);
  json_builder_end_object (b);
}

static void
vmce_vm_layout_skipped_to_json (VmceRamLayout *layout, JsonBuilder *b)
{
  GPtrArray *skipped = layout != NULL ? vmce_ram_layout_get_skipped (layout) : NULL;

  if (skipped == NULL || skipped->len == 0)
    return;
  json_builder_set_member_name (b, "layout_skipped");
  json_builder_begin_array (b);
  for (guint i = 0; i < skipped->len; i++)
    json_builder_add_string_value (b, g_ptr_array_index (skipped, i));
  json_builder_end_array (b);
}

static void
vmce_vm_layout_to_json (VmceRamLayout *layout, JsonBuilder *b)
{
  json_builder_set_member_name (b, "layout");
  json_builder_begin_array (b);
  for (guint i = 0; i < vmce_ram_layout_get_n_ranges (layout); i++) {
    const VmceRamRange *r = vmce_ram_layout_get_range (layout, i);
    guint64 hva = 0;

    json_builder_begin_object (b);
    vmce_json_builder_add_hex (b, "gpa", r->gpa);
    vmce_json_builder_add_hex (b, "size", r->size);
    vmce_json_builder_add_string (b, "block", r->block);
    vmce_json_builder_add_hex (b, "offset", r->offset);
    if (vmce_ram_layout_gpa_to_hva (layout, r->gpa, &hva, NULL))
      vmce_json_builder_add_hex (b, "hva", hva);
    vmce_json_builder_add_bool (b, "rom", r->rom);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
}

/* An Arm64 QEMU: what it offers for telling its guest (decision.h) */
static void
vmce_vm_arm_to_json (VmceVm *vm, JsonBuilder *b)
{
  const VmceArmQemu *arm = vmce_vm_get_arm_qemu (vm);

  vmce_json_builder_add_string (b, "arch", "aarch64");
  vmce_json_builder_add_string (b, "inject", arm->ghes_command ? "qmp " VMCE_QMP_INJECT_GHES : NULL);
  json_builder_set_member_name (b, "ghes");
  json_builder_begin_object (b);
  vmce_json_builder_add_bool (b, "ras", arm->ras);
  vmce_json_builder_add_bool (b, "acpi", arm->acpi);
  vmce_json_builder_add_string (b, "machine", arm->machine);
  vmce_json_builder_add_bool (b, "inject_ghes", arm->ghes_command);
  vmce_json_builder_add_bool (b, "inject_sea", arm->sea_command);
  json_builder_end_object (b);
}

/* What QEMU is and how vmced talks to it */
static void
vmce_vm_qemu_to_json (VmceVm *vm, JsonBuilder *b)
{
  vmce_json_builder_add_string (b, "qmp", vmce_vm_get_qmp_path (vm) != NULL ? vmce_vm_get_qmp_path (vm)
                                                                           : "libvirt");
  if (vmce_vm_get_uuid (vm) != NULL)
    vmce_json_builder_add_string (b, "uuid", vmce_vm_get_uuid (vm));
  vmce_json_builder_add_string (b, "agent", vmce_vm_get_agent_path (vm));
  vmce_json_builder_add_string (b, "state", vmce_vm_state_to_string (vmce_vm_get_state (vm)));
  vmce_json_builder_add_string (b, "accel", vmce_vm_is_kvm (vm) ? "kvm" : "tcg");
  json_builder_set_member_name (b, "qemu");
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "version", vmce_vm_get_qemu_version (vm));
  vmce_json_builder_add_string (b, "package", vmce_vm_get_qemu_package (vm));
  json_builder_end_object (b);
  /* (an x86 QEMU's as it always was) */
  if (vmce_vm_get_arch (vm) == VMCE_ARCH_ARM64)
    vmce_vm_arm_to_json (vm, b);
  else
    vmce_json_builder_add_string (b, "inject", vmce_vm_has_inject_mce (vm) ? "qmp inject-mce" : "hmp mce");
  vmce_json_builder_add_string (b, "layout_via", vmce_vm_has_query_ram_layout (vm)
                                                     ? "qmp query-ram-layout"
                                                     : "hmp info mtree -f, gpa2hva");
}

JsonNode *
vmce_vm_to_json (VmceVm *vm, VmceVmJsonFlags flags)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  gboolean lists = (flags & VMCE_VM_JSON_LISTS) != 0;
  gint64 attached = vmce_vm_get_attached_time (vm);

  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "name", vmce_vm_get_name (vm));
  vmce_json_builder_add_int (b, "pid", vmce_vm_get_pid (vm));
  vmce_json_builder_add_string (b, "qemu_id", vmce_vm_get_qemu_id (vm));
  vmce_vm_qemu_to_json (vm, b);
  if (lists)
    vmce_vm_layout_skipped_to_json (vmce_vm_get_layout (vm), b);
  vmce_vm_cpu_to_json (vmce_vm_get_cpu_model (vm), b);
  vmce_json_builder_add_string (b, "host_vendor", vmce_vm_get_host_vendor (vm));
  vmce_json_builder_add_string (b, "policy", vmce_policy_to_string (vmce_vm_get_policy (vm)));
  if (lists)
    vmce_vm_vcpus_to_json (vm, b);
  vmce_json_builder_add_int (b, "threads", vmce_vm_get_watch (vm) != NULL
                                               ? vmce_ptrace_watch_get_n_threads (vmce_vm_get_watch (vm))
                                               : 0);
  vmce_json_builder_add_int (b, "attached_ms", attached != 0 ? (g_get_real_time () - attached) / 1000 : 0);
  if (lists)
    vmce_vm_stops_to_json (vm, b);
  vmce_json_builder_add_int (b, "events", (gint64) vmce_vm_get_n_events (vm));
  vmce_vm_counts_to_json (vm, b);
  if (flags & VMCE_VM_JSON_PAGES)
    vmce_vm_poisoned_to_json (vm, b);
  vmce_json_builder_add_string (b, "poisoned_from", vmce_vm_get_poisoned_from (vm));
  vmce_json_builder_add_int (b, "rom_blobs",
                             vmce_vm_get_roms (vm) != NULL ? vmce_rom_blobs_get_n (vmce_vm_get_roms (vm)) : 0);
  /* the simulator's and the guards' own */
  vmce_vm_layers_to_json (vm, b);
  if ((flags & VMCE_VM_JSON_LAYOUT) && vmce_vm_get_layout (vm) != NULL)
    vmce_vm_layout_to_json (vmce_vm_get_layout (vm), b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
