/*
 * Simulated host memory errors.
 *
 * This stands in for the host kernel's memory_failure() as closely as a
 * tracer can, so that everything after the signal-stop runs exactly as for
 * a real error:
 *  - the host page is taken away from QEMU (mprotect PROT_NONE, done by
 *    QEMU's own main thread through a remote syscall), as the kernel unmaps
 *    a poisoned page. Under KVM this is not done: KVM would fail KVM_RUN on
 *    a protected page where it would signal on a poisoned one;
 *  - AO ("found, not consumed") is sent to QEMU's main thread, the early-kill
 *    thread, at once;
 *  - AR ("consumed") comes when a thread touches the page: its SIGSEGV is
 *    the moment the kernel would send BUS_MCEERR_AR.
 * Another process may not send a siginfo with a positive si_code, so the
 * signal is sent as a plain tgkill() and rewritten by PTRACE_SETSIGINFO at
 * its signal-delivery-stop into what force_sig_mceerr()/send_sig_mceerr()
 * would have filled in.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-sim"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "page.h"
#include "remote-syscall.h"
#include "sim-poison.h"


typedef struct {
  int code;
  guint64 addr;
  guint lsb;
  guint64 request_id;
} VmceSimSignal;

typedef struct {
  VmceVm *vm;
  guint64 id;
  GTask *task;
  guint64 host_page;
  gboolean on_access;
  guint timeout_source;
} VmceSimWaiter;

typedef struct {
  VmceVm *vm;
  guint64 host_page; /* the signal's address */
  guint lsb;         /* and its si_addr_lsb: 21 or 30 for a huge page */
  GArray *pages;     /* of VmceGuestPage: what the kernel takes away from QEMU */
  int code;
  pid_t target;
  gboolean protect;
  gboolean send;
  guint64 request_id;
} VmceSimOp;

/* The simulator's own, per VM (layer data of the session) */
typedef struct {
  GHashTable *protected; /* host page -> guest page, both guint64* */
  GHashTable *marked;    /* of them, the kernel's poison markers (poison-mark.c), not PROT_NONE */
  GHashTable *huge;      /* host page of a lost huge page -> its lsb */
  GHashTable *raw;       /* of them, the pages the errors were in (guint64 set) */
  GHashTable *pending;   /* tid -> GQueue of VmceSimSignal */
  GPtrArray *waiters;    /* of VmceSimWaiter */
} VmceSimulator;

GQuark vmce_simulator_quark (void);
G_DEFINE_QUARK (vmce-simulator, vmce_simulator)

static guint64 vmce_sim_next_id = 0;

gboolean
vmce_sim_trigger_from_string (const gchar *str, VmceSimTrigger *trigger)
{
  if (g_strcmp0 (str, "auto") == 0)
    *trigger = VMCE_SIM_TRIGGER_AUTO;
  else if (g_strcmp0 (str, "access") == 0)
    *trigger = VMCE_SIM_TRIGGER_ACCESS;
  else if (g_strcmp0 (str, "now") == 0)
    *trigger = VMCE_SIM_TRIGGER_NOW;
  else
    return FALSE;
  return TRUE;
}

static void
vmce_sim_queue_free (gpointer queue)
{
  g_queue_free_full (queue, g_free);
}

static void
vmce_sim_op_free (gpointer data)
{
  VmceSimOp *op = data;

  vmce_vm_unref (op->vm);
  g_clear_pointer (&op->pages, g_array_unref);
  g_free (op);
}

static void
vmce_simulator_free (VmceSimulator *sim)
{
  g_hash_table_unref (sim->protected);
  g_hash_table_unref (sim->marked);
  g_hash_table_unref (sim->huge);
  g_hash_table_unref (sim->raw);
  g_hash_table_unref (sim->pending);
  g_ptr_array_unref (sim->waiters);
  g_free (sim);
}

/* NULL until the first simulated error in this VM */
static VmceSimulator *
vmce_simulator (VmceVm *vm)
{
  return vmce_vm_get_layer_data (vm, vmce_simulator_quark ());
}

