/*
 * From a memory-error SIGBUS in QEMU to a machine check in the guest.
 *
 * The thread that took the signal is stopped while this runs, and with it
 * (for a vCPU) the guest. So nothing here waits: the machine check goes to
 * QEMU's monitor as a non-blocking write, the thread is let go, and the
 * monitor's answer comes back through the main loop.
 *
 * HMP `mce` runs on the target vCPU (run_on_cpu), so the monitor cannot
 * answer while that vCPU's thread is stopped; the thread is resumed first,
 * with the signal suppressed so QEMU itself neither injects a second
 * machine check (KVM) nor dies (TCG).
 *
 * Injections go out one at a time per VM. Through HMP with a short gap:
 * QEMU's HMP injection is unconditional, and a second uncorrected error on
 * a vCPU whose guest has not finished the first one (MCG_STATUS.MCIP still
 * set) makes QEMU reset the guest, as a real CPU would shut down. Through
 * inject-mce (qemu-patches/) without one: QEMU refuses such an error, or
 * drops it on the vCPU and says so in MEMORY_FAILURE, and vmced sends it
 * again once the guest has had time to finish (decision.c).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-forward"

#include <glib-unix.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cper-encode.h"
#include "decision.h"
#include "error.h"
#include "forward.h"
#include "host-pfn.h"
#include "json-util.h"
#include "page.h"
#include "remote-syscall.h"
#include "sim-poison.h"

/* how long a vCPU that consumed poison may be held while QEMU queues the
 * machine check for it (HMP: until QEMU's main thread waits for the vCPU).
 * 20 ms was too short where QEMU itself is slow: in the host lab (TCG L2 in
 * a TCG L1) the main loop took 36 ms to reach the command, the vCPU let go
 * at 20 ms ran on into a timer interrupt, and the SRAR, taken in kernel
 * context, panicked the guest. As long as inject-mce's: a QEMU that never
 * gets there still freezes the guest for a tenth of a second at most */
#define VMCE_HOLD_MAX_US 100000
/* inject-mce lets a held vCPU go with its answer (5-10 ms here); a QEMU
 * that does not answer must not keep the guest frozen */
#define VMCE_HOLD_QMP_MAX_MS 100
#define VMCE_HOLD_POLL_NS 100000

struct _VmceInjection {
  VmceVm *vm;
  VmceMceEvent *ev;
  pid_t hold_tid; /* a vCPU thread kept stopped until QEMU waits for it */
  int hold_fd;
  guint hold_source;
  gint64 hold_deadline_us;
  GTask *task; /* for vmcectl inject */
  gint64 queued_at_us;
  guint retry_source;    /* QEMU said busy, or dropped it: asked again at this timer */
  gint64 retry_since_us; /* the first busy or drop */
  guint event_source;    /* KVM: waiting for the MEMORY_FAILURE about it, until this timer */
  gint64 reply_us;       /* inject-mce's answer, while the event is awaited */
};

/* The VM paused by vmced itself: TCG vCPUs inside a load of a page vmced
 * cannot give back (decision.c, vmce_decide_stuck()), kept stopped at
 * their signal, and the other vCPUs held with them */
typedef struct {
  GArray *stuck;      /* of VmceStuckVcpu */
  GArray *held;       /* of pid_t: the other vCPUs, once they stopped */
  gint64 since_us;    /* real time */
  gchar *why;
} VmcePark;

typedef struct {
  pid_t tid;
  guint64 host_page;
  guint64 gpa;
  gboolean simulated;
} VmceStuckVcpu;

/* The forwarder's own, per VM (layer data of the session) */
typedef struct {
  GQueue injections; /* waiting to be sent, of VmceInjection */
  VmceInjection *inflight;
  gint64 last_injection_us;
  guint gap_source;
  guint gap_ms;         /* between two injections into this VM through HMP */
  guint retry_bound_ms; /* how long one injection may be refused or dropped */
  GHashTable *stuck;    /* host page -> loads of it vmced could not complete (guint) */
  VmcePark *park;       /* NULL: not paused by vmced */
  int pagemap_fd;       /* QEMU's /proc/PID/pagemap, opened at its first error; -1 */
} VmceForwarder;

GQuark vmce_forwarder_quark (void);
G_DEFINE_QUARK (vmce-forwarder, vmce_forwarder)

static void vmce_forward_send_next (VmceVm *vm);

static void
vmce_park_free (VmcePark *park)
{
  g_array_unref (park->stuck);
  g_array_unref (park->held);
  g_free (park->why);
  g_free (park);
}

static void
vmce_forwarder_free (VmceForwarder *f)
{
  /* each injection holds the VM: none is left when it goes; the park is
   * let go at detach or exit (vmce_forward_cancel_all()) */
  g_clear_handle_id (&f->gap_source, g_source_remove);
  g_hash_table_unref (f->stuck);
  g_clear_pointer (&f->park, vmce_park_free);
  if (f->pagemap_fd >= 0)
    close (f->pagemap_fd);
  g_free (f);
}

static VmceForwarder *
vmce_forwarder_new (void)
{
  VmceForwarder *f = g_new0 (VmceForwarder, 1);

  g_queue_init (&f->injections);
  f->retry_bound_ms = VMCE_RETRY_BOUND_MS;
  f->stuck = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  f->pagemap_fd = -1;
  return f;
}

static VmceForwarder *
vmce_forwarder (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_forwarder_quark (), (VmceLayerNewFunc) vmce_forwarder_new,
                                    (GDestroyNotify) vmce_forwarder_free);
}

void
vmce_forward_set_gap (VmceVm *vm, guint gap_ms)
{
  vmce_forwarder (vm)->gap_ms = gap_ms;
}

void
vmce_forward_set_retry_bound (VmceVm *vm, guint bound_ms)
{
  vmce_forwarder (vm)->retry_bound_ms = bound_ms;
}

/* @ev->detail gets @text after what it says already */
static void
vmce_forward_add_detail (VmceMceEvent *ev, const gchar *text)
{
  gchar *before = ev->detail;

  ev->detail = before != NULL ? g_strdup_printf ("%s; %s", before, text) : g_strdup (text);
  g_free (before);
}

/* An AMD AO is a deferred error: it raises no #MC, and the guest sees it
 * only when it next polls its banks. Worth saying where it is journaled,
 * or an operator waits minutes wondering */
static void
vmce_forward_note_deferred (VmceMceEvent *ev)
{
  if (ev->style != VMCE_MCE_STYLE_AMD || ev->kind != VMCE_MCE_KIND_AO || ev->detail != NULL)
    return;
  ev->detail = g_strdup ("AMD deferred error: no machine check exception; the guest finds it "
                         "when it next polls its banks (Linux: machinecheck check_interval, "
                         "300 s by default)");
}

static void
vmce_injection_release_hold (VmceInjection *inj)
{
  g_clear_handle_id (&inj->hold_source, g_source_remove);
  if (inj->hold_fd >= 0) {
    close (inj->hold_fd);
    inj->hold_fd = -1;
  }
  if (inj->hold_tid > 0 && vmce_vm_get_watch (inj->vm) != NULL) {
    vmce_ptrace_watch_resume (vmce_vm_get_watch (inj->vm), inj->hold_tid, 0);
    inj->ev->held_us = g_get_monotonic_time () - inj->ev->stop_us;
  }
  inj->hold_tid = 0;
}

static void
vmce_injection_free (VmceInjection *inj)
{
  g_clear_handle_id (&inj->retry_source, g_source_remove);
  g_clear_handle_id (&inj->event_source, g_source_remove);
  vmce_injection_release_hold (inj);
  vmce_mce_event_free (inj->ev);
  g_clear_object (&inj->task);
  vmce_vm_unref (inj->vm);
  g_free (inj);
}

