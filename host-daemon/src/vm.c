/*
 * One QEMU process that vmced watches.
 *
 * Attaching talks to the monitor first (vCPU threads, CPU model, RAM
 * layout) and only then seizes the threads, so a QEMU whose monitor does
 * not answer is never left traced.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "error.h"
#include "json-util.h"
#include "poison-scan.h"
#include "proc-info.h"
#include "proc-maps.h"
#include "agent-client.h"
#include "vm.h"

/* The session's own state: everything outside this file goes through
 * vm.h's getters, and the layers above keep their per-VM state as layer
 * data (vmce_vm_set_layer_data()), which the session holds for them
 * unseen */
struct _VmceVm {
  gint ref_count;
  const VmceVmHandler *handler;
  gpointer handler_data;
  gchar *name;
  pid_t pid;
  gchar *qemu_id; /* the process for good: vmce_proc_identity() */
  gchar *qmp_path;
  gchar *agent_path;
  VmceAgentClient *agent; /* made when first asked for (vmce_vm_get_agent()) */
  /* a libvirt domain: its UUID, and the monitor reached through libvirt
   * (monitor_owner, and qmp_path NULL); or a socket vmced connected itself
   * and probed (no owner, qmp_path where it is) */
  gchar *uuid;
  GSocket *qmp_socket;
  gpointer monitor_owner;
  GDestroyNotify monitor_owner_free;
  VmceVmState state;
  gchar *detach_reason;
  gint64 attached_time_us;
  guint64 n_events; /* memory errors reported (vmce_vm_emit_event()) */

  VmceQmpClient *qmp;
  VmcePtraceWatch *watch;
  VmceRamLayout *layout;
  gboolean layout_refreshing;
  gboolean layout_refresh_again;
  GPtrArray *layout_waiters;   /* for the next refresh: VmceLayoutWaiter */
  GPtrArray *layout_inflight;  /* for the refresh under way */
  guint layout_wait_source;    /* bounds how long they wait */
  GArray *vcpus; /* of VmceVcpu */
  VmceCpuModel cpu_model;
  gboolean kvm;
  gboolean qmp_inject_mce; /* QEMU has inject-mce (qemu-patches/) */
  gboolean qmp_ram_layout; /* and query-ram-layout */
  gboolean qmp_hwpoison_add; /* and x-hwpoison-page-add (0009) */
  /* query-cpus-fast's "target"; an Arm64 QEMU's GHES (decision.h) */
  VmceArch arch;
  VmceArmQemu arm;
  /* query-version: what the QEMU is (the journal's attach record says it) */
  gchar *qemu_version;  /* "10.0.2" */
  gchar *qemu_package;  /* "Debian 1:10.0.2+ds-2+deb13u1~bpo12+1", or NULL */
  GHashTable *layout_said; /* what of QEMU's mtree output was skipped and said (once) */
  gchar host_vendor[13];
  VmcePolicy policy;
  GTask *attach_task;
  gboolean running;  /* the guest runs (query-status, STOP, RESUME) */
  gboolean incoming; /* a migration's destination, loading its state */

  /* what the guest was told about, and which host pages are bad, by
   * guest page (poison-set.h) */
  GHashTable *poisoned; /* gpa -> VmcePoisonedPage */
  gchar *poisoned_from; /* where that set came from, for vmcectl vm */
  VmceRomBlobs *roms;   /* ROM blobs in RAM, which QEMU rewrites at reset */

  /* the forwarder's, the simulator's and the guards' own (GQuark -> data) */
  GData *layer_data;
};

static void vmce_vm_set_gone (VmceVm *self, const gchar *type, const gchar *reason);
static void vmce_vm_scan_poisoned (VmceVm *self);

/* The vendor of the CPU QEMU runs on, which decides what KVM shows the
 * guest: kvm_amd keeps only bits 8:0 of MCG_CAP (svm_setup_mce() in Linux
 * 6.1), so a KVM guest on an AMD host never sees MCG_SER_P */
static void
vmce_read_host_vendor (gchar vendor[13])
{
  g_autofree gchar *cpuinfo = NULL;
  const gchar *line;

  vendor[0] = '\0';
  if (!g_file_get_contents ("/proc/cpuinfo", &cpuinfo, NULL, NULL))
    return;
  line = strstr (cpuinfo, "vendor_id");
  if (line == NULL || (line = strchr (line, ':')) == NULL)
    return;
  line++;
  while (*line == ' ' || *line == '\t')
    line++;
  g_strlcpy (vendor, line, MIN (13, strcspn (line, "\n") + 1));
}

/* --- monitor queries ----------------------------------------------------- */

static JsonNode *
vmce_vm_qom_get_args (const gchar *path, const gchar *property)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (obj, "path", path);
  json_object_set_string_member (obj, "property", property);
  json_node_set_object (node, obj);
  return node;
}

static gboolean
vmce_vm_parse_vcpus (VmceVm *self, JsonNode *ret, GError **error)
{
  g_autoptr(GArray) vcpus = NULL;
  JsonArray *arr;

  if (!JSON_NODE_HOLDS_ARRAY (ret)) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_GENERIC,
                 "query-cpus-fast did not return a list");
    return FALSE;
  }
  arr = json_node_get_array (ret);
  vcpus = g_array_new (FALSE, TRUE, sizeof (VmceVcpu));
  g_array_set_clear_func (vcpus, (GDestroyNotify) NULL);
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonNode *node = json_array_get_element (arr, i);
    JsonObject *obj;
    VmceVcpu vcpu = { 0 };

    if (!JSON_NODE_HOLDS_OBJECT (node))
      continue;
    obj = json_node_get_object (node);
    vcpu.index = (guint) json_object_get_int_member_with_default (obj, "cpu-index", i);
    vcpu.tid = (pid_t) json_object_get_int_member_with_default (obj, "thread-id", 0);
    vcpu.qom_path = g_strdup (vmce_json_object_get_string_opt (obj, "qom-path"));
    /* "target" since QEMU 3.0; one QEMU binary runs one architecture */
    if (vcpus->len == 0)
      self->arch = g_strcmp0 (vmce_json_object_get_string_opt (obj, "target"), "aarch64") == 0
                       ? VMCE_ARCH_ARM64 : VMCE_ARCH_X86;
    g_array_append_val (vcpus, vcpu);
  }
  if (vcpus->len == 0) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_GENERIC, "QEMU reports no vCPUs");
    return FALSE;
  }
  for (guint i = 0; self->vcpus != NULL && i < self->vcpus->len; i++)
    g_free (g_array_index (self->vcpus, VmceVcpu, i).qom_path);
  g_clear_pointer (&self->vcpus, g_array_unref);
  self->vcpus = g_steal_pointer (&vcpus);
  return TRUE;
}

/* --- RAM layout ---------------------------------------------------------- */

typedef struct {
  VmceVm *vm;
  VmceRamLayout *layout;
  GPtrArray *blocks; /* still without a host address */
  guint next;
  guint64 probe_gpa;
  guint reads; /* of the whole layout: the guest may remap it meanwhile */
} VmceLayoutLoad;

static void
vmce_layout_load_free (VmceLayoutLoad *load)
{
  vmce_vm_unref (load->vm);
  g_clear_pointer (&load->layout, vmce_ram_layout_free);
  g_clear_pointer (&load->blocks, g_ptr_array_unref);
  g_free (load);
}

static void vmce_vm_layout_probe_next (GTask *task);
static void vmce_vm_layout_read_mtree (GTask *task);