static VmceSimulator *
vmce_simulator_new (void)
{
  VmceSimulator *sim = g_new0 (VmceSimulator, 1);

  sim->protected = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  sim->marked = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  sim->huge = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  sim->raw = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  sim->pending = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, vmce_sim_queue_free);
  sim->waiters = g_ptr_array_new ();
  return sim;
}

static VmceSimulator *
vmce_sim_tables_init (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_simulator_quark (), (VmceLayerNewFunc) vmce_simulator_new,
                                    (GDestroyNotify) vmce_simulator_free);
}

static void
vmce_sim_waiter_free (VmceSimWaiter *w)
{
  g_clear_handle_id (&w->timeout_source, g_source_remove);
  g_clear_object (&w->task);
  g_free (w);
}

static void
vmce_sim_waiter_fail (VmceSimWaiter *w, GError *error)
{
  g_ptr_array_remove (vmce_simulator (w->vm)->waiters, w);
  g_task_return_error (w->task, error);
  vmce_sim_waiter_free (w);
}

static VmceSimWaiter *
vmce_sim_find_waiter (VmceVm *vm, guint64 id)
{
  VmceSimulator *sim = vmce_simulator (vm);

  for (guint i = 0; sim != NULL && i < sim->waiters->len; i++) {
    VmceSimWaiter *w = g_ptr_array_index (sim->waiters, i);
    if (w->id == id)
      return w;
  }
  return NULL;
}

static gboolean
vmce_sim_waiter_timeout_cb (gpointer user_data)
{
  VmceSimWaiter *w = user_data;

  w->timeout_source = 0;
  vmce_sim_waiter_fail (
      w, g_error_new (VMCE_ERROR, VMCE_ERROR_TIMEOUT,
                      w->on_access ? "no thread of vm %s touched the page; it stays poisoned and "
                                     "the error is reported when one does"
                                   : "vm %s: the simulated signal was not seen in time",
                      vmce_vm_get_name (w->vm)));
  return G_SOURCE_REMOVE;
}

static void
vmce_sim_queue_signal (VmceVm *vm, pid_t tid, int code, guint64 addr, guint lsb, guint64 request_id)
{
  VmceSimulator *sim = vmce_simulator (vm);
  VmceSimSignal *sig = g_new0 (VmceSimSignal, 1);
  GQueue *queue = g_hash_table_lookup (sim->pending, GINT_TO_POINTER (tid));

  sig->code = code;
  sig->addr = addr;
  sig->lsb = lsb;
  sig->request_id = request_id;
  if (queue == NULL) {
    queue = g_queue_new ();
    g_hash_table_insert (sim->pending, GINT_TO_POINTER (tid), queue);
  }
  g_queue_push_tail (queue, sig);
  /* a plain SIGBUS; its siginfo is written at the signal-delivery-stop.
   * One at a time: the next is sent when this one has been seen */
  if (queue->length == 1 && syscall (SYS_tgkill, vmce_vm_get_pid (vm), tid, SIGBUS) < 0)
    g_warning ("vm %s: tgkill %d: %s", vmce_vm_get_name (vm), tid, g_strerror (errno));
}

static gint
vmce_sim_hva_cmp (gconstpointer a, gconstpointer b)
{
  const VmceGuestPage *pa = a, *pb = b;

  return pa->hva < pb->hva ? -1 : pa->hva > pb->hva;
}

/* PROT_NONE on @pages (not yet taken), one mprotect() per run of
 * consecutive host pages: a huge page's 512 in one call while QEMU's main
 * thread is stopped, not 512 */
