/*
 * One QEMU process that vmced watches.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <sys/types.h>

#include "agent-client.h"
#include "decision.h"
#include "mce-encode.h"
#include "mce-event.h"
#include "poison-set.h"
#include "policy.h"
#include "ptrace-watch.h"
#include "qmp-client.h"
#include "ram-layout.h"
#include "rom-blobs.h"

typedef struct _VmceInjection VmceInjection;
typedef struct _VmceResetPass VmceResetPass;

/* A QEMU thread in signal-delivery-stop for a memory error: what the
 * layers that decide about it pass along (the thread stays stopped until
 * one of them lets it go) */
typedef struct {
  pid_t tid;
  siginfo_t info;       /* as the kernel sent it, or as vmced rewrote it */
  gint64 time_us;       /* monotonic, at the stop */
  const gchar *source;  /* "kernel" or "simulated" */
  guint64 request_id;   /* the vmcectl request it answers, 0 if none */
  gboolean layout_fresh; /* the layout was read again for it: a miss is real */
} VmceStop;

typedef struct {
  guint index; /* QEMU's cpu-index */
  pid_t tid;
  gchar *qom_path;
} VmceVcpu;


typedef enum {
  VMCE_VM_ATTACHING,
  VMCE_VM_READY,
  VMCE_VM_DETACHING,
  VMCE_VM_GONE,
} VmceVmState;

typedef struct _VmceVm VmceVm;

/* What the session reports to the layers above it, as ptrace-watch reports
 * to the session: vm.c knows no daemon, forwarder, simulator or guard
 * (daemon.c implements these). Each gets the handler's user data last. */
typedef struct _VmceVmHandler {
  /* A traced thread is in signal-delivery-stop; TRUE: taken, the handler
   * lets it go (FALSE: it gets its signal as it came) */
  gboolean (*signal_stop) (VmceVm *vm, pid_t tid, siginfo_t *info, gint64 stop_time_us,
                           gpointer user_data);
  /* A memory-error stop to decide about again (vmce_vm_redeliver()) */
  void (*memory_error) (VmceVm *vm, const VmceStop *stop, gboolean again, gpointer user_data);
  /* Every QMP event, before the session's own use of it */
  void (*qemu_event) (VmceVm *vm, const gchar *name, JsonObject *data, gint64 time_us,
                      gpointer user_data);
  /* Numbers, journals and publishes a memory error; its JSON */
  JsonNode *(*memory_error_event) (VmceVm *vm, VmceMceEvent *ev, gpointer user_data);
  /* Journals and publishes any other record */
  void (*record) (VmceVm *vm, const gchar *event, JsonNode *record, gpointer user_data);
  /* The session lets go of QEMU: whatever holds a thread or waits lets go
   * too; @release_pages: pages taken away come back */
  void (*letting_go) (VmceVm *vm, const gchar *why, gboolean release_pages, gpointer user_data);
  /* Attached: every thread is traced, the vm is ready; the attach record
   * is journaled here, before any other record of this QEMU */
  void (*attached) (VmceVm *vm, gpointer user_data);
  /* Gone for good (@exited: QEMU ended), after the last record */
  void (*gone) (VmceVm *vm, gboolean was_ready, gboolean exited, gpointer user_data);
  /* A page of guest RAM found taken away from QEMU at attach; TRUE: it is
   * vmced's now (to give back when it lets go), FALSE: it was already */
  gboolean (*found_taken_away) (VmceVm *vm, guint64 hva, guint64 gpa, gpointer user_data);
  /* What the layers above add to the vm's JSON (a few members, no
   * lists: vmcectl status shows them for every VM) */
  void (*to_json) (VmceVm *vm, JsonBuilder *b, gpointer user_data);
  /* The other sessions of this vmced (a migration's other end) */
  GPtrArray *(*peers) (VmceVm *vm, gpointer user_data);
} VmceVmHandler;

VmceVm *vmce_vm_new (const VmceVmHandler *handler,
                     gpointer handler_data,
                     pid_t pid,
                     const gchar *qmp_path,
                     const gchar *name,
                     const gchar *agent_path,
                     VmcePolicy policy);
/* For a libvirt domain: QMP on @socket, kept up by @owner (freed with the
 * vm). @owner NULL: a socket vmced connected itself (to its qmp_path) */