static VmceInjection *
vmce_injection_new (VmceVm *vm, VmceMceEvent *ev)
{
  VmceInjection *inj = g_new0 (VmceInjection, 1);

  inj->vm = vmce_vm_ref (vm);
  inj->ev = ev;
  inj->hold_fd = -1;
  return inj;
}

/* Journal it, tell subscribers and waiters, remember the page */
static void
vmce_forward_finish (VmceVm *vm, VmceMceEvent *ev, GTask *task)
{
  g_autoptr(JsonNode) json = NULL;

  json = vmce_vm_emit_event (vm, ev);
  /* after the journal gave it its seq; a host page is bad whatever became
   * of the machine check (poison-set.c decides) */
  vmce_vm_record_poisoned (vm, ev);
  vmce_sim_event_done (vm, ev, json);
  if (task != NULL)
    g_task_return_pointer (task, json_node_ref (json), (GDestroyNotify) json_node_unref);
}

static gboolean
vmce_forward_main_thread_waits (VmceVm *vm)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/task/%d/syscall", vmce_vm_get_pid (vm), vmce_vm_get_pid (vm));
  g_autofree gchar *futex = g_strdup_printf ("%d ", SYS_futex);
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return TRUE; /* nothing to wait for */
  /* blocked in futex(): run_on_cpu() waits for the vCPU */
  return g_str_has_prefix (text, futex);
}

/* A vCPU stopped at the load that consumed poison (TCG: inside it; KVM:
 * its exit for the fault) is let go once the main thread has queued the
 * machine check for it and waits for it to run (HMP), or at QEMU's answer
 * (QMP inject-mce, which queues it before answering):
 * the vCPU then leaves its translation block and takes the machine check
 * right away, still in the context (the guest process) that consumed the
 * poison. Let go earlier, it may run on into a timer interrupt, and an SRAR
 * taken in guest kernel context panics the guest. */
static gboolean
vmce_forward_hold_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  VmceInjection *inj = user_data;
  guint64 expirations;

  (void) read (fd, &expirations, sizeof expirations);
  if (!vmce_forward_main_thread_waits (inj->vm) &&
      g_get_monotonic_time () < inj->hold_deadline_us)
    return G_SOURCE_CONTINUE;
  if (g_get_monotonic_time () >= inj->hold_deadline_us)
    g_debug ("vm %s: thread %d let go after %d us without QEMU waiting for it", vmce_vm_get_name (inj->vm),
             inj->hold_tid, VMCE_HOLD_MAX_US);
  inj->hold_source = 0;
  vmce_injection_release_hold (inj);
  return G_SOURCE_REMOVE;
}

static gboolean
vmce_forward_hold_expired_cb (gpointer user_data)
{
  VmceInjection *inj = user_data;

  g_debug ("vm %s: thread %d let go after %d ms without QEMU's answer", vmce_vm_get_name (inj->vm),
           inj->hold_tid, VMCE_HOLD_QMP_MAX_MS);
  inj->hold_source = 0;
  vmce_injection_release_hold (inj);
  return G_SOURCE_REMOVE;
}

static void
vmce_forward_start_hold (VmceInjection *inj)
{
  struct itimerspec its = {
    .it_interval = { .tv_nsec = VMCE_HOLD_POLL_NS },
    .it_value = { .tv_nsec = VMCE_HOLD_POLL_NS },
  };

  inj->hold_fd = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (inj->hold_fd < 0 || timerfd_settime (inj->hold_fd, 0, &its, NULL) < 0) {
    vmce_injection_release_hold (inj);
    return;
  }
  inj->hold_deadline_us = g_get_monotonic_time () + VMCE_HOLD_MAX_US;
  inj->hold_source = g_unix_fd_add (inj->hold_fd, G_IO_IN, vmce_forward_hold_cb, inj);
}

/* The monitor's answer is in: @failure says why QEMU did not inject, or NULL */
static void
vmce_forward_answered (VmceInjection *inj, const gchar *failure, gint64 reply_us)
{
  VmceVm *vm = inj->vm;
  VmceForwarder *f = vmce_forwarder (vm);
  VmceMceEvent *ev = inj->ev;

  vmce_injection_release_hold (inj);
  ev->handled_by = g_strdup ("vmced");
  if (failure != NULL) {
    ev->result = VMCE_RESULT_FAILED;
    g_free (ev->detail);
    ev->detail = g_strdup (failure);
    g_warning ("vm %s: machine check at GPA 0x%" G_GINT64_MODIFIER "x failed: %s", vmce_vm_get_name (vm),
               ev->gpa, ev->detail);
  } else {
    ev->result = VMCE_RESULT_INJECTED;
  }
  if (reply_us != 0)
    ev->latency_us = reply_us - ev->stop_us;
  f->inflight = NULL;
  f->last_injection_us = g_get_monotonic_time ();
  vmce_forward_finish (vm, ev, inj->task);
  vmce_vm_ref (vm);
  vmce_injection_free (inj);
  vmce_forward_send_next (vm);
  vmce_vm_unref (vm);
}

static void
vmce_forward_hmp_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *failure = NULL;
  gint64 reply_us = 0;

  text = vmce_qmp_client_hmp_finish (VMCE_QMP_CLIENT (source), res, &reply_us, &error);
  if (text == NULL)
    failure = g_strdup (error->message);
  /* HMP mce prints nothing when it injected, and a reason when not */
  else if (g_strstrip (text)[0] != '\0')
    failure = g_strdup_printf ("QEMU did not inject: %s", text);
  vmce_forward_answered (user_data, failure, reply_us);
}

/* QEMU's inject-mce (qemu-patches/) takes the error by intent, as vmced
 * encodes it; raw values would need numbers above 2^63, which json-glib
 * cannot write. A style forced on a guest of the other vendor stays HMP. */
static gboolean
vmce_forward_use_qmp (VmceVm *vm, const VmceMceEvent *ev)
{
  /* an Arm64 guest is only ever told through QMP */
  if (ev->path != NULL)
    return TRUE;
  return vmce_vm_has_inject_mce (vm) && ev->have_gpa &&
         (ev->style == VMCE_MCE_STYLE_AMD) == vmce_cpu_model_is_amd (vmce_vm_get_cpu_model (vm));
}

/* An Arm64 guest's: the CPER record, and for an SEA its vCPU */
static JsonNode *
vmce_forward_ghes_args (const VmceMceEvent *ev)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  if (g_strcmp0 (ev->path, "sea") == 0) {
    json_builder_set_member_name (b, "cpu-index");
    json_builder_add_int_value (b, ev->sea_vcpu);
  }
  json_builder_set_member_name (b, "cper");
  json_builder_add_string_value (b, ev->cper);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
vmce_forward_inject_args (const VmceMceEvent *ev)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  if (ev->path != NULL)
    return vmce_forward_ghes_args (ev);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "cpu");
  json_builder_add_int_value (b, ev->mce.cpu);
  json_builder_set_member_name (b, "gpa");
  json_builder_add_int_value (b, (gint64) ev->gpa);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, vmce_mce_kind_to_string (ev->kind));
  json_builder_set_member_name (b, "bank");
  json_builder_add_int_value (b, ev->mce.bank);
  json_builder_set_member_name (b, "broadcast");
  json_builder_add_boolean_value (b, ev->mce.broadcast);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void vmce_forward_send_qmp (VmceVm *vm, VmceInjection *inj);

static gboolean
vmce_forward_retry_cb (gpointer user_data)
{
  VmceInjection *inj = user_data;

  inj->retry_source = 0;
  vmce_forward_send_qmp (inj->vm, inj);
  return G_SOURCE_REMOVE;
}