static gboolean
vmce_sim_take_away (VmceVm *vm, pid_t tid, GArray *pages, guint lsb, GError **error)
{
  VmceSimulator *sim = vmce_simulator (vm);
  g_autoptr(GArray) hvas = g_array_new (FALSE, FALSE, sizeof (VmceGuestPage));

  for (guint i = 0; i < pages->len; i++) {
    const VmceGuestPage *p = &g_array_index (pages, VmceGuestPage, i);
    if (!vmce_sim_is_protected (vm, p->hva & VMCE_PAGE_MASK))
      g_array_append_val (hvas, *p);
  }
  g_array_sort (hvas, vmce_sim_hva_cmp);
  for (guint i = 0; i < hvas->len;) {
    guint j = i + 1;
    guint64 first = g_array_index (hvas, VmceGuestPage, i).hva & VMCE_PAGE_MASK;

    while (j < hvas->len && (g_array_index (hvas, VmceGuestPage, j).hva & VMCE_PAGE_MASK) ==
                                first + (guint64) (j - i) * VMCE_PAGE_SIZE)
      j++;
    if (!vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, first, (guint64) (j - i) * VMCE_PAGE_SIZE, PROT_NONE,
                               error))
      return FALSE;
    for (guint k = i; k < j; k++) {
      guint64 *key = g_new (guint64, 1);
      guint64 *value = g_new (guint64, 1);

      *key = g_array_index (hvas, VmceGuestPage, k).hva & VMCE_PAGE_MASK;
      *value = g_array_index (hvas, VmceGuestPage, k).gpa & VMCE_PAGE_MASK;
      g_hash_table_insert (sim->protected, key, value);
      if (lsb > VMCE_PAGE_SHIFT)
        g_hash_table_insert (sim->huge, g_memdup2 (key, sizeof *key), GUINT_TO_POINTER (lsb));
    }
    i = j;
  }
  return TRUE;
}

static void
vmce_sim_op_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceSimOp *op = user_data;
  VmceVm *vm = op->vm;
  g_autoptr(GError) error = NULL;

  /* a lost huge page's own bad cell: what a salvage leaves lost */
  if (op->lsb > VMCE_PAGE_SHIFT) {
    vmce_sim_tables_init (vm);
    g_hash_table_add (vmce_simulator (vm)->raw, g_memdup2 (&op->host_page, sizeof op->host_page));
  }
  if (op->protect && !vmce_sim_take_away (vm, tid, op->pages, op->lsb, &error)) {
    VmceSimWaiter *w = vmce_sim_find_waiter (vm, op->request_id);
    g_prefix_error (&error, "cannot take the page away from QEMU: ");
    if (w != NULL)
      vmce_sim_waiter_fail (w, g_steal_pointer (&error));
    vmce_sim_op_free (op);
    return;
  }
  if (op->send)
    vmce_sim_queue_signal (vm, op->target, op->code, op->host_page, op->lsb, op->request_id);
  vmce_sim_op_free (op);
}

/* What one vmcectl poison asks for, once checked against the VM */
typedef struct {
  guint64 hva, gpa;
  gboolean is_hva; /* given as an HVA (anywhere in QEMU), else a GPA */
  gboolean in_ram;
  VmceMceKind kind;
  VmceSimTrigger trigger; /* never AUTO once checked */
  gint cpu;
  guint lsb; /* 12, or a huge page's (21, 30): all of it is lost */
  const VmceVcpu *vcpu; /* the vCPU an AR at once goes to, or NULL */
} VmceSimRequest;

/* Fills in @r's address and trigger; FALSE (and @error) for what cannot be
 * simulated there */