/* A newer QEMU may print what vmced does not know: said once per VM */
static void
vmce_vm_say_layout_skipped (VmceVm *self, VmceRamLayout *layout)
{
  GPtrArray *skipped = vmce_ram_layout_get_skipped (layout);

  for (guint i = 0; i < skipped->len; i++) {
    const gchar *what = g_ptr_array_index (skipped, i);

    if (g_hash_table_contains (self->layout_said, what))
      continue;
    g_hash_table_add (self->layout_said, g_strdup (what));
    g_message ("vm %s: QEMU %s's 'info mtree -f': skipped %s", self->name,
               self->qemu_version != NULL ? self->qemu_version : "?", what);
  }
}

static void
vmce_vm_layout_gpa2hva_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  VmceLayoutLoad *load = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;

  text = vmce_qmp_client_hmp_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (text != NULL && !vmce_ram_layout_set_hva_from_gpa2hva (load->layout, load->probe_gpa, text, &error) &&
      g_error_matches (error, G_IO_ERROR, G_IO_ERROR_BUSY) && ++load->reads < VMCE_VM_LAYOUT_READS) {
    g_debug ("vm %s: %s: reading the RAM layout again", load->vm->name, error->message);
    vmce_vm_layout_read_mtree (g_steal_pointer (&task));
    return;
  }
  if (error != NULL) {
    g_prefix_error (&error, "cannot learn where RAM block %s is mapped: ",
                    (const gchar *) g_ptr_array_index (load->blocks, load->next));
    if (load->reads >= VMCE_VM_LAYOUT_READS)
      g_prefix_error (&error, "the guest remapped its memory on each of %u reads: ", load->reads);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  load->next++;
  vmce_vm_layout_probe_next (g_steal_pointer (&task));
}

static void
vmce_vm_layout_probe_next (GTask *task)
{
  VmceLayoutLoad *load = g_task_get_task_data (task);
  g_autofree gchar *cmd = NULL;
  const gchar *block;

  if (load->next >= load->blocks->len) {
    g_task_return_pointer (task, g_steal_pointer (&load->layout),
                           (GDestroyNotify) vmce_ram_layout_free);
    g_object_unref (task);
    return;
  }
  block = g_ptr_array_index (load->blocks, load->next);
  if (!vmce_ram_layout_probe_gpa (load->layout, block, &load->probe_gpa)) {
    g_task_return_new_error (task, VMCE_ERROR, VMCE_ERROR_GENERIC,
                             "RAM block %s has no guest address to ask about", block);
    g_object_unref (task);
    return;
  }
  cmd = g_strdup_printf ("gpa2hva 0x%" G_GINT64_MODIFIER "x", load->probe_gpa);
  vmce_qmp_client_hmp_async (load->vm->qmp, cmd, NULL, vmce_vm_layout_gpa2hva_cb, task);
}

static void
vmce_vm_layout_mtree_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = user_data;
  VmceLayoutLoad *load = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;

  text = vmce_qmp_client_hmp_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (text == NULL || !vmce_ram_layout_parse_mtree (load->layout, text, &error)) {
    g_prefix_error (&error, "cannot read the RAM layout: ");
    g_task_return_error (task, g_steal_pointer (&error));
    g_object_unref (task);
    return;
  }
  vmce_vm_say_layout_skipped (load->vm, load->layout);
  load->blocks = vmce_ram_layout_dup_unresolved_blocks (load->layout);
  vmce_vm_layout_probe_next (task);
}

/* (Again:) the flat view, from scratch */
static void
vmce_vm_layout_read_mtree (GTask *task)
{
  VmceLayoutLoad *load = g_task_get_task_data (task);

  g_clear_pointer (&load->layout, vmce_ram_layout_free);
  g_clear_pointer (&load->blocks, g_ptr_array_unref);
  load->layout = vmce_ram_layout_new ();
  load->next = 0;
  vmce_qmp_client_hmp_async (load->vm->qmp, "info mtree -f", NULL, vmce_vm_layout_mtree_cb, task);
}

static void
vmce_vm_layout_query_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  VmceRamLayout *layout;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  layout = ret != NULL ? vmce_ram_layout_new_from_qmp (ret, &error) : NULL;
  if (layout == NULL) {
    g_prefix_error (&error, "cannot read the RAM layout (query-ram-layout): ");
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_pointer (task, layout, (GDestroyNotify) vmce_ram_layout_free);
}

static void
vmce_vm_load_layout_async (VmceVm *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, NULL, callback, user_data);
  VmceLayoutLoad *load;

  if (self->qmp_ram_layout) {
    vmce_qmp_client_execute_async (self->qmp, "query-ram-layout", NULL, NULL,
                                   vmce_vm_layout_query_cb, task);
    return;
  }
  load = g_new0 (VmceLayoutLoad, 1);
  load->vm = vmce_vm_ref (self);
  g_task_set_task_data (task, load, (GDestroyNotify) vmce_layout_load_free);
  vmce_vm_layout_read_mtree (task);
}

typedef struct {
  VmceLayoutFreshFunc func;
  gpointer data;
} VmceLayoutWaiter;

/* Each waiter is called once; one may add waiters again */
static void
vmce_vm_layout_serve (VmceVm *self, GPtrArray **waiters)
{
  g_autoptr(VmceVm) keep = vmce_vm_ref (self);
  g_autoptr(GPtrArray) served = g_steal_pointer (waiters);

  *waiters = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; served != NULL && i < served->len; i++) {
    VmceLayoutWaiter *w = g_ptr_array_index (served, i);
    w->func (self, w->data);
  }
  if (self->layout_waiters->len == 0 && self->layout_inflight->len == 0 &&
      self->layout_wait_source != 0) {
    g_source_remove (self->layout_wait_source);
    self->layout_wait_source = 0;
  }
}

static gboolean
vmce_vm_layout_wait_over_cb (gpointer user_data)
{
  VmceVm *self = user_data;

  self->layout_wait_source = 0;
  g_message ("vm %s: no RAM layout within %u ms; deciding with the one there is", self->name,
             VMCE_LAYOUT_WAIT_MS);
  vmce_vm_layout_serve (self, &self->layout_inflight);
  vmce_vm_layout_serve (self, &self->layout_waiters);
  return G_SOURCE_REMOVE;
}

/* The VM is going: whoever waits decides now (and sees the state) */
static void
vmce_vm_layout_cancel_waiters (VmceVm *self)
{
  vmce_vm_layout_serve (self, &self->layout_inflight);
  vmce_vm_layout_serve (self, &self->layout_waiters);
}

void
vmce_vm_when_layout_fresh (VmceVm *self, VmceLayoutFreshFunc func, gpointer data)
{
  VmceLayoutWaiter *w = g_new0 (VmceLayoutWaiter, 1);

  w->func = func;
  w->data = data;
  g_ptr_array_add (self->layout_waiters, w);
  if (self->state != VMCE_VM_READY || self->qmp == NULL) {
    vmce_vm_layout_cancel_waiters (self);
    return;
  }
  if (self->layout_wait_source == 0)
    self->layout_wait_source = g_timeout_add (VMCE_LAYOUT_WAIT_MS, vmce_vm_layout_wait_over_cb,
                                              self);
  vmce_vm_refresh_layout (self);
}