static void vmce_forward_then (VmceInjection *inj, VmceAnswer answer, const gchar *why, gint64 reply_us);

static gboolean
vmce_forward_event_wait_over_cb (gpointer user_data)
{
  VmceInjection *inj = user_data;

  inj->event_source = 0;
  vmce_forward_then (inj, VMCE_ANSWER_SILENT, NULL, inj->reply_us);
  return G_SOURCE_REMOVE;
}

/* Why it was not injected after all the tries */
static gchar *
vmce_forward_gave_up_why (VmceInjection *inj)
{
  if (inj->ev->path != NULL)
    return g_strdup_printf ("not injected: for %" G_GINT64_FORMAT " ms QEMU refused it %u time(s): the guest "
                            "has not acknowledged the GHES record before (its Read Ack Register is 0)",
                            (g_get_monotonic_time () - inj->retry_since_us) / 1000, inj->ev->busy);
  return g_strdup_printf ("not injected: for %" G_GINT64_FORMAT " ms QEMU refused it as busy %u time(s) "
                          "and dropped it as too early %u time(s): a machine check stayed in progress "
                          "on vCPU %u (the guest has not finished its handler for an earlier one, or has "
                          "not enabled machine checks)",
                          (g_get_monotonic_time () - inj->retry_since_us) / 1000, inj->ev->busy,
                          inj->ev->dropped, inj->ev->mce.cpu);
}

/* What QEMU said of @inj so far (@answer), and what follows (decision.c) */
static void
vmce_forward_then (VmceInjection *inj, VmceAnswer answer, const gchar *why, gint64 reply_us)
{
  VmceForwarder *f = vmce_forwarder (inj->vm);
  VmceMceEvent *ev = inj->ev;
  gint64 now = g_get_monotonic_time ();
  g_autofree gchar *failure = NULL;

  if (answer == VMCE_ANSWER_BUSY)
    ev->busy++;
  if (answer == VMCE_ANSWER_DROPPED)
    ev->dropped++;
  if ((answer == VMCE_ANSWER_BUSY || answer == VMCE_ANSWER_DROPPED) && inj->retry_since_us == 0)
    inj->retry_since_us = now;
  switch (vmce_decide_after_answer (answer, inj->retry_since_us != 0 ? (now - inj->retry_since_us) / 1000 : 0,
                                    f->retry_bound_ms)) {
  case VMCE_THEN_INJECTED:
    vmce_forward_answered (inj, NULL, reply_us);
    return;
  case VMCE_THEN_AWAIT_EVENT:
    /* the vCPU takes it when it next runs: a held one must run */
    vmce_injection_release_hold (inj);
    inj->reply_us = reply_us;
    inj->event_source = g_timeout_add (VMCE_EVENT_WAIT_MS, vmce_forward_event_wait_over_cb, inj);
    return;
  case VMCE_THEN_RETRY:
    /* the guest must run to finish its handler, a held vCPU too (an SRAR
     * then comes late, but a vCPU frozen in the handler never ends it) */
    vmce_injection_release_hold (inj);
    g_clear_pointer (&ev->qemu_event, json_node_unref);
    g_debug ("vm %s: GPA 0x%" G_GINT64_MODIFIER "x %s, asked again", vmce_vm_get_name (inj->vm), ev->gpa,
             vmce_answer_to_string (answer));
    inj->retry_source = g_timeout_add (vmce_decide_retry_pause_ms (ev->busy + ev->dropped),
                                       vmce_forward_retry_cb, inj);
    return;
  case VMCE_THEN_FAILED:
    failure = answer == VMCE_ANSWER_ERROR ? g_strdup (why) : vmce_forward_gave_up_why (inj);
    vmce_forward_answered (inj, failure, reply_us);
    return;
  case VMCE_THEN_UNCONFIRMED:
    vmce_forward_add_detail (ev, "unconfirmed: QEMU queued it on the vCPU and sent no MEMORY_FAILURE about "
                                 "it within " G_STRINGIFY (VMCE_EVENT_WAIT_MS) " ms (the guest may have "
                                 "disabled the bank in MCi_CTL or MCG_CTL)");
    vmce_forward_answered (inj, NULL, reply_us);
    return;
  }
}

/* inject-mce's refusal while one is in progress (qemu-patches/ 0001) */
static gboolean
vmce_forward_is_busy (const GError *error)
{
  /* and an Arm64 QEMU's while the guest has not read the last GHES
   * record (ghes_record_cper_errors() in hw/acpi/ghes.c) */
  return strstr (error->message, "machine check is still in progress") != NULL ||
         strstr (error->message, "OSPM does not acknowledge previous error") != NULL;
}

/* What inject-mce's answer says, with the MEMORY_FAILURE that may have
 * come before it (TCG raises the machine check before answering) */
static VmceAnswer
vmce_forward_qmp_answer (VmceInjection *inj)
{
  const gchar *action = NULL;

  /* QEMU 10.2 wrote the record and raised the GED's event before it
   * answered, and sends no MEMORY_FAILURE for it */
  if (inj->ev->path != NULL)
    return VMCE_ANSWER_TAKEN;
  if (inj->ev->qemu_event != NULL)
    action = vmce_json_object_get_string_opt (json_node_get_object (inj->ev->qemu_event), "action");
  if (action != NULL)
    return g_strcmp0 (action, "ignore") == 0 ? VMCE_ANSWER_DROPPED : VMCE_ANSWER_TAKEN;
  return vmce_vm_is_kvm (inj->vm) ? VMCE_ANSWER_QUEUED : VMCE_ANSWER_TAKEN;
}

static void
vmce_forward_qmp_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceInjection *inj = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *failure = NULL;
  gint64 reply_us = 0;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, &reply_us, &error);
  if (ret != NULL) {
    vmce_forward_then (inj, vmce_forward_qmp_answer (inj), NULL, reply_us);
    return;
  }
  if (vmce_forward_is_busy (error) && vmce_qmp_client_is_open (VMCE_QMP_CLIENT (source))) {
    vmce_forward_then (inj, VMCE_ANSWER_BUSY, NULL, reply_us);
    return;
  }
  failure = g_strdup_printf ("QEMU did not inject: %s", error->message);
  vmce_forward_then (inj, VMCE_ANSWER_ERROR, failure, reply_us);
}

/* The first time and each time again */
static void
vmce_forward_send_qmp (VmceVm *vm, VmceInjection *inj)
{
  g_autoptr(JsonNode) args = vmce_forward_inject_args (inj->ev);
  gboolean first = inj->retry_since_us == 0;

  if (vmce_vm_get_qmp (vm) == NULL || !vmce_qmp_client_is_open (vmce_vm_get_qmp (vm))) {
    vmce_forward_then (inj, VMCE_ANSWER_ERROR, "not injected: the monitor is gone", 0);
    return;
  }
  /* QEMU answers once the machine check is queued on the vCPU: a held
   * vCPU is let go at the answer, and takes it before anything else */
  vmce_qmp_client_execute_async (vmce_vm_get_qmp (vm),
                                 inj->ev->path == NULL                      ? "inject-mce"
                                 : g_strcmp0 (inj->ev->path, "sea") == 0 ? VMCE_QMP_INJECT_SEA
                                                                           : VMCE_QMP_INJECT_GHES,
                                 args, NULL, vmce_forward_qmp_cb, inj);
  if (!first)
    return;
  inj->ev->to_monitor_us = g_get_monotonic_time () - inj->ev->stop_us;
  if (inj->hold_tid > 0)
    inj->hold_source = g_timeout_add (VMCE_HOLD_QMP_MAX_MS, vmce_forward_hold_expired_cb, inj);
}