static gboolean
vmce_sim_check_request (VmceVm *vm, VmceSimRequest *r, GError **error)
{
  const gchar *name = vmce_vm_get_name (vm);
  const VmceRamRange *range = NULL;

  r->in_ram = r->is_hva ? vmce_ram_layout_hva_to_gpa (vmce_vm_get_layout (vm), r->hva, &r->gpa, &range)
                        : vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (vm), r->gpa, &r->hva, &range);
  if (!r->in_ram && !r->is_hva) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "GPA 0x%" G_GINT64_MODIFIER "x is not guest RAM of vm %s", r->gpa, name);
    return FALSE;
  }
  if (r->in_ram && range->rom) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "GPA 0x%" G_GINT64_MODIFIER "x of vm %s is ROM (%s)", r->gpa, name, range->block);
    return FALSE;
  }
  /* QEMU's own memory, not the guest's: the kernel would signal QEMU all
   * the same, and what QEMU does then is for it to decide */
  if (!r->in_ram && r->trigger == VMCE_SIM_TRIGGER_ACCESS) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "HVA 0x%" G_GINT64_MODIFIER "x is not guest RAM of vm %s: only "
                 "--trigger now can be simulated there",
                 r->hva, name);
    return FALSE;
  }
  if (r->lsb > VMCE_PAGE_SHIFT && (!r->in_ram || r->kind != VMCE_MCE_KIND_AO || vmce_vm_is_kvm (vm))) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 !r->in_ram ? "a huge page is lost in guest RAM: give a GPA"
                 : r->kind != VMCE_MCE_KIND_AO
                     ? "a huge page's loss is simulated as found (AO); its other pages come as AR "
                       "when the guest reads them"
                     : "vm %s runs under KVM, which fails KVM_RUN on a protected page instead of "
                       "faulting: use the host lab for real huge-page errors",
                 name);
    return FALSE;
  }
  if (!r->in_ram)
    r->trigger = VMCE_SIM_TRIGGER_NOW;
  if (r->trigger == VMCE_SIM_TRIGGER_AUTO)
    r->trigger = r->kind == VMCE_MCE_KIND_AR && !vmce_vm_is_kvm (vm) ? VMCE_SIM_TRIGGER_ACCESS
                                                                     : VMCE_SIM_TRIGGER_NOW;
  if (r->trigger == VMCE_SIM_TRIGGER_ACCESS && r->kind == VMCE_MCE_KIND_AO) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "an AO error is reported when it is found, not on access; use --kind ar");
    return FALSE;
  }
  if (r->trigger == VMCE_SIM_TRIGGER_ACCESS && vmce_vm_is_kvm (vm)) {
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_SUPPORTED,
                 "vm %s runs under KVM, which fails KVM_RUN on a protected page "
                 "instead of faulting: simulate AR with --trigger now, or use the "
                 "host lab for real errors",
                 name);
    return FALSE;
  }
  if (r->in_ram && r->kind == VMCE_MCE_KIND_AR && r->trigger == VMCE_SIM_TRIGGER_NOW) {
    r->vcpu = vmce_vm_find_vcpu (vm, r->cpu < 0 ? 0 : (guint) r->cpu);
    if (r->vcpu == NULL) {
      g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER, "vm %s has no vCPU %d", name,
                   r->cpu < 0 ? 0 : r->cpu);
      return FALSE;
    }
  }
  return TRUE;
}