static void
vmce_vm_refresh_layout_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  VmceRamLayout *layout = g_task_propagate_pointer (G_TASK (res), &error);

  self->layout_refreshing = FALSE;
  if (layout == NULL) {
    if (self->state == VMCE_VM_READY)
      g_warning ("vm %s: %s (keeping the old layout)", self->name, error->message);
  } else {
    g_clear_pointer (&self->layout, vmce_ram_layout_free);
    self->layout = layout;
    g_debug ("vm %s: RAM layout refreshed (%u ranges)", self->name,
             vmce_ram_layout_get_n_ranges (layout));
  }
  /* those who asked before this read began have their answer */
  vmce_vm_layout_serve (self, &self->layout_inflight);
  if (self->layout_refresh_again) {
    self->layout_refresh_again = FALSE;
    vmce_vm_refresh_layout (self);
  }
}

void
vmce_vm_refresh_layout (VmceVm *self)
{
  if (self->state != VMCE_VM_READY || self->qmp == NULL)
    return;
  if (self->layout_refreshing) {
    self->layout_refresh_again = TRUE;
    return;
  }
  self->layout_refreshing = TRUE;
  /* waiting from now on: this read is theirs */
  for (guint i = 0; i < self->layout_waiters->len; i++)
    g_ptr_array_add (self->layout_inflight, g_ptr_array_index (self->layout_waiters, i));
  g_ptr_array_set_free_func (self->layout_waiters, NULL);
  g_ptr_array_set_size (self->layout_waiters, 0);
  g_ptr_array_set_free_func (self->layout_waiters, g_free);
  vmce_vm_load_layout_async (self, vmce_vm_refresh_layout_cb, vmce_vm_ref (self));
}

static void
vmce_vm_refresh_vcpus_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (ret == NULL || !vmce_vm_parse_vcpus (self, ret, &error))
    g_warning ("vm %s: cannot refresh the vCPU list: %s", self->name, error->message);
}

/* --- QMP events ---------------------------------------------------------- */

static void
vmce_vm_qmp_event_cb (VmceQmpClient *qmp,
                      const gchar *name,
                      JsonObject *data,
                      gint64 time_us,
                      gpointer user_data)
{
  VmceVm *self = user_data;

  /* the guards see the guest running when they hear it resumed */
  if (g_strcmp0 (name, "RESUME") == 0) {
    self->running = TRUE;
    self->incoming = FALSE;
  }
  self->handler->qemu_event (self, name, data, time_us, self->handler_data);
  if (g_strcmp0 (name, "STOP") == 0) {
    self->running = FALSE;
    return;
  }
  /* a destination has loaded its state: after the guards, who tell that
   * end from a source's by it */
  if (g_strcmp0 (name, "MIGRATION") == 0 &&
      g_strcmp0 (vmce_json_object_get_string_opt (data, "status"), "completed") == 0) {
    self->incoming = FALSE;
    return;
  }
  if (g_strcmp0 (name, "RESET") == 0) {
    vmce_vm_refresh_layout (self);
    return;
  }
  /* what can move RAM in guest physical space or add vCPUs. QEMU 7.2 sends
   * no DEVICE_ADDED for a pc-dimm; the guest's ACPI _OST for it comes once
   * the guest took it, QEMU with qemu-patches/ says RAM_LAYOUT_CHANGED at
   * once (and a miss reads the layout again anyway) */
  if (g_strcmp0 (name, "RAM_LAYOUT_CHANGED") == 0 || /* qemu-patches/ 0007 */
      g_strcmp0 (name, "MEMORY_DEVICE_SIZE_CHANGE") == 0 ||
      g_strcmp0 (name, "ACPI_DEVICE_OST") == 0) {
    vmce_vm_refresh_layout (self);
    return;
  }
  if (g_strcmp0 (name, "DEVICE_ADDED") == 0 || g_strcmp0 (name, "DEVICE_DELETED") == 0) {
    vmce_vm_refresh_layout (self);
    if (self->state == VMCE_VM_READY)
      vmce_qmp_client_execute_async (self->qmp, "query-cpus-fast", NULL, NULL,
                                     vmce_vm_refresh_vcpus_cb, vmce_vm_ref (self));
  }
}

static void
vmce_vm_qmp_closed_cb (VmceQmpClient *qmp, GError *reason, gpointer user_data)
{
  VmceVm *self = user_data;

  if (self->state != VMCE_VM_READY)
    return;
  /* without the monitor nothing can be injected: QEMU is better off
   * handling its own signals than having them swallowed */
  vmce_vm_detach (self, reason->message);
}

/* --- ptrace -------------------------------------------------------------- */

static gboolean
vmce_vm_signal_stop_cb (VmcePtraceWatch *watch,
                        pid_t tid,
                        siginfo_t *info,
                        gint64 stop_time_us,
                        gpointer user_data)
{
  VmceVm *self = user_data;

  if (self->state != VMCE_VM_READY)
    return FALSE;
  return self->handler->signal_stop (self, tid, info, stop_time_us, self->handler_data);
}

void
vmce_vm_redeliver (VmceVm *self, const VmceStop *stop, gboolean again)
{
  self->handler->memory_error (self, stop, again, self->handler_data);
}

JsonNode *
vmce_vm_emit_event (VmceVm *self, VmceMceEvent *ev)
{
  self->n_events++;
  return self->handler->memory_error_event (self, ev, self->handler_data);
}

void
vmce_vm_emit_record (VmceVm *self, const gchar *event, JsonNode *record)
{
  self->handler->record (self, event, record, self->handler_data);
}

GPtrArray *
vmce_vm_get_peers (VmceVm *self)
{
  return self->handler->peers (self, self->handler_data);
}

static void
vmce_vm_attached_cb (VmcePtraceWatch *watch, gpointer user_data)
{
  VmceVm *self = user_data;
  g_autoptr(GTask) task = g_steal_pointer (&self->attach_task);

  if (task == NULL)
    return;
  self->state = VMCE_VM_READY;
  self->attached_time_us = g_get_real_time ();
  /* the attach record (the daemon's, with the vm's JSON) before anything
   * else of this QEMU is journaled */
  self->handler->attached (self, self->handler_data);
  g_message ("vm %s: attached to pid %d (%s, %u vCPU(s), %u threads)", self->name, self->pid,
             self->kvm ? "kvm" : "tcg", self->vcpus->len,
             vmce_ptrace_watch_get_n_threads (self->watch));
  g_task_return_boolean (task, TRUE);
}

static void
vmce_vm_exited_cb (VmcePtraceWatch *watch, int wait_status, gpointer user_data)
{
  VmceVm *self = user_data;
  g_autofree gchar *reason = NULL;

  if (WIFSIGNALED (wait_status))
    reason = g_strdup_printf ("QEMU was killed by signal %d (%s)", WTERMSIG (wait_status),
                              g_strsignal (WTERMSIG (wait_status)));
  else
    reason = g_strdup_printf ("QEMU exited with status %d", WEXITSTATUS (wait_status));
  if (self->attach_task != NULL) {
    g_autoptr(GTask) task = g_steal_pointer (&self->attach_task);
    g_task_return_new_error (task, VMCE_ERROR, VMCE_ERROR_NOT_FOUND, "%s while being attached",
                             reason);
  }
  g_message ("vm %s: %s", self->name, reason);
  vmce_vm_set_gone (self, "vm-exit", reason);
}

static void
vmce_vm_detached_cb (VmcePtraceWatch *watch, gpointer user_data)
{
  VmceVm *self = user_data;

  if (self->state == VMCE_VM_DETACHING)
    vmce_vm_set_gone (self, "detach", self->detach_reason);
}