void vmce_vm_set_monitor (VmceVm *self, GSocket *socket, gpointer owner, GDestroyNotify owner_free);
void vmce_vm_set_uuid (VmceVm *self, const gchar *uuid);
VmceVm *vmce_vm_ref (VmceVm *self);
void vmce_vm_unref (VmceVm *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceVm, vmce_vm_unref)

void vmce_vm_attach_async (VmceVm *self, GAsyncReadyCallback callback, gpointer user_data);
gboolean vmce_vm_attach_finish (VmceVm *self, GAsyncResult *res, GError **error);
/* Lets QEMU go (async); @reason goes to the journal */
void vmce_vm_detach (VmceVm *self, const gchar *reason);
/* Lets QEMU go before returning, for daemon shutdown */
void vmce_vm_shutdown_sync (VmceVm *self);

const VmceVcpu *vmce_vm_find_vcpu_by_tid (VmceVm *self, pid_t tid);
const VmceVcpu *vmce_vm_find_vcpu (VmceVm *self, guint index);
/* "main", "vcpu 0", or the thread's comm */
gchar *vmce_vm_describe_thread (VmceVm *self, pid_t tid);
void vmce_vm_refresh_layout (VmceVm *self);
/* Without query-ram-layout the layout is `info mtree -f` and then `gpa2hva`
 * per block: a guest that remaps its memory in between (the firmware's PAM
 * setup, early in every boot) makes them disagree, and the layout is read
 * again, this many times in all */
#define VMCE_VM_LAYOUT_READS 8

/* Called once a layout read after this call is in (or the wait, bounded by
 * VMCE_LAYOUT_WAIT_MS, is over, or the VM is going: check vm->state). For
 * an address the layout does not have: memory hot-plugged since it was
 * read, which QEMU 7.2 announces with no event vmced can rely on. */
#define VMCE_LAYOUT_WAIT_MS 1000
typedef void (*VmceLayoutFreshFunc) (VmceVm *vm, gpointer data);
void vmce_vm_when_layout_fresh (VmceVm *self, VmceLayoutFreshFunc func, gpointer data);
void vmce_vm_record_poisoned (VmceVm *self, const VmceMceEvent *ev);
/* Before attaching: the pages kept for this QEMU (taken), from @from */
void vmce_vm_restore_poisoned (VmceVm *self, GHashTable *pages, const gchar *from);
void vmce_vm_set_poisoned_from (VmceVm *self, const gchar *from);
/* A memory-error stop held by a layer above, to be decided about again
 * (through the handler). @again: it waited once already. */
void vmce_vm_redeliver (VmceVm *self, const VmceStop *stop, gboolean again);
/* Through the handler: see VmceVmHandler */
JsonNode *vmce_vm_emit_event (VmceVm *self, VmceMceEvent *ev);
void vmce_vm_emit_record (VmceVm *self, const gchar *event, JsonNode *record);
GPtrArray *vmce_vm_get_peers (VmceVm *self);
/* The page vmced knows is poisoned on the host behind @hva, or NULL */
VmcePoisonedPage *vmce_vm_find_host_poisoned (VmceVm *self, guint64 hva, guint64 *gpa);
VmcePoisonedPage *vmce_vm_find_poisoned (VmceVm *self, guint64 gpa);
/* QMP stop; the outcome is logged */
void vmce_vm_pause (VmceVm *self, const gchar *why);
/* A QMP command for QEMU, its answer not waited for: a failure is one
 * warning line, "cannot @what: ..." */
void vmce_vm_execute_or_warn (VmceVm *self, const gchar *command, JsonNode *args, const gchar *what);

/* What the session knows; the layers above read it, only the session
 * changes it (but for the policy, which is the operator's) */
const gchar *vmce_vm_get_name (VmceVm *self);
pid_t vmce_vm_get_pid (VmceVm *self);
/* the process for good (vmce_proc_identity()), NULL if it was gone */
const gchar *vmce_vm_get_qemu_id (VmceVm *self);
/* a libvirt domain's UUID, or NULL */
const gchar *vmce_vm_get_uuid (VmceVm *self);
VmceVmState vmce_vm_get_state (VmceVm *self);
/* NULL before attaching or once gone */
VmceQmpClient *vmce_vm_get_qmp (VmceVm *self);
/* how it was attached: the QMP socket (NULL for a libvirt domain's
 * monitor) and its vmce guest agent's socket (NULL: none) */