void
vmce_sim_poison_async (VmceVm *vm,
                       guint64 addr,
                       gboolean is_hva,
                       VmceMceKind kind,
                       VmceSimTrigger trigger,
                       gint cpu,
                       guint lsb,
                       guint timeout_ms,
                       GAsyncReadyCallback callback,
                       gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, callback, user_data);
  g_autoptr(GError) error = NULL;
  VmceSimRequest r = {
    .hva = is_hva ? addr : 0,
    .gpa = is_hva ? 0 : addr,
    .is_hva = is_hva,
    .kind = kind,
    .trigger = trigger,
    .cpu = cpu,
    .lsb = lsb,
  };
  VmceSimWaiter *w;
  VmceSimOp *op;

  vmce_sim_tables_init (vm);
  if (vmce_vm_get_state (vm) != VMCE_VM_READY) {
    g_task_return_new_error (task, VMCE_ERROR, VMCE_ERROR_NOT_READY, "vm %s is not attached",
                             vmce_vm_get_name (vm));
    return;
  }
  if (!vmce_sim_check_request (vm, &r, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }

  w = g_new0 (VmceSimWaiter, 1);
  w->vm = vm;
  w->id = ++vmce_sim_next_id;
  w->task = g_steal_pointer (&task);
  w->host_page = r.hva & VMCE_PAGE_MASK;
  w->on_access = r.trigger == VMCE_SIM_TRIGGER_ACCESS;
  w->timeout_source = g_timeout_add (timeout_ms, vmce_sim_waiter_timeout_cb, w);
  g_ptr_array_add (vmce_simulator (vm)->waiters, w);

  op = g_new0 (VmceSimOp, 1);
  op->vm = vmce_vm_ref (vm);
  op->host_page = r.hva & VMCE_PAGE_MASK;
  op->lsb = MAX (r.lsb, VMCE_PAGE_SHIFT);
  if (r.lsb > VMCE_PAGE_SHIFT) {
    /* the host kernel unmaps all of it, and names the raw page the error
     * is in, with the huge page's lsb: since Linux 6.6 (collect_procs() is
     * given the raw page; 6.1, the lab's first L1, named the head, which
     * under hugepage = salvage would tell the guest of a healthy page) */
    guint64 size = G_GUINT64_CONSTANT (1) << r.lsb;
    op->pages = vmce_ram_layout_guest_pages (vmce_vm_get_layout (vm), r.hva & ~(size - 1), size);
  } else {
    VmceGuestPage p = { .gpa = r.gpa & VMCE_PAGE_MASK, .hva = op->host_page };
    op->pages = g_array_new (FALSE, FALSE, sizeof (VmceGuestPage));
    g_array_append_val (op->pages, p);
  }
  op->request_id = w->id;
  /* what the kernel does to QEMU's mapping, where KVM can take it */
  op->protect = r.in_ram && !vmce_vm_is_kvm (vm) &&
                !(r.kind == VMCE_MCE_KIND_AR && r.trigger == VMCE_SIM_TRIGGER_NOW);
  op->send = r.trigger == VMCE_SIM_TRIGGER_NOW;
  op->code = r.kind == VMCE_MCE_KIND_AR ? BUS_MCEERR_AR : BUS_MCEERR_AO;
  op->target = r.vcpu != NULL ? r.vcpu->tid : vmce_vm_get_pid (vm);
  if (op->protect)
    vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm), vmce_sim_op_cb, op, vmce_sim_op_free);
  else
    vmce_sim_op_cb (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm), op);
}

JsonNode *
vmce_sim_poison_finish (VmceVm *vm, GAsyncResult *res, GError **error)
{
  return g_task_propagate_pointer (G_TASK (res), error);
}

static void
vmce_sim_fill_siginfo (siginfo_t *info, int code, guint64 addr, guint lsb)
{
  /* what force_sig_mceerr()/send_sig_mceerr() fill in */
  memset (info, 0, sizeof *info);
  info->si_signo = SIGBUS;
  info->si_errno = 0;
  info->si_code = code;
  info->si_addr = GSIZE_TO_POINTER (addr);
  info->si_addr_lsb = (short) lsb;
}