static const VmcePtraceWatchFuncs vmce_vm_ptrace_funcs = {
  .signal_stop = vmce_vm_signal_stop_cb,
  .attached = vmce_vm_attached_cb,
  .exited = vmce_vm_exited_cb,
  .detached = vmce_vm_detached_cb,
};

/* --- attaching ----------------------------------------------------------- */

static void
vmce_vm_attach_fail (VmceVm *self, GError *error)
{
  g_autoptr(GTask) task = g_steal_pointer (&self->attach_task);

  self->state = VMCE_VM_GONE;
  /* a QEMU that exits while vmced attaches makes its monitor refuse, hang
   * up or go silent: say what happened, not only what it looked like */
  if (self->pid > 0 && !vmce_proc_is_alive (self->pid) && !g_error_matches (error, VMCE_ERROR, VMCE_ERROR_NOT_FOUND))
    g_prefix_error (&error, "pid %d exited while vmced attached: ", self->pid);
  if (self->qmp != NULL) {
    g_signal_handlers_disconnect_by_data (self->qmp, self);
    vmce_qmp_client_close (self->qmp, NULL);
  }
  g_clear_pointer (&self->watch, vmce_ptrace_watch_free);
  if (task != NULL)
    g_task_return_error (task, error);
  else
    g_error_free (error);
}

static void
vmce_vm_attach_trace (VmceVm *self)
{
  g_autoptr(GError) error = NULL;

  /* before any thread of it is stopped: reading the page table of a large
   * guest takes a while, and a stopped thread would wait for it */
  vmce_vm_scan_poisoned (self);
  self->watch = vmce_ptrace_watch_new (self->pid, &vmce_vm_ptrace_funcs, self);
  if (!vmce_ptrace_watch_attach (self->watch, &error)) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  /* continues in vmce_vm_attached_cb() */
}

static void
vmce_vm_attach_caps_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (self->attach_task == NULL)
    return;
  if (ret == NULL)
    g_warning ("vm %s: cannot turn QEMU's migration events on (%s): a migration of a VM with "
               "poisoned memory is not seen",
               self->name, error->message);
  vmce_vm_attach_trace (self);
}

/* Whether it is a migration's destination, still loading; and, for a QEMU
 * of its own (libvirt turns them on for its domains), the MIGRATION events
 * that tell vmced a migration starts (migration-guard.c) */
static void
vmce_vm_attach_status_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  g_autoptr(JsonNode) args = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (self->attach_task == NULL)
    return;
  if (ret == NULL) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  if (JSON_NODE_HOLDS_OBJECT (ret)) {
    const gchar *status = vmce_json_object_get_string_opt (json_node_get_object (ret), "status");
    self->incoming = g_strcmp0 (status, "inmigrate") == 0;
    self->running = g_strcmp0 (status, "running") == 0;
  }
  /* libvirt sets the capabilities it needs on the monitor it lends */
  if (self->monitor_owner != NULL) {
    vmce_vm_attach_trace (self);
    return;
  }
  args = json_from_string ("{\"capabilities\": [{\"capability\": \"events\", \"state\": true}]}",
                           NULL);
  vmce_qmp_client_execute_async (self->qmp, "migrate-set-capabilities", args, NULL,
                                 vmce_vm_attach_caps_cb, vmce_vm_ref (self));
}

/* QEMU writes these into guest RAM again at every reset, before it says
 * so: a poisoned page there must be replaced then (reset-guard.c) */
static void
vmce_vm_attach_roms_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;

  text = vmce_qmp_client_hmp_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (self->attach_task == NULL)
    return;
  if (text != NULL)
    self->roms = vmce_rom_blobs_parse (text, &error);
  if (self->roms == NULL)
    g_warning ("vm %s: cannot read QEMU's ROM list (%s): a poisoned page of a ROM blob in RAM "
               "is replaced only after QEMU has rewritten it at reset",
               self->name, error->message);
  vmce_qmp_client_execute_async (self->qmp, "query-status", NULL, NULL, vmce_vm_attach_status_cb,
                                 vmce_vm_ref (self));
}

static void
vmce_vm_attach_layout_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  VmceRamLayout *layout = g_task_propagate_pointer (G_TASK (res), &error);

  if (self->attach_task == NULL) {
    g_clear_pointer (&layout, vmce_ram_layout_free);
    return;
  }
  if (layout == NULL) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  self->layout = layout;
  vmce_qmp_client_hmp_async (self->qmp, "info roms", NULL, vmce_vm_attach_roms_cb,
                             vmce_vm_ref (self));
}

typedef enum {
  VMCE_QUERY_NAME,
  VMCE_QUERY_VERSION,
  VMCE_QUERY_KVM,
  VMCE_QUERY_CPUS,
  VMCE_QUERY_VENDOR,
  VMCE_QUERY_FAMILY,
  VMCE_QUERY_MODEL,
  VMCE_QUERY_SUCCOR,
  VMCE_QUERY_COMMANDS,
  VMCE_QUERY_RAS,     /* Arm64 only, as the next */
  VMCE_QUERY_MACHINE,
  VMCE_QUERY_ACPI,
  VMCE_QUERY_DONE,
} VmceAttachQuery;

typedef struct {
  VmceVm *vm;
  VmceAttachQuery query;
} VmceAttachStep;

static void vmce_vm_attach_query (VmceVm *self, VmceAttachQuery query);

/* query-version: {"qemu": {"major": 10, "minor": 0, "micro": 2},
 * "package": " (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)"}. What QEMU does
 * by itself with a memory error differs by version; the journal names it */
static gboolean
vmce_vm_take_version (VmceVm *self, JsonNode *ret, GError **error)
{
  JsonObject *obj = JSON_NODE_HOLDS_OBJECT (ret) ? json_node_get_object (ret) : NULL;
  JsonNode *qemu = obj != NULL ? json_object_get_member (obj, "qemu") : NULL;
  JsonObject *v = qemu != NULL && JSON_NODE_HOLDS_OBJECT (qemu) ? json_node_get_object (qemu) : NULL;
  const gchar *package = obj != NULL ? vmce_json_object_get_string_opt (obj, "package") : NULL;
  g_autofree gchar *trimmed = NULL;

  if (v == NULL || !json_object_has_member (v, "major") || !json_object_has_member (v, "minor")) {
    g_set_error_literal (error, VMCE_ERROR, VMCE_ERROR_GENERIC,
                         "query-version did not return a QEMU version");
    return FALSE;
  }
  g_free (self->qemu_version);
  self->qemu_version = g_strdup_printf ("%" G_GINT64_FORMAT ".%" G_GINT64_FORMAT ".%" G_GINT64_FORMAT,
                                        json_object_get_int_member (v, "major"),
                                        json_object_get_int_member (v, "minor"),
                                        json_object_get_int_member_with_default (v, "micro", 0));
  /* QEMU puts the package in parentheses after a space */
  trimmed = g_strstrip (g_strdup (package != NULL ? package : ""));
  if (trimmed[0] == '(' && g_str_has_suffix (trimmed, ")")) {
    trimmed[strlen (trimmed) - 1] = '\0';
    memmove (trimmed, trimmed + 1, strlen (trimmed));
  }
  g_free (self->qemu_package);
  self->qemu_package = trimmed[0] != '\0' ? g_steal_pointer (&trimmed) : NULL;
  return TRUE;
}