const gchar *vmce_vm_get_qmp_path (VmceVm *self);
const gchar *vmce_vm_get_agent_path (VmceVm *self);
/* The client of the VM's vmce guest agent; NULL where it has none */
VmceAgentClient *vmce_vm_get_agent (VmceVm *self);
/* query-version: "10.0.2", and the package ("Debian 1:10.0.2+ds-2...") or
 * NULL */
const gchar *vmce_vm_get_qemu_version (VmceVm *self);
const gchar *vmce_vm_get_qemu_package (VmceVm *self);
VmcePtraceWatch *vmce_vm_get_watch (VmceVm *self);
VmceRamLayout *vmce_vm_get_layout (VmceVm *self);
/* of VmceVcpu, in QEMU's order (never NULL once attached) */
GArray *vmce_vm_get_vcpus (VmceVm *self);
const VmceCpuModel *vmce_vm_get_cpu_model (VmceVm *self);
gboolean vmce_vm_is_kvm (VmceVm *self);
/* QEMU has qemu-patches/' inject-mce */
gboolean vmce_vm_has_inject_mce (VmceVm *self);
/* the guest's architecture, and for an Arm64 one what its QEMU offers to
 * tell it of memory errors */
VmceArch vmce_vm_get_arch (VmceVm *self);
const VmceArmQemu *vmce_vm_get_arm_qemu (VmceVm *self);
/* ... and its x-hwpoison-page-add (qemu-hwpoison.c) */
gboolean vmce_vm_has_hwpoison_add (VmceVm *self);
/* and query-ram-layout, which the layout is read with */
gboolean vmce_vm_has_query_ram_layout (VmceVm *self);
/* the vendor of the CPU QEMU runs on ("GenuineIntel") */
const gchar *vmce_vm_get_host_vendor (VmceVm *self);
/* real time, µs; 0 until attached */
gint64 vmce_vm_get_attached_time (VmceVm *self);
/* the guest runs; a migration's destination still loading */
gboolean vmce_vm_is_running (VmceVm *self);
gboolean vmce_vm_is_incoming (VmceVm *self);
VmcePolicy vmce_vm_get_policy (VmceVm *self);
void vmce_vm_set_policy (VmceVm *self, VmcePolicy policy);
/* gpa -> VmcePoisonedPage (poison-set.h) */
GHashTable *vmce_vm_get_poisoned (VmceVm *self);
/* The set, for one who keeps it after the session (an empty one is left) */
GHashTable *vmce_vm_steal_poisoned (VmceVm *self);
/* where that set came from (the journal, a detach, QEMU's page table) */
const gchar *vmce_vm_get_poisoned_from (VmceVm *self);
/* QEMU's ROM blobs in RAM, or NULL if not read */
VmceRomBlobs *vmce_vm_get_roms (VmceVm *self);
/* memory errors reported so far */
guint64 vmce_vm_get_n_events (VmceVm *self);

/* What a layer above keeps per VM (the forwarder's queue, the simulator's
 * page tables, a guard's state), keyed by its own quark: the session holds
 * it for the layer without knowing what it is, and frees it (@destroy) when
 * replaced or with the session, as GObject's qdata */
gpointer vmce_vm_get_layer_data (VmceVm *self, GQuark layer);
void vmce_vm_set_layer_data (VmceVm *self, GQuark layer, gpointer data, GDestroyNotify destroy);
typedef gpointer (*VmceLayerNewFunc) (void);
/* The layer's data, made by @create the first time it is asked for */
gpointer vmce_vm_ensure_layer_data (VmceVm *self,
                                    GQuark layer,
                                    VmceLayerNewFunc create,
                                    GDestroyNotify destroy);

/* Through the handler: the layers' members of the vm's JSON (vm-json.h) */
void vmce_vm_layers_to_json (VmceVm *self, JsonBuilder *b);
/* A journal record about this VM begins: type, time, vm, uuid, pid and
 * qemu_id (the builder is inside the record's object) */
void vmce_vm_begin_record (VmceVm *self, JsonBuilder *b, const gchar *type);