static gboolean
vmce_forward_gap_cb (gpointer user_data)
{
  VmceVm *vm = user_data;

  vmce_forwarder (vm)->gap_source = 0;
  vmce_forward_send_next (vm);
  return G_SOURCE_REMOVE;
}

/* vmce_decide_waits_gap() (decision.c) says why */
static gboolean
vmce_forward_waits_gap (VmceVm *vm, VmceInjection *inj)
{
  return inj != NULL && vmce_decide_waits_gap (vmce_forward_use_qmp (vm, inj->ev));
}

static void
vmce_forward_send_next (VmceVm *vm)
{
  VmceForwarder *f = vmce_forwarder (vm);
  VmceInjection *inj;
  g_autofree gchar *hmp = NULL;
  gint64 gap_us = (gint64) f->gap_ms * 1000;
  gint64 wait_us;

  if (f->inflight != NULL || f->gap_source != 0 || g_queue_is_empty (&f->injections))
    return;
  if (vmce_vm_get_qmp (vm) == NULL || !vmce_qmp_client_is_open (vmce_vm_get_qmp (vm))) {
    vmce_forward_cancel_all (vm, "the monitor is gone");
    return;
  }
  wait_us = f->last_injection_us + gap_us - g_get_monotonic_time ();
  if (f->last_injection_us != 0 && wait_us > 0 && vmce_forward_waits_gap (vm, g_queue_peek_head (&f->injections))) {
    /* a held vCPU must not wait for the gap, nor for an injection that may
     * itself need that vCPU to run */
    for (GList *l = f->injections.head; l != NULL; l = l->next)
      vmce_injection_release_hold (l->data);
    f->gap_source = g_timeout_add (MAX (1, wait_us / 1000), vmce_forward_gap_cb, vm);
    return;
  }
  inj = g_queue_pop_head (&f->injections);
  inj->ev->queued_us = g_get_monotonic_time () - inj->queued_at_us;
  f->inflight = inj;
  if (vmce_forward_use_qmp (vm, inj->ev)) {
    g_free (inj->ev->via);
    inj->ev->via = g_strdup ("qmp");
    vmce_forward_send_qmp (vm, inj);
    return;
  }
  hmp = vmce_mce_to_hmp (&inj->ev->mce);
  g_debug ("vm %s: %s", vmce_vm_get_name (vm), hmp);
  vmce_qmp_client_hmp_async (vmce_vm_get_qmp (vm), hmp, NULL, vmce_forward_hmp_cb, inj);
  inj->ev->to_monitor_us = g_get_monotonic_time () - inj->ev->stop_us;
  if (inj->hold_tid > 0)
    vmce_forward_start_hold (inj);
}

static void
vmce_forward_enqueue (VmceVm *vm, VmceInjection *inj)
{
  VmceForwarder *f = vmce_forwarder (vm);

  if (f->inflight != NULL)
    vmce_injection_release_hold (inj);
  inj->queued_at_us = g_get_monotonic_time ();
  g_queue_push_tail (&f->injections, inj);
  vmce_forward_send_next (vm);
}

/* @hold: the stopped thread stays so until the injection is sent */
static void
vmce_forward_enqueue_held (VmceVm *vm, VmceInjection *inj, gboolean hold)
{
  if (hold) {
    inj->hold_tid = inj->ev->tid;
    vmce_forward_enqueue (vm, inj);
    return;
  }
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), inj->ev->tid, 0);
  inj->ev->held_us = g_get_monotonic_time () - inj->ev->stop_us;
  vmce_forward_enqueue (vm, inj);
}

/* A repeat of an error whose machine check is on its way: KVM re-enters
 * the guest and faults on the page again until the machine check is in */
static VmceInjection *
vmce_forward_find_same_page (VmceVm *vm, guint64 gpa)
{
  VmceForwarder *f = vmce_forwarder (vm);

  if (f->inflight != NULL && (f->inflight->ev->gpa & VMCE_PAGE_MASK) == (gpa & VMCE_PAGE_MASK))
    return f->inflight;
  for (GList *l = f->injections.head; l != NULL; l = l->next) {
    VmceInjection *inj = l->data;
    if ((inj->ev->gpa & VMCE_PAGE_MASK) == (gpa & VMCE_PAGE_MASK))
      return inj;
  }
  return NULL;
}

/* The kernel's force_sig_mceerr() on a thread that blocks SIGBUS, done
 * by vmced (vmce_decide_pass_how()): SIGBUS's action back to the default,
 * the thread's own siginfo, the signal delivered unblocked. FALSE: it
 * could not be done, and @ev->detail says why */
static gboolean
vmce_forward_pass_forced (VmceVm *vm, VmceMceEvent *ev, const VmceStop *stop)
{
  VmcePtraceWatch *watch = vmce_vm_get_watch (vm);
  g_autoptr(GError) error = NULL;
  gchar *before = ev->detail;

  if (!vmce_remote_sigaction_default (vmce_vm_get_pid (vm), stop->tid, SIGBUS, &error) ||
      !vmce_ptrace_watch_set_siginfo (watch, stop->tid, &stop->info, &error)) {
    ev->detail = g_strdup_printf ("%s%scannot force it as the kernel would (%s): passed on blocked",
                                  before != NULL ? before : "", before != NULL ? "; " : "",
                                  error->message);
    g_free (before);
    return FALSE;
  }
  ev->detail = g_strdup_printf ("%s%sthe thread blocks SIGBUS: forced as the kernel forces an AR "
                                "(SIGBUS's action set to the default), QEMU is killed",
                                before != NULL ? before : "", before != NULL ? "; " : "");
  g_free (before);
  vmce_ptrace_watch_resume_unblocked (watch, stop->tid, SIGBUS);
  return TRUE;
}

/* ev->detail says why */
static void
vmce_forward_pass (VmceVm *vm, VmceMceEvent *ev, const VmceStop *stop)
{
  VmcePtraceWatch *watch = vmce_vm_get_watch (vm);
  int signo = stop->info.si_signo;
  VmceMceKind sent = stop->info.si_code == BUS_MCEERR_AR ? VMCE_MCE_KIND_AR : VMCE_MCE_KIND_AO;

  ev->result = VMCE_RESULT_PASSED;
  ev->handled_by = g_strdup ("qemu");
  if (signo != SIGBUS ||
      vmce_decide_pass_how (sent, vmce_ptrace_watch_blocks_sigbus (watch, stop->tid)) != VMCE_PASS_FORCED ||
      !vmce_forward_pass_forced (vm, ev, stop))
    vmce_ptrace_watch_resume (watch, ev->tid, signo);
  ev->held_us = g_get_monotonic_time () - ev->stop_us;
  vmce_forward_finish (vm, ev, NULL);
  vmce_mce_event_free (ev);
}

/* Not injected on purpose: the signal is suppressed, the reason
 * (ev->detail) journaled */
static void
vmce_forward_drop (VmceVm *vm, VmceMceEvent *ev, VmceResult result, gboolean pause)
{
  ev->result = result;
  ev->handled_by = g_strdup ("vmced");
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), ev->tid, 0);
  ev->held_us = g_get_monotonic_time () - ev->stop_us;
  if (pause)
    vmce_vm_pause (vm, ev->detail);
  vmce_forward_finish (vm, ev, NULL);
  vmce_mce_event_free (ev);
}

static void
vmce_forward_park_hold_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  /* the op's reference: the watch drops it only for an op that never runs */
  g_autoptr(VmceVm) vm = user_data;
  VmcePark *park = vmce_forwarder (vm)->park;

  /* let go already, or held by another layer (a vCPU waiting for its
   * machine check stays its holder's) */
  if (park == NULL || vmce_ptrace_watch_is_held (watch, tid))
    return;
  vmce_ptrace_watch_hold (watch, tid);
  g_array_append_val (park->held, tid);
}