gboolean
vmce_sim_rewrite (VmceVm *vm, pid_t tid, siginfo_t *info, guint64 *request_id)
{
  VmceSimulator *sim = vmce_simulator (vm);
  g_autoptr(GError) error = NULL;
  siginfo_t rewritten;

  if (sim == NULL)
    return FALSE;
  *request_id = 0;
  if (info->si_signo == SIGBUS && info->si_code == SI_TKILL && info->si_pid == getpid ()) {
    GQueue *queue = g_hash_table_lookup (sim->pending, GINT_TO_POINTER (tid));
    g_autofree VmceSimSignal *sig = queue != NULL ? g_queue_pop_head (queue) : NULL;

    if (sig == NULL)
      return FALSE;
    vmce_sim_fill_siginfo (&rewritten, sig->code, sig->addr, sig->lsb);
    *request_id = sig->request_id;
    /* a second plain SIGBUS sent while the first was pending was merged
     * into it (signals below SIGRTMIN do not queue): ask for the next */
    if (!g_queue_is_empty (queue) && syscall (SYS_tgkill, vmce_vm_get_pid (vm), tid, SIGBUS) < 0)
      g_warning ("vm %s: tgkill %d: %s", vmce_vm_get_name (vm), tid, g_strerror (errno));
  } else if ((info->si_signo == SIGSEGV || (info->si_signo == SIGBUS && info->si_code == BUS_ADRERR)) &&
             vmce_sim_is_protected (vm, (guint64) (guintptr) info->si_addr & VMCE_PAGE_MASK)) {
    guint64 page = (guint64) (guintptr) info->si_addr & VMCE_PAGE_MASK;

    gpointer lsb = g_hash_table_lookup (sim->huge, &page);

    /* the kernel reports the faulting address itself for a consumed page,
     * with the size of the page it lost (VM_FAULT_HWPOISON_LARGE) */
    vmce_sim_fill_siginfo (&rewritten, BUS_MCEERR_AR, (guint64) (guintptr) info->si_addr,
                           lsb != NULL ? GPOINTER_TO_UINT (lsb) : VMCE_PAGE_SHIFT);
    for (guint i = 0; i < sim->waiters->len; i++) {
      VmceSimWaiter *w = g_ptr_array_index (sim->waiters, i);
      if (w->on_access && w->host_page == page)
        *request_id = w->id;
    }
  } else {
    return FALSE;
  }
  if (!vmce_ptrace_watch_set_siginfo (vmce_vm_get_watch (vm), tid, &rewritten, &error)) {
    g_warning ("vm %s: %s", vmce_vm_get_name (vm), error->message);
    return FALSE;
  }
  *info = rewritten;
  return TRUE;
}

guint
vmce_sim_count_protected (VmceVm *vm)
{
  VmceSimulator *sim = vmce_simulator (vm);

  return sim != NULL ? g_hash_table_size (sim->protected) : 0;
}

gboolean
vmce_sim_is_protected (VmceVm *vm, guint64 host_page)
{
  VmceSimulator *sim = vmce_simulator (vm);

  return sim != NULL && g_hash_table_contains (sim->protected, &host_page);
}

/* The kernel's poison markers among [@start, @start + @len) dropped (the
 * pages read zeros then): mprotect() alone leaves a marker in place */
static gboolean
vmce_sim_drop_markers (VmceVm *vm, pid_t tid, guint64 start, guint64 len, GError **error)
{
  VmceSimulator *sim = vmce_simulator (vm);

  for (guint64 page = start; sim != NULL && page < start + len; page += VMCE_PAGE_SIZE) {
    if (!g_hash_table_contains (sim->marked, &page))
      continue;
    if (!vmce_remote_madvise (vmce_vm_get_pid (vm), tid, page, VMCE_PAGE_SIZE, MADV_DONTNEED, error))
      return FALSE;
    g_hash_table_remove (sim->marked, &page);
  }
  return TRUE;
}

gboolean
vmce_sim_is_raw (VmceVm *vm, guint64 host_page)
{
  VmceSimulator *sim = vmce_simulator (vm);

  host_page &= VMCE_PAGE_MASK;
  return sim != NULL && g_hash_table_contains (sim->raw, &host_page);
}

guint
vmce_sim_lost_lsb (VmceVm *vm, guint64 host_page)
{
  VmceSimulator *sim = vmce_simulator (vm);

  host_page &= VMCE_PAGE_MASK;
  return sim != NULL ? GPOINTER_TO_UINT (g_hash_table_lookup (sim->huge, &host_page)) : 0;
}