static gboolean
vmce_vm_attach_take_answer (VmceVm *self, VmceAttachQuery query, JsonNode *ret, GError **error)
{
  switch (query) {
  case VMCE_QUERY_NAME:
    if (self->name == NULL && JSON_NODE_HOLDS_OBJECT (ret))
      self->name = g_strdup (vmce_json_object_get_string_opt (json_node_get_object (ret), "name"));
    if (self->name == NULL)
      self->name = g_strdup_printf ("qemu-%d", self->pid);
    return TRUE;
  case VMCE_QUERY_VERSION:
    return vmce_vm_take_version (self, ret, error);
  case VMCE_QUERY_KVM:
    if (JSON_NODE_HOLDS_OBJECT (ret))
      self->kvm = json_object_get_boolean_member_with_default (json_node_get_object (ret),
                                                               "enabled", FALSE);
    return TRUE;
  case VMCE_QUERY_CPUS:
    return vmce_vm_parse_vcpus (self, ret, error);
  case VMCE_QUERY_VENDOR:
    if (JSON_NODE_HOLDS_VALUE (ret) && json_node_get_value_type (ret) == G_TYPE_STRING)
      g_strlcpy (self->cpu_model.vendor, json_node_get_string (ret),
                 sizeof self->cpu_model.vendor);
    return TRUE;
  case VMCE_QUERY_FAMILY:
    if (JSON_NODE_HOLDS_VALUE (ret))
      self->cpu_model.family = (guint) json_node_get_int (ret);
    return TRUE;
  case VMCE_QUERY_MODEL:
    if (JSON_NODE_HOLDS_VALUE (ret))
      self->cpu_model.model = (guint) json_node_get_int (ret);
    return TRUE;
  case VMCE_QUERY_SUCCOR:
    self->cpu_model.succor = JSON_NODE_HOLDS_VALUE (ret) && json_node_get_boolean (ret);
    return TRUE;
  case VMCE_QUERY_COMMANDS:
    /* qemu-patches/ adds inject-mce: no HMP text, and an answer that does
     * not wait for the vCPU */
    for (guint i = 0; JSON_NODE_HOLDS_ARRAY (ret) && i < json_array_get_length (json_node_get_array (ret)); i++) {
      JsonNode *cmd = json_array_get_element (json_node_get_array (ret), i);
      const gchar *name = JSON_NODE_HOLDS_OBJECT (cmd)
        ? vmce_json_object_get_string_opt (json_node_get_object (cmd), "name") : NULL;
      if (g_strcmp0 (name, "inject-mce") == 0)
        self->qmp_inject_mce = TRUE;
      /* and query-ram-layout: the layout as data, in one command */
      else if (g_strcmp0 (name, "query-ram-layout") == 0)
        self->qmp_ram_layout = TRUE;
      /* and x-hwpoison-page-add: QEMU's own list of poisoned pages */
      else if (g_strcmp0 (name, "x-hwpoison-page-add") == 0)
        self->qmp_hwpoison_add = TRUE;
      /* an Arm64 guest's GHES: QEMU 10.2's command, and vmce's patch's */
      else if (g_strcmp0 (name, VMCE_QMP_INJECT_GHES) == 0)
        self->arm.ghes_command = TRUE;
      else if (g_strcmp0 (name, VMCE_QMP_INJECT_SEA) == 0)
        self->arm.sea_command = TRUE;
    }
    return TRUE;
  case VMCE_QUERY_RAS:
    self->arm.ras = JSON_NODE_HOLDS_VALUE (ret) && json_node_get_value_type (ret) == G_TYPE_BOOLEAN &&
                    json_node_get_boolean (ret);
    return TRUE;
  case VMCE_QUERY_MACHINE:
    g_free (self->arm.machine);
    self->arm.machine = JSON_NODE_HOLDS_VALUE (ret) && json_node_get_value_type (ret) == G_TYPE_STRING
                            ? g_strdup (json_node_get_string (ret)) : NULL;
    return TRUE;
  case VMCE_QUERY_ACPI:
    /* any answer: there is an ACPI device (the error is "missing ACPI
     * device", hw/acpi/acpi-qmp-cmds.c) */
    self->arm.acpi = TRUE;
    return TRUE;
  case VMCE_QUERY_DONE:
    break;
  }
  return TRUE;
}

/* What the guest will see of MCA recovery. SUCCOR is a QOM property of
 * x86 CPUs since QEMU 9.1; MCG_SER_P is in QEMU's MCG_CAP whenever the CPU
 * model has MCA (every model vmce boots), but KVM on an AMD host drops it */
static void
vmce_vm_settle_cpu_model (VmceVm *self)
{
  vmce_read_host_vendor (self->host_vendor);
  self->cpu_model.ser_p = !(self->kvm && (g_strcmp0 (self->host_vendor, "AuthenticAMD") == 0 ||
                                          g_strcmp0 (self->host_vendor, "HygonGenuine") == 0));
}

/* An Arm64 QEMU that cannot tell its guest of some errors: said once, at
 * attach, as well as in each refused error's record */
static void
vmce_vm_say_arm (VmceVm *self)
{
  g_autofree gchar *line = NULL;

  if (self->arch != VMCE_ARCH_ARM64)
    return;
  line = vmce_decide_arm_said_at_attach (&self->arm);
  if (line != NULL)
    g_message ("vm %s: %s", self->name, line);
}

static void
vmce_vm_attach_query_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree VmceAttachStep *step = user_data;
  g_autoptr(VmceVm) self = step->vm;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (self->attach_task == NULL)
    return;
  /* QEMU before 9.1 has no such property: no SUCCOR; an Arm machine
   * other than virt has no ras (and so no GHES) */
  if (ret == NULL &&
      (step->query == VMCE_QUERY_SUCCOR || step->query == VMCE_QUERY_RAS || step->query == VMCE_QUERY_MACHINE ||
       step->query == VMCE_QUERY_ACPI) &&
      g_error_matches (error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_COMMAND)) {
    vmce_vm_attach_query (self, step->query + 1);
    return;
  }
  if (ret == NULL || !vmce_vm_attach_take_answer (self, step->query, ret, &error)) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  vmce_vm_attach_query (self, step->query + 1);
}