/* A TCG vCPU that cannot leave its load (decision.c, vmce_decide_stuck()):
 * its thread stays stopped at its signal, and the first one holds the
 * VM's other vCPUs too; journaled as stopped, with why */
static void
vmce_forward_park (VmceVm *vm, VmceMceEvent *ev)
{
  VmceForwarder *f = vmce_forwarder (vm);
  VmceStuckVcpu stuck = {
    .tid = ev->tid,
    .host_page = ev->hva & VMCE_PAGE_MASK,
    .gpa = ev->gpa,
    .simulated = vmce_sim_is_protected (vm, ev->hva & VMCE_PAGE_MASK),
  };
  GArray *vcpus = vmce_vm_get_vcpus (vm);

  ev->result = VMCE_RESULT_STOPPED;
  ev->handled_by = g_strdup ("vmced");
  ev->held_us = g_get_monotonic_time () - ev->stop_us;
  if (f->park == NULL) {
    f->park = g_new0 (VmcePark, 1);
    f->park->stuck = g_array_new (FALSE, FALSE, sizeof (VmceStuckVcpu));
    f->park->held = g_array_new (FALSE, FALSE, sizeof (pid_t));
    f->park->since_us = g_get_real_time ();
    f->park->why = g_strdup (ev->detail);
    for (guint i = 0; i < vcpus->len; i++) {
      pid_t tid = g_array_index (vcpus, VmceVcpu, i).tid;
      if (tid != ev->tid)
        vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), tid, vmce_forward_park_hold_cb, vmce_vm_ref (vm),
                                        (GDestroyNotify) vmce_vm_unref);
    }
  }
  g_array_append_val (f->park->stuck, stuck);
  vmce_forward_finish (vm, ev, NULL);
  vmce_mce_event_free (ev);
}

/* Lets the park go (detach, exit): the other vCPUs run on; a stuck one
 * first gets its page back if vmced took it away itself (the whole huge
 * page, as a hugetlbfs mapping takes it), so that QEMU goes on as it
 * would have without vmced; a really lost page is read again, and QEMU
 * takes that error as it would have without vmced */
static void
vmce_forward_unpark (VmceVm *vm, VmceForwarder *f)
{
  VmcePtraceWatch *watch = vmce_vm_get_watch (vm);
  VmcePark *park = g_steal_pointer (&f->park);

  if (park == NULL)
    return;
  for (guint i = 0; watch != NULL && i < park->stuck->len; i++) {
    const VmceStuckVcpu *s = &g_array_index (park->stuck, VmceStuckVcpu, i);
    g_autoptr(GError) error = NULL;

    if (s->simulated && !vmce_sim_unprotect_huge (vm, s->tid, s->host_page, &error))
      g_warning ("vm %s: %s", vmce_vm_get_name (vm), error->message);
    vmce_ptrace_watch_resume (watch, s->tid, 0);
  }
  for (guint i = 0; watch != NULL && i < park->held->len; i++)
    vmce_ptrace_watch_release (watch, g_array_index (park->held, pid_t, i));
  g_message ("vm %s: the vCPUs vmced held since the VM was paused are let go", vmce_vm_get_name (vm));
  vmce_park_free (park);
}

/* Makes a TCG vCPU's load complete (decision.c says why): TRUE, or FALSE
 * and @why (the vCPU is stuck in its load) */
static gboolean
vmce_forward_free_tcg_vcpu (VmceVm *vm, VmceMceEvent *ev, pid_t tid, gchar **why)
{
  VmceForwarder *f = vmce_forwarder (vm);
  guint64 page = ev->hva & VMCE_PAGE_MASK;
  g_autoptr(GError) error = NULL;
  gboolean ok;

  if (vmce_sim_is_protected (vm, page))
    ok = vmce_sim_unprotect (vm, tid, page, &error);
  else
    ok = vmce_remote_map_anon_fixed (vmce_vm_get_pid (vm), tid, page, VMCE_PAGE_SIZE, &error);
  if (ok) {
    g_hash_table_remove (f->stuck, &page);
    return TRUE;
  }
  *why = g_strdup (error->message);
  return FALSE;
}

/* The loads of @page vmced could not complete so far, and one more */
static guint
vmce_forward_count_stuck (VmceForwarder *f, guint64 page)
{
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (f->stuck, &page));

  g_hash_table_insert (f->stuck, g_memdup2 (&page, sizeof page), GUINT_TO_POINTER (n + 1));
  return n;
}

static void
vmce_forward_layout_fresh_cb (VmceVm *vm, gpointer data)
{
  g_autofree VmceStop *stop = data;
  guint64 page = (guint64) (guintptr) stop->info.si_addr & VMCE_PAGE_MASK;

  if (vmce_vm_get_state (vm) == VMCE_VM_READY) {
    vmce_vm_redeliver (vm, stop, FALSE);
    return;
  }
  /* vmced lets go of the VM: the signal as it came, what QEMU would have
   * had without vmced (a page vmced took away itself comes back instead) */
  if (vmce_vm_get_watch (vm) != NULL)
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), stop->tid,
                              vmce_sim_is_protected (vm, page) ? 0 : stop->info.si_signo);
}

/* What vmced knows at the stop, for decision.c */
static void
vmce_forward_facts (VmceVm *vm, const VmceStop *stop, VmceMceEvent *ev, VmceFacts *f)
{
  const VmceRamRange *range = NULL;
  const VmceVcpu *vcpu = vmce_vm_find_vcpu_by_tid (vm, stop->tid);
  VmcePoisonedPage *p;

  *f = (VmceFacts) {
    .kind = ev->kind,
    .policy = vmce_vm_get_policy (vm),
    .kvm = vmce_vm_is_kvm (vm),
    .cpu_model = vmce_vm_get_cpu_model (vm),
    .where = VMCE_WHERE_ELSEWHERE,
    .layout_fresh = stop->layout_fresh,
    .main_thread = stop->tid == vmce_vm_get_pid (vm),
    .vcpu_index = vcpu != NULL ? (gint) vcpu->index : -1,
    .first_vcpu_index = vmce_vm_get_vcpus (vm)->len > 0 ? (gint) g_array_index (vmce_vm_get_vcpus (vm), VmceVcpu, 0).index : -1,
    .simulated = vmce_sim_is_protected (vm, ev->hva & VMCE_PAGE_MASK),
    .arch = vmce_vm_get_arch (vm),
    .arm = vmce_vm_get_arm_qemu (vm),
  };
  if (vmce_vm_get_layout (vm) != NULL && vmce_ram_layout_hva_to_gpa (vmce_vm_get_layout (vm), ev->hva, &ev->gpa, &range)) {
    f->where = VMCE_WHERE_RAM;
    ev->have_gpa = TRUE;
    ev->block = g_strdup (range->block);
    ev->block_offset = range->offset + (ev->gpa - range->gpa);
    f->same_page_on_its_way = vmce_forward_find_same_page (vm, ev->gpa) != NULL;
    p = vmce_vm_find_poisoned (vm, ev->gpa);
    f->known_poisoned = p != NULL && vmce_poisoned_page_told (p);
    f->refaults = p != NULL ? p->refaults : 0;
  } else if (vmce_vm_get_layout (vm) != NULL &&
             vmce_ram_layout_hva_to_block (vmce_vm_get_layout (vm), ev->hva, &f->block, &f->block_offset)) {
    f->where = VMCE_WHERE_BLOCK;
    ev->block = g_strdup (f->block);
  }
}