gboolean
vmce_sim_unprotect (VmceVm *vm, pid_t tid, guint64 host_page, GError **error)
{
  if (!vmce_sim_drop_markers (vm, tid, host_page, VMCE_PAGE_SIZE, error) ||
      !vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, host_page, VMCE_PAGE_SIZE, PROT_READ | PROT_WRITE,
                             error)) {
    g_prefix_error (error, "cannot give page 0x%" G_GINT64_MODIFIER "x back to QEMU: ",
                    host_page);
    return FALSE;
  }
  g_hash_table_remove (vmce_simulator (vm)->protected, &host_page);
  g_hash_table_remove (vmce_simulator (vm)->huge, &host_page);
  return TRUE;
}

GArray *
vmce_sim_get_protected (VmceVm *vm)
{
  VmceSimulator *sim = vmce_simulator (vm);
  GArray *pages;
  GHashTableIter iter;
  gpointer key;

  if (sim == NULL || g_hash_table_size (sim->protected) == 0)
    return NULL;
  pages = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_hash_table_iter_init (&iter, sim->protected);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_array_append_val (pages, *(guint64 *) key);
  return pages;
}

void
vmce_sim_forget_page (VmceVm *vm, guint64 host_page, const gchar *why)
{
  VmceSimulator *sim = vmce_simulator (vm);

  host_page &= VMCE_PAGE_MASK;
  if (sim == NULL || !g_hash_table_remove (sim->protected, &host_page))
    return;
  g_hash_table_remove (sim->marked, &host_page);
  g_hash_table_remove (sim->huge, &host_page);
  g_hash_table_remove (sim->raw, &host_page);
  for (guint i = 0; i < sim->waiters->len;) {
    VmceSimWaiter *w = g_ptr_array_index (sim->waiters, i);
    if (w->on_access && w->host_page == host_page) {
      vmce_sim_waiter_fail (w, g_error_new (VMCE_ERROR, VMCE_ERROR_GENERIC, "vm %s: %s",
                                            vmce_vm_get_name (vm), why));
      continue;
    }
    i++;
  }
}

void
vmce_sim_adopt_marked_page (VmceVm *vm, guint64 host_page, guint64 gpa)
{
  guint64 *key = g_new (guint64, 1);

  vmce_sim_adopt_page (vm, host_page, gpa);
  *key = host_page & VMCE_PAGE_MASK;
  g_hash_table_add (vmce_simulator (vm)->marked, key);
}

void
vmce_sim_adopt_page (VmceVm *vm, guint64 host_page, guint64 gpa)
{
  guint64 *key = g_new (guint64, 1);
  guint64 *value = g_new (guint64, 1);

  vmce_sim_tables_init (vm);
  *key = host_page & VMCE_PAGE_MASK;
  *value = gpa & VMCE_PAGE_MASK;
  g_hash_table_replace (vmce_simulator (vm)->protected, key, value);
}

void
vmce_sim_event_done (VmceVm *vm, const VmceMceEvent *ev, JsonNode *json)
{
  VmceSimWaiter *w;

  if (ev->request_id == 0 || (w = vmce_sim_find_waiter (vm, ev->request_id)) == NULL)
    return;
  g_ptr_array_remove (vmce_simulator (vm)->waiters, w);
  g_task_return_pointer (w->task, json_node_ref (json), (GDestroyNotify) json_node_unref);
  vmce_sim_waiter_free (w);
}

static gint
vmce_sim_u64_cmp (gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *) a, y = *(const guint64 *) b;

  return x < y ? -1 : x > y;
}

/* Every page taken away in [@start, @end), back to QEMU, one mprotect()
 * per run of consecutive pages: a hugetlbfs mapping takes back a lost huge
 * page whole, never a 4 KiB piece of it (mprotect() splits its VMA only at
 * the huge page size, and says EINVAL) */