static void
vmce_vm_attach_query (VmceVm *self, VmceAttachQuery query)
{
  VmceAttachStep *step;
  const gchar *command = NULL;
  g_autoptr(JsonNode) args = NULL;
  const gchar *cpu_path = self->vcpus != NULL && self->vcpus->len > 0
                              ? g_array_index (self->vcpus, VmceVcpu, 0).qom_path
                              : NULL;

  switch (query) {
  case VMCE_QUERY_NAME:
    command = "query-name";
    break;
  case VMCE_QUERY_VERSION:
    command = "query-version";
    break;
  case VMCE_QUERY_KVM:
    command = "query-kvm";
    break;
  case VMCE_QUERY_CPUS:
    command = "query-cpus-fast";
    break;
  case VMCE_QUERY_COMMANDS:
    command = "query-commands";
    break;
  case VMCE_QUERY_VENDOR:
  case VMCE_QUERY_FAMILY:
  case VMCE_QUERY_MODEL:
  case VMCE_QUERY_SUCCOR:
    /* x86 CPU properties: an Arm CPU has none of them */
    if (cpu_path == NULL || self->arch != VMCE_ARCH_X86) {
      vmce_vm_attach_query (self, VMCE_QUERY_COMMANDS);
      return;
    }
    command = "qom-get";
    args = vmce_vm_qom_get_args (cpu_path, query == VMCE_QUERY_VENDOR   ? "vendor"
                                           : query == VMCE_QUERY_FAMILY ? "family"
                                           : query == VMCE_QUERY_MODEL  ? "model"
                                                                        : "succor");
    break;
  case VMCE_QUERY_RAS:
  case VMCE_QUERY_MACHINE:
  case VMCE_QUERY_ACPI:
    if (self->arch != VMCE_ARCH_ARM64) {
      vmce_vm_attach_query (self, VMCE_QUERY_DONE);
      return;
    }
    if (query == VMCE_QUERY_ACPI) {
      command = "query-acpi-ospm-status";
      break;
    }
    command = "qom-get";
    args = vmce_vm_qom_get_args ("/machine", query == VMCE_QUERY_RAS ? "ras" : "type");
    break;
  case VMCE_QUERY_DONE:
    vmce_vm_say_arm (self);
    vmce_vm_settle_cpu_model (self);
    vmce_vm_load_layout_async (self, vmce_vm_attach_layout_cb, vmce_vm_ref (self));
    return;
  }
  step = g_new0 (VmceAttachStep, 1);
  step->vm = vmce_vm_ref (self);
  step->query = query;
  vmce_qmp_client_execute_async (self->qmp, command, args, NULL, vmce_vm_attach_query_cb, step);
}

static void
vmce_vm_handshake_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;

  if (!vmce_qmp_client_handshake_finish (VMCE_QMP_CLIENT (source), res, &error)) {
    if (self->attach_task != NULL)
      vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  vmce_vm_attach_query (self, VMCE_QUERY_NAME);
}

static gboolean
vmce_vm_check_process (VmceVm *self, GError **error)
{
  gint64 tracer = 0;

  if (self->pid <= 0 || !vmce_proc_status_number (self->pid, "TracerPid", &tracer, NULL)) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_FOUND, "no process with pid %d", self->pid);
    return FALSE;
  }
  if (!vmce_proc_is_alive (self->pid)) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_FOUND,
                 "pid %d has exited (a zombie its parent has not reaped yet)", self->pid);
    return FALSE;
  }
  /* say so before the monitor, which a second client would wait on */
  if (tracer != 0) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_BUSY,
                 "pid %d is already traced by pid %" G_GINT64_FORMAT
                 " (another vmced, or a debugger)", self->pid, tracer);
    return FALSE;
  }
  return TRUE;
}

void
vmce_vm_attach_async (VmceVm *self, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  g_return_if_fail (self->attach_task == NULL && self->qmp == NULL);
  self->attach_task = g_task_new (NULL, NULL, callback, user_data);
  self->state = VMCE_VM_ATTACHING;
  if (!vmce_vm_check_process (self, &error)) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  if (self->qmp_socket != NULL)
    self->qmp = vmce_qmp_client_new (self->qmp_socket, self->name != NULL ? self->name : self->qmp_path);
  else
    self->qmp = vmce_qmp_client_connect (self->qmp_path, &error);
  if (self->qmp == NULL) {
    vmce_vm_attach_fail (self, g_steal_pointer (&error));
    return;
  }
  g_signal_connect (self->qmp, "event", G_CALLBACK (vmce_vm_qmp_event_cb), self);
  g_signal_connect (self->qmp, "closed", G_CALLBACK (vmce_vm_qmp_closed_cb), self);
  vmce_qmp_client_handshake_async (self->qmp, NULL, vmce_vm_handshake_cb, vmce_vm_ref (self));
}

gboolean
vmce_vm_attach_finish (VmceVm *self, GAsyncResult *res, GError **error)
{
  return g_task_propagate_boolean (G_TASK (res), error);
}

/* --- detaching ----------------------------------------------------------- */

static void
vmce_vm_set_gone (VmceVm *self, const gchar *type, const gchar *reason)
{
  g_autoptr(VmceVm) keep = vmce_vm_ref (self);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  gboolean was_ready = self->state == VMCE_VM_READY || self->state == VMCE_VM_DETACHING;

  if (self->state == VMCE_VM_GONE)
    return;
  self->state = VMCE_VM_GONE;
  vmce_vm_layout_cancel_waiters (self);
  self->handler->letting_go (self, reason != NULL ? reason : "detached", FALSE, self->handler_data);
  if (self->qmp != NULL) {
    g_signal_handlers_disconnect_by_data (self->qmp, self);
    vmce_qmp_client_close (self->qmp, NULL);
  }
  if (was_ready) {
    json_builder_begin_object (b);
    vmce_vm_begin_record (self, b, type);
    json_builder_set_member_name (b, "reason");
    if (reason != NULL)
      json_builder_add_string_value (b, reason);
    else
      json_builder_add_null_value (b);
    json_builder_set_member_name (b, "events");
    json_builder_add_int_value (b, (gint64) self->n_events);
    json_builder_end_object (b);
    record = json_builder_get_root (b);
    vmce_vm_emit_record (self, "VM_DETACHED", record);
  }
  self->handler->gone (self, was_ready, g_strcmp0 (type, "vm-exit") == 0, self->handler_data);
}

void
vmce_vm_detach (VmceVm *self, const gchar *reason)
{
  g_autoptr(VmceVm) keep = vmce_vm_ref (self);

  if (self->state != VMCE_VM_READY)
    return;
  self->state = VMCE_VM_DETACHING;
  self->detach_reason = g_strdup (reason);
  vmce_vm_layout_cancel_waiters (self);
  self->handler->letting_go (self, reason != NULL ? reason : "detached", TRUE, self->handler_data);
  if (self->watch == NULL) {
    vmce_vm_set_gone (self, "detach", reason);
    return;
  }
  g_message ("vm %s: detaching%s%s", self->name, reason != NULL ? ": " : "",
             reason != NULL ? reason : "");
  /* vmce_vm_detached_cb() finishes, maybe at once */
  vmce_ptrace_watch_detach (self->watch);
}

void
vmce_vm_shutdown_sync (VmceVm *self)
{
  g_autoptr(VmceVm) keep = vmce_vm_ref (self);

  if (self->state == VMCE_VM_GONE)
    return;
  if (self->state == VMCE_VM_READY)
    self->state = VMCE_VM_DETACHING;
  vmce_vm_layout_cancel_waiters (self);
  self->handler->letting_go (self, "vmced is stopping", TRUE, self->handler_data);
  if (self->watch != NULL)
    vmce_ptrace_watch_detach_sync (self->watch);
  vmce_vm_set_gone (self, "detach", "vmced is stopping");
}

void
vmce_vm_begin_record (VmceVm *self, JsonBuilder *b, const gchar *type)
{
  g_autofree gchar *time = vmce_format_time (g_get_real_time ());

  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, type);
  json_builder_set_member_name (b, "time");
  json_builder_add_string_value (b, time);
  json_builder_set_member_name (b, "vm");
  json_builder_add_string_value (b, self->name);
  if (self->uuid != NULL) {
    json_builder_set_member_name (b, "uuid");
    json_builder_add_string_value (b, self->uuid);
  }
  json_builder_set_member_name (b, "pid");
  json_builder_add_int_value (b, self->pid);
  json_builder_set_member_name (b, "qemu_id");
  json_builder_add_string_value (b, self->qemu_id);
}

/* --- lookups and status ---------------------------------------------------- */