/* The host page of the error, read while the thread is stopped (before
 * anything gives the page back): one pread, no slower than the stop's other
 * /proc reads. The host's own records (rasdaemon) are joined to it later,
 * off this path */
static void
vmce_forward_read_host_pfn (VmceVm *vm, VmceMceEvent *ev)
{
  VmceForwarder *f = vmce_forwarder (vm);
  g_autoptr(GError) error = NULL;
  guint64 entry;

  if (f->pagemap_fd < 0)
    f->pagemap_fd = vmce_host_pfn_open (vmce_vm_get_pid (vm), &error);
  if (f->pagemap_fd < 0 || !vmce_host_pfn_read (f->pagemap_fd, ev->hva, &entry, &error)) {
    g_debug ("%s: %s", vmce_vm_get_name (vm), error->message);
    ev->host_pfn.from = VMCE_HOST_PFN_NONE;
    ev->host_pfn.why = "QEMU's pagemap could not be read";
    return;
  }
  vmce_host_pfn_decode (entry, g_strcmp0 (ev->source, "kernel") == 0, &ev->host_pfn);
}

static VmceMceEvent *
vmce_forward_event_new (VmceVm *vm, const VmceStop *stop)
{
  VmceMceEvent *ev = vmce_mce_event_new ();

  ev->time_us = g_get_real_time () - (g_get_monotonic_time () - stop->time_us);
  ev->stop_us = stop->time_us;
  ev->vm = g_strdup (vmce_vm_get_name (vm));
  ev->uuid = g_strdup (vmce_vm_get_uuid (vm));
  ev->pid = vmce_vm_get_pid (vm);
  ev->qemu_id = g_strdup (vmce_vm_get_qemu_id (vm));
  ev->tid = stop->tid;
  ev->thread = vmce_vm_describe_thread (vm, stop->tid);
  ev->si_code = stop->info.si_code;
  ev->hva = (guint64) (guintptr) stop->info.si_addr;
  ev->lsb = stop->info.si_addr_lsb;
  ev->source = stop->source;
  ev->request_id = stop->request_id;
  ev->policy = vmce_policy_to_string (vmce_vm_get_policy (vm));
  ev->kind = stop->info.si_code == BUS_MCEERR_AR ? VMCE_MCE_KIND_AR : VMCE_MCE_KIND_AO;
  vmce_forward_read_host_pfn (vm, ev);
  return ev;
}

/* An Arm64 guest's record: the 4 KiB page vmced works in (page.h), for
 * the guest's 4 KiB pages (Debian's arm64 kernel); FALSE and @error where
 * it cannot be encoded */
static gboolean
vmce_forward_encode_ghes (VmceMceEvent *ev, guint cpu, GError **error)
{
  VmceCperMemError e = {
    .kind = ev->kind,
    .gpa = ev->gpa,
    .lost_size = VMCE_PAGE_SIZE,
    .guest_page_size = VMCE_PAGE_SIZE,
  };
  g_autoptr(GBytes) record = vmce_cper_encode_memory_error (&e, error);

  if (record == NULL)
    return FALSE;
  ev->cper = vmce_cper_to_base64 (record);
  ev->sea_vcpu = cpu;
  g_free (ev->via);
  ev->via = g_strdup ("qmp");
  return TRUE;
}

/* The machine check goes into the queue; an AR's vCPU stays stopped until
 * it is sent (decision.c says why) */
static void
vmce_forward_queue_injection (VmceVm *vm, VmceMceEvent *ev, const VmceDecision *d)
{
  VmceInjection *inj;
  g_autoptr(GError) error = NULL;

  if (d->path != VMCE_ARM_PATH_NONE) {
    if (!vmce_forward_encode_ghes (ev, d->cpu, &error)) {
      g_free (ev->detail);
      ev->detail = g_strdup_printf ("not injected: %s", error->message);
      vmce_forward_drop (vm, ev, VMCE_RESULT_FAILED, FALSE);
      return;
    }
    vmce_poison_set_add_pending (vmce_vm_get_poisoned (vm), ev);
    vmce_forward_enqueue_held (vm, vmce_injection_new (vm, ev), d->hold);
    return;
  }
  ev->style = d->style;
  vmce_mce_encode (ev->kind, ev->gpa, d->cpu, vmce_vm_get_cpu_model (vm), ev->style, &ev->mce);
  ev->have_mce = TRUE;
  vmce_forward_note_deferred (ev);
  ev->via = g_strdup ("hmp");

  /* the page is bad on the host from now on, whatever the queue does: a
   * migration starting meanwhile hands it over, untold */
  vmce_poison_set_add_pending (vmce_vm_get_poisoned (vm), ev);
  inj = vmce_injection_new (vm, ev);
  vmce_forward_enqueue_held (vm, inj, d->hold);
}

/* The give-back the decision asked for failed: decided again, knowing */
static void
vmce_forward_decide_stuck (VmceVm *vm, VmceMceEvent *ev, VmceFacts *facts, const gchar *why, VmceDecision *d)
{
  VmceForwarder *f = vmce_forwarder (vm);

  facts->stuck = TRUE;
  facts->stuck_why = why;
  facts->stuck_faults = vmce_forward_count_stuck (f, ev->hva & VMCE_PAGE_MASK);
  facts->parked = f->park != NULL;
  vmce_decision_clear (d);
  vmce_decide (facts, d);
}

/* Hands the event to what the decision says */
static void
vmce_forward_act (VmceVm *vm, VmceMceEvent *ev, const VmceStop *stop, VmceDecision *d)
{
  switch (d->action) {
  case VMCE_DECISION_COALESCE:
    vmce_forward_find_same_page (vm, ev->gpa)->ev->repeats++;
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), stop->tid, 0);
    vmce_mce_event_free (ev);
    return;
  case VMCE_DECISION_IGNORE:
    vmce_forward_drop (vm, ev, VMCE_RESULT_IGNORED, d->pause);
    return;
  case VMCE_DECISION_STOP:
    vmce_forward_drop (vm, ev, VMCE_RESULT_STOPPED, d->pause);
    return;
  case VMCE_DECISION_REFUSE:
    vmce_forward_drop (vm, ev, VMCE_RESULT_REFUSED, d->pause);
    return;
  case VMCE_DECISION_RETRY:
    vmce_forward_drop (vm, ev, VMCE_RESULT_FAILED, FALSE);
    return;
  case VMCE_DECISION_PARK:
    vmce_forward_park (vm, ev);
    return;
  case VMCE_DECISION_INJECT:
    vmce_forward_queue_injection (vm, ev, d);
    return;
  case VMCE_DECISION_PASS:
  case VMCE_DECISION_RELOOK:
    break;
  }
  g_warn_if_reached ();
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), stop->tid, 0);
  vmce_mce_event_free (ev);
}

