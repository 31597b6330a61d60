/*
 * A vm session as JSON: `vmcectl vm`, `vmcectl status` and the attach
 * record.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <string.h>

#include "json-util.h"
#include "vm-private.h"

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
vmce_vm_vcpus_to_json (VmceVm *self, JsonBuilder *b)
{
  json_builder_set_member_name (b, "vcpus");
  json_builder_begin_array (b);
  for (guint i = 0; self->vcpus != NULL && i < self->vcpus->len; i++) {
    const VmceVcpu *vcpu = &g_array_index (self->vcpus, VmceVcpu, i);

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
vmce_vm_thread_kind (VmceVm *self, pid_t tid)
{
  if (vmce_vm_find_vcpu_by_tid (self, tid) != NULL)
    return 0;
  return tid == self->pid ? 1 : 2;
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
vmce_vm_stops_to_json (VmceVm *self, JsonBuilder *b)
{
  static const gchar *const kinds[] = { "vcpu", "main", "other" };
  g_autoptr(GHashTable) by_kind = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  VmceStopTally t = { self, by_kind };
  GHashTableIter iter;
  gpointer key, value;

  if (self->watch != NULL)
    vmce_ptrace_watch_foreach_stop (self->watch, vmce_vm_tally_stop, &t);
  vmce_json_builder_add_int (b, "attached_ms", self->attached_time_us != 0
                                                   ? (g_get_real_time () - self->attached_time_us) / 1000
                                                   : 0);
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
vmce_vm_poisoned_to_json (VmceVm *self, JsonBuilder *b)
{
  g_autoptr(GPtrArray) pages = vmce_poison_set_sorted (self->poisoned);

  json_builder_set_member_name (b, "poisoned");
  json_builder_begin_array (b);
  for (guint i = 0; i < pages->len; i++)
    vmce_poisoned_page_to_json (g_ptr_array_index (pages, i), b);
  json_builder_end_array (b);
  vmce_json_builder_add_string (b, "poisoned_from", self->poisoned_from);
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

JsonNode *
vmce_vm_to_json (VmceVm *self, gboolean with_layout)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "name", self->name);
  vmce_json_builder_add_int (b, "pid", self->pid);
  vmce_json_builder_add_string (b, "qemu_id", self->qemu_id);
  vmce_json_builder_add_string (b, "qmp", self->qmp_path != NULL ? self->qmp_path : "libvirt");
  if (self->uuid != NULL)
    vmce_json_builder_add_string (b, "uuid", self->uuid);
  vmce_json_builder_add_string (b, "agent", self->agent_path);
  vmce_json_builder_add_string (b, "state", vmce_vm_state_to_string (self->state));
  vmce_json_builder_add_string (b, "accel", self->kvm ? "kvm" : "tcg");
  json_builder_set_member_name (b, "qemu");
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "version", self->qemu_version);
  vmce_json_builder_add_string (b, "package", self->qemu_package);
  json_builder_end_object (b);
  vmce_json_builder_add_string (b, "inject", self->qmp_inject_mce ? "qmp inject-mce" : "hmp mce");
  vmce_json_builder_add_string (b, "layout_via", self->qmp_ram_layout
                                                     ? "qmp query-ram-layout"
                                                     : "hmp info mtree -f, gpa2hva");
  if (self->layout != NULL && vmce_ram_layout_get_skipped (self->layout)->len > 0) {
    GPtrArray *skipped = vmce_ram_layout_get_skipped (self->layout);

    json_builder_set_member_name (b, "layout_skipped");
    json_builder_begin_array (b);
    for (guint i = 0; i < skipped->len; i++)
      json_builder_add_string_value (b, g_ptr_array_index (skipped, i));
    json_builder_end_array (b);
  }
  vmce_vm_cpu_to_json (&self->cpu_model, b);
  vmce_json_builder_add_string (b, "host_vendor", self->host_vendor);
  vmce_json_builder_add_string (b, "policy", vmce_policy_to_string (self->policy));
  vmce_vm_vcpus_to_json (self, b);
  vmce_json_builder_add_int (b, "threads", self->watch != NULL
                                               ? vmce_ptrace_watch_get_n_threads (self->watch)
                                               : 0);
  vmce_vm_stops_to_json (self, b);
  vmce_json_builder_add_int (b, "events", (gint64) self->n_events);
  vmce_vm_poisoned_to_json (self, b);
  vmce_json_builder_add_int (b, "rom_blobs",
                             self->roms != NULL ? vmce_rom_blobs_get_n (self->roms) : 0);
  /* the simulator's and the guards' own */
  self->handler->to_json (self, b, self->handler_data);
  if (with_layout && self->layout != NULL)
    vmce_vm_layout_to_json (self->layout, b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