const VmceVcpu *
vmce_vm_find_vcpu_by_tid (VmceVm *self, pid_t tid)
{
  for (guint i = 0; self->vcpus != NULL && i < self->vcpus->len; i++) {
    const VmceVcpu *vcpu = &g_array_index (self->vcpus, VmceVcpu, i);
    if (vcpu->tid == tid)
      return vcpu;
  }
  return NULL;
}

const VmceVcpu *
vmce_vm_find_vcpu (VmceVm *self, guint index)
{
  for (guint i = 0; self->vcpus != NULL && i < self->vcpus->len; i++) {
    const VmceVcpu *vcpu = &g_array_index (self->vcpus, VmceVcpu, i);
    if (vcpu->index == index)
      return vcpu;
  }
  return NULL;
}

gchar *
vmce_vm_describe_thread (VmceVm *self, pid_t tid)
{
  const VmceVcpu *vcpu = vmce_vm_find_vcpu_by_tid (self, tid);
  g_autofree gchar *path = NULL;
  g_autofree gchar *comm = NULL;

  if (tid == self->pid)
    return g_strdup ("main");
  if (vcpu != NULL)
    return g_strdup_printf ("vcpu %u", vcpu->index);
  path = g_strdup_printf ("/proc/%d/task/%d/comm", self->pid, tid);
  if (g_file_get_contents (path, &comm, NULL, NULL))
    return g_strdup (g_strstrip (comm));
  return g_strdup ("other");
}

VmcePoisonedPage *
vmce_vm_find_poisoned (VmceVm *self, guint64 gpa)
{
  return vmce_poison_set_lookup (self->poisoned, gpa);
}

VmcePoisonedPage *
vmce_vm_find_host_poisoned (VmceVm *self, guint64 hva, guint64 *gpa)
{
  VmcePoisonedPage *p;

  if (self->layout == NULL || !vmce_ram_layout_hva_to_gpa (self->layout, hva, gpa, NULL))
    return NULL;
  p = vmce_poison_set_lookup (self->poisoned, *gpa);
  return p != NULL && p->host_poisoned ? p : NULL;
}

typedef struct {
  VmceVm *vm;
  gchar *what;
} VmceVmFire;

static void
vmce_vm_fire_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceVmFire *f = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);

  if (ret == NULL)
    g_warning ("vm %s: cannot %s: %s", f->vm->name, f->what, error->message);
  vmce_vm_unref (f->vm);
  g_free (f->what);
  g_free (f);
}

void
vmce_vm_execute_or_warn (VmceVm *self, const gchar *command, JsonNode *args, const gchar *what)
{
  VmceVmFire *f = g_new0 (VmceVmFire, 1);

  f->vm = vmce_vm_ref (self);
  f->what = g_strdup (what);
  vmce_qmp_client_execute_async (self->qmp, command, args, NULL, vmce_vm_fire_cb, f);
}

static void
vmce_vm_stop_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VmceVm) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res,
                                                            NULL, &error);

  if (ret == NULL)
    g_warning ("vm %s: cannot pause it: %s", self->name, error->message);
}

void
vmce_vm_pause (VmceVm *self, const gchar *why)
{
  g_warning ("vm %s: pausing it: %s", self->name, why);
  if (self->qmp != NULL)
    vmce_qmp_client_execute_async (self->qmp, "stop", NULL, NULL, vmce_vm_stop_cb,
                                   vmce_vm_ref (self));
}

void
vmce_vm_record_poisoned (VmceVm *self, const VmceMceEvent *ev)
{
  (void) vmce_poison_set_add_event (self->poisoned, ev);
}

void
vmce_vm_set_poisoned_from (VmceVm *self, const gchar *from)
{
  g_free (self->poisoned_from);
  self->poisoned_from = g_strdup (from);
}

void
vmce_vm_restore_poisoned (VmceVm *self, GHashTable *pages, const gchar *from)
{
  g_hash_table_unref (self->poisoned);
  self->poisoned = pages;
  vmce_vm_set_poisoned_from (self, from);
}

/* What QEMU's own page table says is poisoned, beside what the journal
 * said: a record lost in a crash, an error while no vmced watched. A
 * simulated page that a killed vmced could not give back is still
 * PROT_NONE: a touch must be told as of a poisoned page, not passed to QEMU
 * as a plain SIGSEGV. */
static void
vmce_vm_scan_poisoned (VmceVm *self)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  guint n_new = 0, n_away = 0;
  gint64 start = g_get_monotonic_time ();

  vmas = vmce_vma_table_read (self->pid, &error);
  for (guint i = 0; vmas != NULL && i < vmce_ram_layout_get_n_ranges (self->layout); i++) {
    const VmceRamRange *r = vmce_ram_layout_get_range (self->layout, i);
    g_autoptr(GArray) found = NULL;
    guint64 hva = 0;

    if (r->rom || !vmce_ram_layout_gpa_to_hva (self->layout, r->gpa, &hva, NULL))
      continue;
    found = vmce_poison_scan (self->pid, vmas, hva, r->size, &error);
    if (found == NULL)
      break;
    for (guint j = 0; j < found->len; j++) {
      const VmcePoisonFound *f = &g_array_index (found, VmcePoisonFound, j);
      guint64 gpa = r->gpa + (f->hva - hva);
      VmcePoisonedPage *p = vmce_poison_set_lookup (self->poisoned, gpa);

      if (p == NULL && vmce_poison_set_add_found (self->poisoned, gpa, f->hva, f->taken_away))
        n_new++;
      if (f->taken_away && self->handler->found_taken_away (self, f->hva, gpa, self->handler_data))
        n_away++;
    }
  }
  if (error != NULL) {
    g_warning ("vm %s: cannot look for poisoned pages in QEMU's page table: %s", self->name,
               error->message);
    return;
  }
  g_debug ("vm %s: page table scanned in %" G_GINT64_FORMAT " us", self->name,
           g_get_monotonic_time () - start);
  if (n_away > 0)
    g_message ("vm %s: %u page(s) are still taken away by an earlier vmced: a touch is reported "
               "as a consumed memory error, a reset replaces them",
               self->name, n_away);
  if (n_new > 0) {
    g_autofree gchar *from = g_strdup_printf ("%s; %u more found in QEMU's page table (no "
                                              "journal record)",
                                              self->poisoned_from, n_new);
    g_message ("vm %s: %u poisoned page(s) found in QEMU's page table that no journal record "
               "explains: a reset replaces them",
               self->name, n_new);
    vmce_vm_set_poisoned_from (self, from);
  }
}

/* --- life cycle ------------------------------------------------------------ */

VmceVm *
vmce_vm_new (const VmceVmHandler *handler,
             gpointer handler_data,
             pid_t pid,
             const gchar *qmp_path,
             const gchar *name,
             const gchar *agent_path,
             VmcePolicy policy)
{
  VmceVm *self = g_new0 (VmceVm, 1);

  self->policy = policy;
  self->ref_count = 1;
  self->handler = handler;
  self->handler_data = handler_data;
  self->pid = pid;
  self->qmp_path = g_strdup (qmp_path);
  self->name = g_strdup (name);
  self->agent_path = g_strdup (agent_path);
  /* NULL if the process is gone: attaching says so */
  self->qemu_id = vmce_proc_identity (pid, NULL);
  self->poisoned = vmce_poison_set_new ();
  self->poisoned_from = g_strdup ("none: no poisoned page before vmced attached");
  self->layout_waiters = g_ptr_array_new_with_free_func (g_free);
  self->layout_inflight = g_ptr_array_new_with_free_func (g_free);
  self->layout_said = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return self;
}