void
vmce_forward_signal (VmceVm *vm, const VmceStop *stop)
{
  pid_t tid = stop->tid;
  g_autoptr(VmceMceEvent) ev = vmce_forward_event_new (vm, stop);
  g_auto(VmceDecision) d = { 0 };
  g_autofree gchar *stuck_why = NULL;
  VmceFacts facts;

  vmce_forward_facts (vm, stop, ev, &facts);
  vmce_decide (&facts, &d);
  g_debug ("%s: %s %s at HVA 0x%" G_GINT64_MODIFIER "x: %s", vmce_vm_get_name (vm), ev->thread,
           vmce_mce_kind_to_string (ev->kind), ev->hva, vmce_decision_action_to_string (d.action));

  if (d.action == VMCE_DECISION_RELOOK) {
    VmceStop *again = g_memdup2 (stop, sizeof *stop);

    again->layout_fresh = TRUE;
    vmce_vm_when_layout_fresh (vm, vmce_forward_layout_fresh_cb, again);
    return;
  }
  if (d.free_tcg_vcpu && !vmce_forward_free_tcg_vcpu (vm, ev, tid, &stuck_why))
    vmce_forward_decide_stuck (vm, ev, &facts, stuck_why, &d);
  ev->kind = d.kind;
  ev->detail = g_steal_pointer (&d.detail);
  ev->path = vmce_arm_path_to_string (d.path);
  if (d.give_back_page) {
    g_autoptr(GError) error = NULL;

    if (!vmce_sim_unprotect (vm, tid, ev->hva & VMCE_PAGE_MASK, &error)) {
      g_free (ev->detail);
      ev->detail = g_strdup (error->message);
      d.action = VMCE_DECISION_PASS;
    }
  }
  if (d.action == VMCE_DECISION_PASS) {
    vmce_forward_pass (vm, g_steal_pointer (&ev), stop);
    if (d.refresh_layout)
      vmce_vm_refresh_layout (vm);
    return;
  }
  if (d.count_refault)
    vmce_vm_find_poisoned (vm, ev->gpa)->refaults++;
  vmce_forward_act (vm, g_steal_pointer (&ev), stop, &d);
}

/* vmce_forward_event_for_gpa() for an Arm64 guest: its record, or NULL
 * and @error (NotSupported, one line) where this QEMU cannot tell it */
static VmceMceEvent *
vmce_forward_event_arm (VmceVm *vm, VmceMceEvent *ev_in, guint cpu, GError **error)
{
  g_autoptr(VmceMceEvent) ev = ev_in;
  g_autofree gchar *why = NULL;
  VmceArmPath path = vmce_decide_arm_path (vmce_vm_get_arm_qemu (vm), ev->kind, cpu, &why);

  if (path == VMCE_ARM_PATH_REFUSED) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_SUPPORTED, "vm %s: %s", vmce_vm_get_name (vm), why);
    return NULL;
  }
  ev->path = vmce_arm_path_to_string (path);
  if (!vmce_forward_encode_ghes (ev, cpu, error))
    return NULL;
  return g_steal_pointer (&ev);
}

/* A machine check at @gpa that no signal brought (vmcectl inject, a page
 * of a lost huge page), ready for the queue; NULL and @error where @gpa is
 * not guest RAM */
static VmceMceEvent *
vmce_forward_event_for_gpa (VmceVm *vm, guint64 gpa, VmceMceKind kind, guint cpu, const gchar *source,
                            GError **error)
{
  g_autoptr(VmceMceEvent) ev = vmce_mce_event_new ();
  const VmceRamRange *range = NULL;

  if (vmce_vm_get_layout (vm) == NULL || !vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (vm), gpa, &ev->hva, &range)) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "GPA 0x%" G_GINT64_MODIFIER "x is not guest RAM of vm %s", gpa, vmce_vm_get_name (vm));
    return NULL;
  }
  ev->stop_us = g_get_monotonic_time ();
  ev->time_us = g_get_real_time ();
  ev->vm = g_strdup (vmce_vm_get_name (vm));
  ev->uuid = g_strdup (vmce_vm_get_uuid (vm));
  ev->pid = vmce_vm_get_pid (vm);
  ev->qemu_id = g_strdup (vmce_vm_get_qemu_id (vm));
  ev->source = source;
  ev->kind = kind;
  ev->gpa = gpa;
  ev->have_gpa = TRUE;
  ev->block = g_strdup (range->block);
  ev->block_offset = range->offset + (gpa - range->gpa);
  ev->policy = vmce_policy_to_string (vmce_vm_get_policy (vm));
  if (vmce_vm_get_arch (vm) == VMCE_ARCH_ARM64)
    return vmce_forward_event_arm (vm, g_steal_pointer (&ev), cpu, error);
  /* guest-only: the user asked for it, whether the guest can take it or
   * not; a lost huge page's: the page hit was injected, so it can */
  ev->style = vmce_mce_style_for (vmce_vm_get_cpu_model (vm), NULL);
  if (ev->style == VMCE_MCE_STYLE_NONE)
    ev->style = vmce_cpu_model_is_amd (vmce_vm_get_cpu_model (vm)) ? VMCE_MCE_STYLE_AMD : VMCE_MCE_STYLE_INTEL;
  vmce_mce_encode (kind, gpa, cpu, vmce_vm_get_cpu_model (vm), ev->style, &ev->mce);
  ev->have_mce = TRUE;
  vmce_forward_note_deferred (ev);
  ev->via = g_strdup ("hmp");
  return g_steal_pointer (&ev);
}

static gint
vmce_forward_first_vcpu (VmceVm *vm)
{
  return vmce_vm_get_vcpus (vm)->len > 0 ? (gint) g_array_index (vmce_vm_get_vcpus (vm), VmceVcpu, 0).index : 0;
}

void
vmce_forward_inject_async (VmceVm *vm,
                           guint64 gpa,
                           VmceMceKind kind,
                           gint cpu,
                           GAsyncReadyCallback callback,
                           gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, callback, user_data);
  g_autoptr(GError) error = NULL;
  VmceMceEvent *ev;
  VmceInjection *inj;

  if (cpu < 0)
    cpu = vmce_forward_first_vcpu (vm);
  if (vmce_vm_get_layout (vm) != NULL && vmce_vm_find_vcpu (vm, (guint) cpu) == NULL) {
    g_task_return_new_error (task, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                             "vm %s has no vCPU %d", vmce_vm_get_name (vm), cpu);
    return;
  }
  ev = vmce_forward_event_for_gpa (vm, gpa, kind, (guint) cpu, "inject", &error);
  if (ev == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  inj = vmce_injection_new (vm, ev);
  inj->task = g_steal_pointer (&task);
  vmce_forward_enqueue (vm, inj);
}

/* A found error (SRAO) no signal brought, queued: @source and @about_seq
 * for its record, @what for the line if @gpa is no longer guest RAM */
static void
vmce_forward_tell_page (VmceVm *vm, guint64 gpa, const gchar *source, guint64 about_seq, const gchar *what)
{
  g_autoptr(GError) error = NULL;
  VmceMceEvent *ev;

  /* the layout may have changed since (memory unplugged) */
  ev = vmce_forward_event_for_gpa (vm, gpa, VMCE_MCE_KIND_AO, (guint) vmce_forward_first_vcpu (vm), source, &error);
  if (ev == NULL) {
    g_warning ("vm %s: %s not told: %s", vmce_vm_get_name (vm), what, error->message);
    return;
  }
  ev->about_seq = about_seq;
  ev->lsb = VMCE_PAGE_SHIFT;
  vmce_forward_enqueue (vm, vmce_injection_new (vm, ev));
}

void
vmce_forward_tell (VmceVm *vm, guint64 gpa, guint64 about_seq)
{
  vmce_forward_tell_page (vm, gpa, "huge-page", about_seq, "a page of a lost huge page");
}

void
vmce_forward_tell_migrated (VmceVm *vm, guint64 gpa)
{
  VmceForwarder *f = vmce_forwarder (vm);

  /* The guest may be inside its handler for the source's last machine
   * check (MCG_STATUS.MCIP migrates with the vCPU): the first tell here
   * keeps the injection gap from the moment the guest runs, as the source
   * would have kept it. Told at once, QEMU raised a triple fault ("Previous
   * MCE still in progress"): the guest reset (seen once, under ASan). */
  if (f->last_injection_us == 0)
    f->last_injection_us = g_get_monotonic_time ();
  vmce_forward_tell_page (vm, gpa, "migration", 0, "a page the migration brought");
}