static gboolean
vmce_sim_give_back_runs (VmceVm *vm, pid_t tid, guint64 start, guint64 end, GError **error)
{
  VmceSimulator *sim = vmce_simulator (vm);
  g_autoptr(GArray) pages = g_array_new (FALSE, FALSE, sizeof (guint64));
  GHashTableIter iter;
  gpointer key;
  gboolean ok = TRUE;

  g_hash_table_iter_init (&iter, sim->protected);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (*(guint64 *) key >= start && *(guint64 *) key < end)
      g_array_append_val (pages, *(guint64 *) key);
  g_array_sort (pages, vmce_sim_u64_cmp);
  for (guint i = 0; i < pages->len;) {
    guint64 first = g_array_index (pages, guint64, i);
    g_autoptr(GError) local = NULL;
    guint j = i + 1;

    while (j < pages->len && g_array_index (pages, guint64, j) == first + (guint64) (j - i) * VMCE_PAGE_SIZE)
      j++;
    if (vmce_sim_drop_markers (vm, tid, first, (guint64) (j - i) * VMCE_PAGE_SIZE, &local) &&
        vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, first, (guint64) (j - i) * VMCE_PAGE_SIZE,
                              PROT_READ | PROT_WRITE, &local)) {
      for (guint k = i; k < j; k++) {
        g_hash_table_remove (sim->protected, &g_array_index (pages, guint64, k));
        g_hash_table_remove (sim->huge, &g_array_index (pages, guint64, k));
        g_hash_table_remove (sim->raw, &g_array_index (pages, guint64, k));
      }
    } else if (ok) {
      ok = FALSE;
      g_propagate_prefixed_error (error, g_steal_pointer (&local),
                                  "cannot give pages 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER
                                  "x back to QEMU: ", first, first + (guint64) (j - i) * VMCE_PAGE_SIZE - 1);
    }
    i = j;
  }
  return ok;
}

gboolean
vmce_sim_unprotect_huge (VmceVm *vm, pid_t tid, guint64 host_page, GError **error)
{
  VmceSimulator *sim = vmce_simulator (vm);
  guint lsb = sim != NULL ? GPOINTER_TO_UINT (g_hash_table_lookup (sim->huge, &host_page)) : 0;
  guint64 size = lsb > VMCE_PAGE_SHIFT ? G_GUINT64_CONSTANT (1) << lsb : VMCE_PAGE_SIZE;
  guint64 start = host_page & ~(size - 1);

  if (sim == NULL)
    return TRUE;
  return vmce_sim_give_back_runs (vm, tid, start, start + size, error);
}

static void
vmce_sim_release_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceVm *vm = user_data;
  VmceSimulator *sim = vmce_simulator (vm);
  g_autoptr(GError) error = NULL;

  if (!vmce_sim_give_back_runs (vm, tid, 0, G_MAXUINT64, &error))
    g_warning ("vm %s: %s", vmce_vm_get_name (vm), error->message);
  /* what could not be given back is not vmced's any more */
  g_hash_table_remove_all (sim->protected);
  g_hash_table_remove_all (sim->marked);
  g_hash_table_remove_all (sim->huge);
  g_hash_table_remove_all (sim->raw);
  vmce_vm_unref (vm);
}

void
vmce_sim_release_all (VmceVm *vm)
{
  VmceSimulator *sim = vmce_simulator (vm);

  if (sim == NULL || g_hash_table_size (sim->protected) == 0 ||
      vmce_vm_get_watch (vm) == NULL)
    return;
  g_debug ("vm %s: giving %u simulated-poisoned page(s) back", vmce_vm_get_name (vm),
           g_hash_table_size (sim->protected));
  vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm), vmce_sim_release_cb, vmce_vm_ref (vm),
                                  (GDestroyNotify) vmce_vm_unref);
}

void
vmce_sim_cancel_all (VmceVm *vm, const gchar *why)
{
  VmceSimulator *sim = vmce_simulator (vm);

  while (sim != NULL && sim->waiters->len > 0) {
    VmceSimWaiter *w = g_ptr_array_index (sim->waiters, 0);
    vmce_sim_waiter_fail (w, g_error_new (VMCE_ERROR, VMCE_ERROR_GENERIC, "vm %s: %s",
                                          vmce_vm_get_name (vm), why));
  }
  if (sim != NULL)
    g_hash_table_remove_all (sim->pending);
}