void
vmce_vm_set_monitor (VmceVm *self, GSocket *socket, gpointer owner, GDestroyNotify owner_free)
{
  g_set_object (&self->qmp_socket, socket);
  self->monitor_owner = owner;
  self->monitor_owner_free = owner_free;
}

void
vmce_vm_set_uuid (VmceVm *self, const gchar *uuid)
{
  g_free (self->uuid);
  self->uuid = g_strdup (uuid);
}

VmceVm *
vmce_vm_ref (VmceVm *self)
{
  g_atomic_int_inc (&self->ref_count);
  return self;
}

void
vmce_vm_unref (VmceVm *self)
{
  if (self == NULL || !g_atomic_int_dec_and_test (&self->ref_count))
    return;
  /* the layers' state first: it may still look at the session */
  g_datalist_clear (&self->layer_data);
  g_clear_pointer (&self->watch, vmce_ptrace_watch_free);
  if (self->qmp != NULL)
    g_signal_handlers_disconnect_by_data (self->qmp, self);
  g_clear_object (&self->qmp);
  g_clear_pointer (&self->layout, vmce_ram_layout_free);
  for (guint i = 0; self->vcpus != NULL && i < self->vcpus->len; i++)
    g_free (g_array_index (self->vcpus, VmceVcpu, i).qom_path);
  g_clear_pointer (&self->vcpus, g_array_unref);
  g_hash_table_unref (self->poisoned);
  g_free (self->poisoned_from);
  g_clear_pointer (&self->roms, vmce_rom_blobs_free);
  /* served by then: the VM went (detach, gone) before its last ref */
  g_ptr_array_unref (self->layout_waiters);
  g_ptr_array_unref (self->layout_inflight);
  if (self->layout_wait_source != 0)
    g_source_remove (self->layout_wait_source);
  g_free (self->qemu_id);
  g_free (self->qemu_version);
  g_free (self->qemu_package);
  g_free (self->arm.machine);
  g_hash_table_unref (self->layout_said);
  g_free (self->detach_reason);
  g_free (self->name);
  g_free (self->uuid);
  g_clear_object (&self->qmp_socket);
  if (self->monitor_owner != NULL && self->monitor_owner_free != NULL)
    self->monitor_owner_free (self->monitor_owner);
  g_free (self->qmp_path);
  g_free (self->agent_path);
  g_clear_pointer (&self->agent, vmce_agent_client_unref);
  g_free (self);
}

/* --- getters ------------------------------------------------------------- */

const gchar *
vmce_vm_get_name (VmceVm *self)
{
  return self->name;
}

pid_t
vmce_vm_get_pid (VmceVm *self)
{
  return self->pid;
}

const gchar *
vmce_vm_get_qemu_id (VmceVm *self)
{
  return self->qemu_id;
}

const gchar *
vmce_vm_get_uuid (VmceVm *self)
{
  return self->uuid;
}

VmceVmState
vmce_vm_get_state (VmceVm *self)
{
  return self->state;
}

VmceQmpClient *
vmce_vm_get_qmp (VmceVm *self)
{
  return self->qmp;
}

const gchar *
vmce_vm_get_qmp_path (VmceVm *self)
{
  return self->qmp_path;
}

const gchar *
vmce_vm_get_agent_path (VmceVm *self)
{
  return self->agent_path;
}

/* One client for everyone who asks the guest (vmcectl's requests, the
 * guest-answer lookups): QEMU serves the port to one client at a time, and
 * the client queues the requests */
VmceAgentClient *
vmce_vm_get_agent (VmceVm *self)
{
  g_autofree gchar *who = NULL;

  if (self->agent_path == NULL)
    return NULL;
  if (self->agent != NULL)
    return self->agent;
  who = g_strdup_printf ("the guest agent of vm %s", self->name);
  self->agent = vmce_agent_client_new (self->agent_path, who);
  return self->agent;
}

const gchar *
vmce_vm_get_qemu_version (VmceVm *self)
{
  return self->qemu_version;
}

const gchar *
vmce_vm_get_qemu_package (VmceVm *self)
{
  return self->qemu_package;
}

gboolean
vmce_vm_has_query_ram_layout (VmceVm *self)
{
  return self->qmp_ram_layout;
}

const gchar *
vmce_vm_get_host_vendor (VmceVm *self)
{
  return self->host_vendor;
}

gint64
vmce_vm_get_attached_time (VmceVm *self)
{
  return self->attached_time_us;
}

const gchar *
vmce_vm_get_poisoned_from (VmceVm *self)
{
  return self->poisoned_from;
}

void
vmce_vm_layers_to_json (VmceVm *self, JsonBuilder *b)
{
  self->handler->to_json (self, b, self->handler_data);
}

VmcePtraceWatch *
vmce_vm_get_watch (VmceVm *self)
{
  return self->watch;
}

VmceRamLayout *
vmce_vm_get_layout (VmceVm *self)
{
  return self->layout;
}

GArray *
vmce_vm_get_vcpus (VmceVm *self)
{
  return self->vcpus;
}

const VmceCpuModel *
vmce_vm_get_cpu_model (VmceVm *self)
{
  return &self->cpu_model;
}

gboolean
vmce_vm_is_kvm (VmceVm *self)
{
  return self->kvm;
}

gboolean
vmce_vm_has_inject_mce (VmceVm *self)
{
  return self->qmp_inject_mce;
}

VmceArch
vmce_vm_get_arch (VmceVm *self)
{
  return self->arch;
}

const VmceArmQemu *
vmce_vm_get_arm_qemu (VmceVm *self)
{
  return &self->arm;
}

gboolean
vmce_vm_has_hwpoison_add (VmceVm *self)
{
  return self->qmp_hwpoison_add;
}

gboolean
vmce_vm_is_running (VmceVm *self)
{
  return self->running;
}

gboolean
vmce_vm_is_incoming (VmceVm *self)
{
  return self->incoming;
}

VmcePolicy
vmce_vm_get_policy (VmceVm *self)
{
  return self->policy;
}

void
vmce_vm_set_policy (VmceVm *self, VmcePolicy policy)
{
  self->policy = policy;
}

GHashTable *
vmce_vm_get_poisoned (VmceVm *self)
{
  return self->poisoned;
}

GHashTable *
vmce_vm_steal_poisoned (VmceVm *self)
{
  GHashTable *pages = g_steal_pointer (&self->poisoned);

  self->poisoned = vmce_poison_set_new ();
  return pages;
}

VmceRomBlobs *
vmce_vm_get_roms (VmceVm *self)
{
  return self->roms;
}

guint64
vmce_vm_get_n_events (VmceVm *self)
{
  return self->n_events;
}

gpointer
vmce_vm_get_layer_data (VmceVm *self, GQuark layer)
{
  return g_datalist_id_get_data (&self->layer_data, layer);
}

void
vmce_vm_set_layer_data (VmceVm *self, GQuark layer, gpointer data, GDestroyNotify destroy)
{
  g_datalist_id_set_data_full (&self->layer_data, layer, data, destroy);
}

gpointer
vmce_vm_ensure_layer_data (VmceVm *self, GQuark layer, VmceLayerNewFunc create,
                           GDestroyNotify destroy)
{
  gpointer data = g_datalist_id_get_data (&self->layer_data, layer);

  if (data == NULL) {
    data = create ();
    g_datalist_id_set_data_full (&self->layer_data, layer, data, destroy);
  }
  return data;
}