JsonNode *
vmce_forward_inject_finish (VmceVm *vm, GAsyncResult *res, GError **error)
{
  return g_task_propagate_pointer (G_TASK (res), error);
}

static void
vmce_forward_journal_qemu_event (VmceVm *vm, JsonObject *data)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  VmcePoisonedPage *page = NULL;

  if (json_object_has_member (data, "gpa"))
    page = vmce_vm_find_poisoned (vm, (guint64) json_object_get_int_member (data, "gpa"));
  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "qemu-event");
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, "MEMORY_FAILURE");
  json_builder_set_member_name (b, "data");
  json_builder_add_value (b, json_node_init_object (json_node_alloc (), data));
  /* the memory-error record it answers, found by its page */
  json_builder_set_member_name (b, "about_seq");
  if (page != NULL && page->last_seq != 0)
    json_builder_add_int_value (b, (gint64) page->last_seq);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "QEMU_EVENT", record);
}

/* Whether MEMORY_FAILURE @data may be about @inj: qemu-patches/ 0002 puts
 * the page in it (not for the broadcast to the other vCPUs, which has no
 * address); Debian's QEMU does not, and its event comes in order */
static gboolean
vmce_forward_event_is_about (JsonObject *data, VmceInjection *inj, gboolean need_gpa)
{
  if (!json_object_has_member (data, "gpa"))
    return !need_gpa;
  return ((guint64) json_object_get_int_member (data, "gpa") & VMCE_PAGE_MASK) == (inj->ev->gpa & VMCE_PAGE_MASK);
}

void
vmce_forward_qemu_event (VmceVm *vm, JsonObject *data)
{
  VmceForwarder *f = vmce_forwarder (vm);
  VmceInjection *inj = f->inflight;
  JsonNode *node;

  /* KVM: inject-mce answered when the injection was queued on the vCPU,
   * and this says whether the vCPU took it or dropped it as too early */
  if (inj != NULL && inj->event_source != 0 && vmce_forward_event_is_about (data, inj, TRUE)) {
    g_clear_handle_id (&inj->event_source, g_source_remove);
    g_clear_pointer (&inj->ev->qemu_event, json_node_unref);
    inj->ev->qemu_event = json_node_init_object (json_node_alloc (), data);
    vmce_forward_then (inj,
                       g_strcmp0 (vmce_json_object_get_string_opt (data, "action"), "ignore") == 0
                           ? VMCE_ANSWER_DROPPED
                           : VMCE_ANSWER_TAKEN,
                       NULL, inj->reply_us);
    return;
  }
  /* HMP mce, and inject-mce under TCG: QEMU sends it from the vCPU,
   * before the monitor answers */
  if (inj != NULL && inj->event_source == 0 && inj->retry_source == 0 && inj->ev->qemu_event == NULL &&
      vmce_forward_event_is_about (data, inj, FALSE)) {
    node = json_node_new (JSON_NODE_OBJECT);
    json_node_set_object (node, data);
    inj->ev->qemu_event = node;
    return;
  }
  /* one of an earlier injection's (the broadcast to the other vCPUs), or
   * of no injection of vmced's: journaled on its own, with the page it is
   * about where QEMU says */
  vmce_forward_journal_qemu_event (vm, data);
}

/* An injection between two tries, or waiting for its MEMORY_FAILURE, has
 * no monitor call that will fail for it when the monitor goes: finish it
 * here */
static void
vmce_forward_cancel_paused (VmceVm *vm, VmceForwarder *f, const gchar *why)
{
  VmceInjection *inj = f->inflight;
  g_autofree gchar *text = NULL;

  if (inj == NULL || (inj->retry_source == 0 && inj->event_source == 0))
    return;
  f->inflight = NULL;
  inj->ev->handled_by = g_strdup ("vmced");
  if (inj->event_source != 0) {
    /* queued on the vCPU: it may well have gone in */
    inj->ev->result = VMCE_RESULT_INJECTED;
    inj->ev->latency_us = inj->reply_us - inj->ev->stop_us;
    text = g_strdup_printf ("unconfirmed: QEMU queued it on the vCPU, and %s before its MEMORY_FAILURE", why);
  } else {
    inj->ev->result = VMCE_RESULT_FAILED;
    text = g_strdup_printf ("not injected: %s while it waited to be sent again (QEMU busy %u time(s), "
                            "dropped %u time(s))", why, inj->ev->busy, inj->ev->dropped);
  }
  vmce_forward_add_detail (inj->ev, text);
  vmce_forward_finish (vm, inj->ev, inj->task);
  vmce_injection_free (inj);
}

guint
vmce_forward_hand_queued_to_migration (VmceVm *vm, const gchar *to)
{
  VmceForwarder *f = vmce_forwarder (vm);
  GList *l = f->injections.head;
  guint n = 0;

  while (l != NULL) {
    GList *next = l->next;
    VmceInjection *inj = l->data;

    /* (an AR's vCPU waits for its machine check: it stays, and so does a
     * machine check with no page to hand over) */
    if (inj->ev->kind == VMCE_MCE_KIND_AO && inj->hold_tid <= 0 && inj->ev->have_gpa) {
      g_queue_delete_link (&f->injections, l);
      inj->ev->result = VMCE_RESULT_MIGRATED;
      inj->ev->handled_by = g_strdup ("vmced");
      vmce_forward_add_detail (inj->ev, to);
      vmce_forward_finish (vm, inj->ev, inj->task);
      vmce_injection_free (inj);
      n++;
    }
    l = next;
  }
  if (g_queue_is_empty (&f->injections))
    g_clear_handle_id (&f->gap_source, g_source_remove);
  return n;
}

void
vmce_forward_cancel_all (VmceVm *vm, const gchar *why)
{
  VmceForwarder *f = vmce_forwarder (vm);
  VmceInjection *inj;

  g_clear_handle_id (&f->gap_source, g_source_remove);
  vmce_forward_unpark (vm, f);
  g_hash_table_remove_all (f->stuck);
  vmce_forward_cancel_paused (vm, f, why);
  if (f->inflight != NULL)
    vmce_injection_release_hold (f->inflight);
  while ((inj = g_queue_pop_head (&f->injections)) != NULL) {
    vmce_injection_release_hold (inj);
    inj->ev->result = VMCE_RESULT_FAILED;
    inj->ev->handled_by = g_strdup ("vmced");
    g_free (inj->ev->detail);
    inj->ev->detail = g_strdup_printf ("not injected: %s", why);
    vmce_forward_finish (vm, inj->ev, inj->task);
    vmce_injection_free (inj);
  }
}

void
vmce_forward_to_json (VmceVm *vm, JsonBuilder *b)
{
  VmceForwarder *f = vmce_vm_get_layer_data (vm, vmce_forwarder_quark ());
  VmcePark *park = f != NULL ? f->park : NULL;
  g_autofree gchar *since = NULL;

  json_builder_set_member_name (b, "paused_by_vmced");
  if (park == NULL) {
    json_builder_add_null_value (b);
    return;
  }
  since = vmce_format_time (park->since_us);
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "since", since);
  vmce_json_builder_add_string (b, "why", park->why);
  json_builder_set_member_name (b, "stuck");
  json_builder_begin_array (b);
  for (guint i = 0; i < park->stuck->len; i++) {
    const VmceStuckVcpu *s = &g_array_index (park->stuck, VmceStuckVcpu, i);

    json_builder_begin_object (b);
    vmce_json_builder_add_int (b, "thread_id", s->tid);
    vmce_json_builder_add_hex (b, "gpa", s->gpa);
    vmce_json_builder_add_hex (b, "hva", s->host_page);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  vmce_json_builder_add_int (b, "other_vcpus_held", park->held->len);
  json_builder_end_object (b);
}
