/*
 * Watching every thread of a process with ptrace.
 *
 * Why ptrace at all: the host kernel reports a memory error to QEMU as a
 * SIGBUS, and the only way to see (and take) another process's signals
 * before its handlers run is to be its tracer.
 *
 * Why the signal masks are changed: QEMU blocks SIGBUS in its threads and
 * reads the "action optional" SIGBUS that the kernel sends to its main
 * thread from a signalfd. A blocked signal that is read from a signalfd is
 * never delivered, so a tracer never sees it. While attached, SIGBUS is
 * unblocked in every thread (PTRACE_SETSIGMASK at each thread's first stop),
 * which makes every SIGBUS go through signal-delivery-stop. On detach the
 * SIGBUS bit, and only that bit, is put back as it was.
 *
 * All ptrace requests are made from the main thread: the kernel ties a
 * tracee to the tracer *thread*, and the main loop is where stops are
 * reaped (signalfd for SIGCHLD, then waitid() until nothing is left).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-ptrace"

#include <dirent.h>
#include <errno.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc-info.h"
#include "ptrace-watch.h"

/* a thread created while attached is looked at again this much later */
#define VMCE_NEW_THREAD_RECHECK_MS 20
/* how long a synchronous detach waits for threads that do not stop */
#define VMCE_DETACH_SYNC_TIMEOUT_US (5 * G_USEC_PER_SEC)

typedef enum {
  VMCE_STOP_NONE,
  VMCE_STOP_SIGNAL, /* signal-delivery-stop: resume with a signal or 0 */
  VMCE_STOP_GROUP,  /* group-stop: the process was stopped, stay stopped */
  VMCE_STOP_EVENT,  /* PTRACE_EVENT_* stop, including PTRACE_INTERRUPT */
} VmceStopKind;

typedef struct {
  VmceStoppedFunc func;
  gpointer user_data;
  GDestroyNotify destroy; /* if @func never runs */
} VmceStopOp;

typedef struct {
  pid_t tid;
  VmcePtraceWatch *watch;
  gboolean set_up;         /* SIGBUS unblocked */
  gboolean new_thread;     /* started while attached */
  gboolean sigbus_blocked; /* ... and it was blocked before */
  gboolean interrupted;    /* PTRACE_INTERRUPT sent, stop not yet seen */
  gboolean detaching;
  gboolean held;
  VmceStopKind stop_kind; /* of the current stop, while stopped */
  int stop_sig;
  gint64 stop_time_us;
  /* what this stop is counted under (NULL: not counted, e.g. a group-stop) */
  VmcePtraceStopTally *stop_tally;
  /* a signal-delivery-stop's siginfo, read when it stopped: a remote
   * system call made at this stop replaces the kernel's copy with its
   * single-step trap's */
  siginfo_t siginfo;
  gboolean have_siginfo;
  gboolean signal_dispatched; /* signal_stop() has seen this stop */
  gboolean ops_ran;           /* a VmceStoppedFunc ran at this stop */
  GQueue ops; /* of VmceStopOp */
} VmceTracee;

typedef enum {
  VMCE_WATCH_NEW,
  VMCE_WATCH_ATTACHING,
  VMCE_WATCH_ATTACHED,
  VMCE_WATCH_DETACHING,
  VMCE_WATCH_DONE,
} VmceWatchState;

struct _VmcePtraceWatch {
  pid_t pid;
  VmcePtraceWatchFuncs funcs;
  gpointer user_data;
  GHashTable *threads; /* tid -> VmceTracee, owned */
  VmceWatchState state;
  guint n_setup_pending;
  gboolean exit_reported;
  /* stops since attach: (tid << 8 | VMCE_PTRACE_STOP_CODE) ->
   * VmcePtraceStopTally, owned. Each is a wait for vmced in that thread,
   * whatever stopped it (a signal, a clone, vmced's own interrupt): what
   * being QEMU's tracer costs it */
  GHashTable *stops;
};

/* every traced thread, of every watch: waitid() answers for all of them */
static GHashTable *vmce_tracees = NULL; /* tid -> VmceTracee, not owned */
static GHashTable *vmce_watches = NULL; /* pid -> VmcePtraceWatch, not owned */

static void vmce_tracee_continue (VmceTracee *t, int signo);
static gboolean vmce_tracee_recheck_cb (gpointer user_data);

static void
vmce_tracee_free (VmceTracee *t)
{
  VmceStopOp *op;

  while ((op = g_queue_pop_head (&t->ops)) != NULL) {
    if (op->destroy != NULL)
      op->destroy (op->user_data);
    g_free (op);
  }
  g_free (t);
}

static void
vmce_ptrace_tables_init (void)
{
  if (vmce_tracees != NULL)
    return;
  vmce_tracees = g_hash_table_new (g_direct_hash, g_direct_equal);
  vmce_watches = g_hash_table_new (g_direct_hash, g_direct_equal);
}

static VmceTracee *
vmce_ptrace_watch_add_thread (VmcePtraceWatch *self, pid_t tid)
{
  VmceTracee *t = g_new0 (VmceTracee, 1);

  t->tid = tid;
  t->watch = self;
  g_queue_init (&t->ops);
  g_hash_table_insert (self->threads, GINT_TO_POINTER (tid), t);
  g_hash_table_insert (vmce_tracees, GINT_TO_POINTER (tid), t);
  if (self->state == VMCE_WATCH_ATTACHING)
    self->n_setup_pending++;
  return t;
}

static void
vmce_ptrace_watch_finish_attach (VmcePtraceWatch *self)
{
  if (self->state != VMCE_WATCH_ATTACHING || self->n_setup_pending > 0)
    return;
  self->state = VMCE_WATCH_ATTACHED;
  g_debug ("pid %d: %u thread(s) traced", self->pid, g_hash_table_size (self->threads));
  if (self->funcs.attached != NULL)
    self->funcs.attached (self, self->user_data);
}

static void
vmce_ptrace_watch_maybe_done (VmcePtraceWatch *self)
{
  if (g_hash_table_size (self->threads) > 0 || self->state == VMCE_WATCH_DONE)
    return;
  if (self->state == VMCE_WATCH_ATTACHING || self->state == VMCE_WATCH_ATTACHED) {
    /* every thread exited: only an exit notice can tell this */
    self->state = VMCE_WATCH_DONE;
    return;
  }
  if (self->state == VMCE_WATCH_DETACHING) {
    self->state = VMCE_WATCH_DONE;
    if (self->funcs.detached != NULL)
      self->funcs.detached (self, self->user_data);
  }
}

static void
vmce_ptrace_watch_remove_thread (VmcePtraceWatch *self, VmceTracee *t)
{
  gboolean was_setup_pending = !t->set_up && self->state == VMCE_WATCH_ATTACHING;

  g_hash_table_remove (vmce_tracees, GINT_TO_POINTER (t->tid));
  g_hash_table_remove (self->threads, GINT_TO_POINTER (t->tid));
  vmce_tracee_free (t);
  if (was_setup_pending && self->n_setup_pending > 0)
    self->n_setup_pending--;
}

/* SIGBUS is signal 7: bit 6 of the kernel's 64-bit sigset */
#define VMCE_SIGBUS_BIT (G_GUINT64_CONSTANT (1) << (SIGBUS - 1))

static void
vmce_tracee_set_up (VmceTracee *t)
{
  guint64 mask = 0;

  if (t->set_up)
    return;
  t->set_up = TRUE;
  if (t->watch->state == VMCE_WATCH_ATTACHING && t->watch->n_setup_pending > 0)
    t->watch->n_setup_pending--;
  if (ptrace (PTRACE_GETSIGMASK, t->tid, sizeof mask, &mask) < 0) {
    g_warning ("thread %d: cannot read signal mask: %s; SIGBUS may stay hidden in a signalfd",
               t->tid, g_strerror (errno));
    return;
  }
  t->sigbus_blocked = (mask & VMCE_SIGBUS_BIT) != 0;
  if (t->new_thread)
    g_timeout_add (VMCE_NEW_THREAD_RECHECK_MS, vmce_tracee_recheck_cb, GINT_TO_POINTER (t->tid));
  if (!t->sigbus_blocked)
    return;
  mask &= ~VMCE_SIGBUS_BIT;
  if (ptrace (PTRACE_SETSIGMASK, t->tid, sizeof mask, &mask) < 0)
    g_warning ("thread %d: cannot unblock SIGBUS: %s", t->tid, g_strerror (errno));
}

/* A thread created while attached is set up at its first stop, but glibc's
 * start_thread() then restores the mask its creator had at pthread_create()
 * (QEMU blocks every signal around thread creation), so look again once
 * the thread runs */
static void
vmce_tracee_recheck_op (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceTracee *t = g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (tid));
  guint64 mask = 0;

  if (t == NULL || ptrace (PTRACE_GETSIGMASK, tid, sizeof mask, &mask) < 0)
    return;
  if ((mask & VMCE_SIGBUS_BIT) == 0)
    return;
  t->sigbus_blocked = TRUE;
  mask &= ~VMCE_SIGBUS_BIT;
  if (ptrace (PTRACE_SETSIGMASK, tid, sizeof mask, &mask) < 0)
    g_warning ("thread %d: cannot unblock SIGBUS: %s", tid, g_strerror (errno));
}

static gboolean
vmce_tracee_recheck_cb (gpointer user_data)
{
  pid_t tid = GPOINTER_TO_INT (user_data);
  VmceTracee *t = g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (tid));

  if (t != NULL && !t->detaching)
    vmce_ptrace_watch_call_stopped (t->watch, tid, vmce_tracee_recheck_op, NULL, NULL);
  return G_SOURCE_REMOVE;
}

static void
vmce_tracee_restore_mask (VmceTracee *t)
{
  guint64 mask = 0;

  if (!t->set_up || !t->sigbus_blocked)
    return;
  /* QEMU may have changed other bits since: put back only ours */
  if (ptrace (PTRACE_GETSIGMASK, t->tid, sizeof mask, &mask) < 0)
    return;
  mask |= VMCE_SIGBUS_BIT;
  if (ptrace (PTRACE_SETSIGMASK, t->tid, sizeof mask, &mask) < 0)
    g_warning ("thread %d: cannot block SIGBUS again: %s", t->tid, g_strerror (errno));
}

/* At a stop: let the thread go for good */
/* The thread runs again: what it waited is a cost of this stop's kind */
static void
vmce_tracee_account_stop (VmceTracee *t)
{
  if (t->stop_tally == NULL)
    return;
  t->stop_tally->stopped_us += (guint64) MAX (0, g_get_monotonic_time () - t->stop_time_us);
  t->stop_tally = NULL;
}

static void
vmce_tracee_detach_now (VmceTracee *t)
{
  VmcePtraceWatch *watch = t->watch;
  int signo = t->stop_kind == VMCE_STOP_SIGNAL ? t->stop_sig : 0;

  vmce_tracee_restore_mask (t);
  vmce_tracee_account_stop (t);
  if (ptrace (PTRACE_DETACH, t->tid, NULL, GINT_TO_POINTER (signo)) < 0 && errno != ESRCH)
    g_warning ("thread %d: cannot detach: %s", t->tid, g_strerror (errno));
  vmce_ptrace_watch_remove_thread (watch, t);
  vmce_ptrace_watch_maybe_done (watch);
}

static void
vmce_tracee_continue (VmceTracee *t, int signo)
{
  long rc;

  t->held = FALSE;
  /* put back what the kernel delivers with the signal, if a function
   * run at this stop may have made the thread trap since */
  if (signo != 0 && t->ops_ran && t->have_siginfo && t->siginfo.si_signo == signo &&
      ptrace (PTRACE_SETSIGINFO, t->tid, NULL, &t->siginfo) < 0 && errno != ESRCH)
    g_warning ("thread %d: cannot restore its siginfo: %s", t->tid, g_strerror (errno));
  if (t->detaching) {
    t->stop_sig = signo;
    vmce_tracee_detach_now (t);
    return;
  }
  /* a group-stop must stay a stop: LISTEN waits for SIGCONT without
   * hiding later events from us */
  vmce_tracee_account_stop (t);
  if (t->stop_kind == VMCE_STOP_GROUP)
    rc = ptrace (PTRACE_LISTEN, t->tid, NULL, NULL);
  else
    rc = ptrace (PTRACE_CONT, t->tid, NULL, GINT_TO_POINTER (signo));
  if (rc < 0 && errno != ESRCH)
    g_warning ("thread %d: cannot resume: %s", t->tid, g_strerror (errno));
  t->stop_kind = VMCE_STOP_NONE;
}

static void
vmce_tracee_interrupt (VmceTracee *t)
{
  if (t->interrupted || t->stop_kind != VMCE_STOP_NONE)
    return;
  if (ptrace (PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0) {
    if (errno != ESRCH)
      g_warning ("thread %d: cannot interrupt: %s", t->tid, g_strerror (errno));
    return;
  }
  t->interrupted = TRUE;
}

/* Returns FALSE if the thread is gone or was let go */
static gboolean
vmce_tracee_run_ops (VmceTracee *t)
{
  pid_t tid = t->tid;
  VmceStopOp *op;

  while ((op = g_queue_pop_head (&t->ops)) != NULL) {
    VmceStoppedFunc func = op->func;
    gpointer data = op->user_data;
    g_free (op);
    t->ops_ran = TRUE;
    func (t->watch, tid, data);
    /* the function may have detached or freed the watch */
    if (g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (tid)) != t)
      return FALSE;
  }
  return TRUE;
}

static void
vmce_tracee_handle_signal_stop (VmceTracee *t, int sig, gint64 now)
{
  VmcePtraceWatch *watch = t->watch;
  siginfo_t info;

  t->signal_dispatched = TRUE;
  if (!t->have_siginfo) {
    vmce_tracee_continue (t, sig);
    return;
  }
  info = t->siginfo;
  if (watch->funcs.signal_stop != NULL &&
      (watch->state == VMCE_WATCH_ATTACHED || watch->state == VMCE_WATCH_ATTACHING) &&
      watch->funcs.signal_stop (watch, t->tid, &info, now, watch->user_data)) {
    /* the owner may have let it go already, or the watch may be gone */
    if (g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (t->tid)) == t &&
        t->stop_kind != VMCE_STOP_NONE)
      t->held = TRUE;
    return;
  }
  vmce_tracee_continue (t, sig);
}

static VmcePtraceStopTally *
vmce_ptrace_watch_count_stop (VmcePtraceWatch *self, pid_t tid, guint code)
{
  gpointer key = GUINT_TO_POINTER ((guint) tid << 8 | (code & 0xff));
  VmcePtraceStopTally *tally = g_hash_table_lookup (self->stops, key);

  if (tally == NULL) {
    tally = g_new0 (VmcePtraceStopTally, 1);
    g_hash_table_insert (self->stops, key, tally);
  }
  tally->count++;
  return tally;
}

static void
vmce_tracee_handle_stop (VmceTracee *t, int status, gint64 now)
{
  int sig = status & 0xff;
  int event = (status >> 8) & 0xff;

  if (event == PTRACE_EVENT_STOP) {
    gboolean group = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
    t->stop_kind = group ? VMCE_STOP_GROUP : VMCE_STOP_EVENT;
  } else if (event != 0) {
    t->stop_kind = VMCE_STOP_EVENT;
  } else {
    t->stop_kind = VMCE_STOP_SIGNAL;
  }
  t->stop_sig = sig;
  t->stop_time_us = now;
  /* a group-stop is whoever stopped QEMU's doing, not vmced's */
  if (t->stop_kind == VMCE_STOP_SIGNAL)
    t->stop_tally = vmce_ptrace_watch_count_stop (t->watch, t->tid, (guint) sig & 0x7f);
  else if (t->stop_kind == VMCE_STOP_EVENT)
    t->stop_tally = vmce_ptrace_watch_count_stop (t->watch, t->tid, VMCE_PTRACE_STOP_EVENT | ((guint) event & 0x7f));
  t->signal_dispatched = FALSE;
  t->ops_ran = FALSE;
  t->have_siginfo = FALSE;
  if (t->stop_kind == VMCE_STOP_SIGNAL) {
    memset (&t->siginfo, 0, sizeof t->siginfo);
    t->have_siginfo = ptrace (PTRACE_GETSIGINFO, t->tid, NULL, &t->siginfo) == 0;
  }
  /* whatever stop this is serves the interrupt: a remote syscall may have
   * swallowed the interrupt-stop itself, and a second one is harmless */
  t->interrupted = FALSE;

  vmce_tracee_set_up (t);
  vmce_ptrace_watch_finish_attach (t->watch);
  if (g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (t->tid)) != t)
    return;
  /* ops before detaching: undoing vmced's changes to QEMU is one of them */
  if (!vmce_tracee_run_ops (t))
    return;
  if (t->held)
    return;
  if (t->detaching) {
    vmce_tracee_detach_now (t);
    return;
  }
  if (t->stop_kind == VMCE_STOP_SIGNAL) {
    vmce_tracee_handle_signal_stop (t, sig, now);
    return;
  }
  vmce_tracee_continue (t, 0);
}

static VmcePtraceWatch *
vmce_ptrace_find_watch_for_new_thread (pid_t tid)
{
  gint64 tgid;

  if (!vmce_proc_status_number (tid, "Tgid", &tgid, NULL))
    return NULL;
  return g_hash_table_lookup (vmce_watches, GINT_TO_POINTER ((pid_t) tgid));
}

static void
vmce_ptrace_handle_exit (VmceTracee *t, int wait_status)
{
  VmcePtraceWatch *watch = t->watch;
  gboolean leader = t->tid == watch->pid;

  vmce_ptrace_watch_remove_thread (watch, t);
  if (leader && !watch->exit_reported) {
    watch->exit_reported = TRUE;
    if (watch->funcs.exited != NULL)
      watch->funcs.exited (watch, wait_status, watch->user_data);
    return; /* the watch may be freed now */
  }
  vmce_ptrace_watch_maybe_done (watch);
}

static gboolean
vmce_ptrace_dispatch_one (int flags)
{
  siginfo_t info;
  VmceTracee *t;
  gint64 now;
  int wait_status;

  memset (&info, 0, sizeof info);
  if (waitid (P_ALL, 0, &info, WEXITED | WSTOPPED | __WALL | flags) < 0) {
    if (errno != ECHILD && errno != EINTR)
      g_warning ("waitid: %s", g_strerror (errno));
    return FALSE;
  }
  if (info.si_pid == 0)
    return FALSE;
  now = g_get_monotonic_time ();

  t = vmce_tracees != NULL ? g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (info.si_pid))
                           : NULL;
  if (t == NULL && info.si_code == CLD_TRAPPED) {
    /* a thread created by a traced thread reports before its parent's
     * clone event, so find its process by Tgid */
    VmcePtraceWatch *watch = vmce_ptrace_find_watch_for_new_thread (info.si_pid);
    if (watch == NULL || watch->state == VMCE_WATCH_DONE) {
      (void) ptrace (PTRACE_DETACH, info.si_pid, NULL, NULL);
      return TRUE;
    }
    t = vmce_ptrace_watch_add_thread (watch, info.si_pid);
    t->new_thread = TRUE;
    if (watch->state == VMCE_WATCH_DETACHING)
      t->detaching = TRUE;
  }
  if (t == NULL)
    return TRUE;

  switch (info.si_code) {
  case CLD_TRAPPED:
  case CLD_STOPPED:
    vmce_tracee_handle_stop (t, info.si_status, now);
    break;
  case CLD_EXITED:
    wait_status = (info.si_status & 0xff) << 8;
    vmce_ptrace_handle_exit (t, wait_status);
    break;
  case CLD_KILLED:
  case CLD_DUMPED:
    wait_status = info.si_status & 0x7f;
    vmce_ptrace_handle_exit (t, wait_status);
    break;
  default:
    /* CLD_CONTINUED: nothing to do */
    break;
  }
  return TRUE;
}

void
vmce_ptrace_dispatch (void)
{
  while (vmce_ptrace_dispatch_one (WNOHANG))
    ;
}

/* /proc/PID/task lists the threads; the ones that start while we seize are
 * caught by PTRACE_O_TRACECLONE if their creator was seized already, so
 * list again until nothing new shows up */
static gboolean
vmce_ptrace_watch_seize_all (VmcePtraceWatch *self, GError **error)
{
  g_autofree gchar *taskdir = g_strdup_printf ("/proc/%d/task", self->pid);
  gboolean found_new = TRUE;

  while (found_new) {
    g_autoptr(GDir) dir = g_dir_open (taskdir, 0, NULL);
    const gchar *name;

    found_new = FALSE;
    if (dir == NULL) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "no process with pid %d", self->pid);
      return FALSE;
    }
    while ((name = g_dir_read_name (dir)) != NULL) {
      pid_t tid = atoi (name);
      VmceTracee *t;

      if (tid <= 0 || g_hash_table_contains (self->threads, GINT_TO_POINTER (tid)))
        continue;
      if (ptrace (PTRACE_SEIZE, tid, NULL, GINT_TO_POINTER (PTRACE_O_TRACECLONE)) < 0) {
        int errsv = errno;
        if (errsv == ESRCH && tid != self->pid)
          continue; /* the thread ended meanwhile */
        if (errsv == ESRCH) {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                       "no process with pid %d", self->pid);
          return FALSE;
        }
        if (errsv == EPERM) {
          gint64 tracer = 0;
          if (vmce_proc_status_number (tid, "TracerPid", &tracer, NULL) && tracer != 0) {
            g_set_error (error, G_IO_ERROR, G_IO_ERROR_BUSY,
                         "pid %d is already traced by pid %" G_GINT64_FORMAT
                         " (another vmced, or a debugger)", self->pid, tracer);
            return FALSE;
          }
        }
        g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                     "cannot trace thread %d of pid %d: %s", tid, self->pid,
                     g_strerror (errsv));
        return FALSE;
      }
      t = vmce_ptrace_watch_add_thread (self, tid);
      vmce_tracee_interrupt (t);
      found_new = TRUE;
    }
  }
  return TRUE;
}

gboolean
vmce_ptrace_watch_attach (VmcePtraceWatch *self, GError **error)
{
  g_return_val_if_fail (self->state == VMCE_WATCH_NEW, FALSE);

  if (g_hash_table_contains (vmce_watches, GINT_TO_POINTER (self->pid))) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS, "pid %d is already watched", self->pid);
    return FALSE;
  }
  self->state = VMCE_WATCH_ATTACHING;
  g_hash_table_insert (vmce_watches, GINT_TO_POINTER (self->pid), self);
  /* on failure the caller frees the watch, which lets go of what was seized */
  return vmce_ptrace_watch_seize_all (self, error);
}

void
vmce_ptrace_watch_detach (VmcePtraceWatch *self)
{
  GHashTableIter iter;
  gpointer value;
  g_autoptr(GPtrArray) now = g_ptr_array_new ();

  if (self->state == VMCE_WATCH_DONE || self->state == VMCE_WATCH_NEW) {
    self->state = VMCE_WATCH_DONE;
    return;
  }
  self->state = VMCE_WATCH_DETACHING;
  g_hash_table_iter_init (&iter, self->threads);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    VmceTracee *t = value;
    t->detaching = TRUE;
    /* a thread stopped but not held by anyone can go at once */
    if (t->stop_kind != VMCE_STOP_NONE && !t->held)
      g_ptr_array_add (now, t);
    else if (t->stop_kind == VMCE_STOP_NONE)
      vmce_tracee_interrupt (t);
  }
  for (guint i = 0; i < now->len; i++)
    vmce_tracee_detach_now (g_ptr_array_index (now, i));
  vmce_ptrace_watch_maybe_done (self);
}

void
vmce_ptrace_watch_detach_sync (VmcePtraceWatch *self)
{
  gint64 deadline = g_get_monotonic_time () + VMCE_DETACH_SYNC_TIMEOUT_US;
  GHashTableIter iter;
  gpointer value;

  g_autoptr(GPtrArray) held = g_ptr_array_new ();

  vmce_ptrace_watch_detach (self);
  /* held threads are let go with the signal they stopped for */
  g_hash_table_iter_init (&iter, self->threads);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    VmceTracee *t = value;
    if (t->held)
      g_ptr_array_add (held, t);
  }
  for (guint i = 0; i < held->len; i++) {
    VmceTracee *t = g_ptr_array_index (held, i);
    t->held = FALSE;
    vmce_tracee_detach_now (t);
  }
  while (self->state != VMCE_WATCH_DONE && g_hash_table_size (self->threads) > 0) {
    if (!vmce_ptrace_dispatch_one (WNOHANG)) {
      if (g_get_monotonic_time () > deadline) {
        g_warning ("pid %d: %u thread(s) did not stop to be detached; the kernel lets "
                   "them go when vmced exits",
                   self->pid, g_hash_table_size (self->threads));
        return;
      }
      g_usleep (1000);
    }
  }
}

/* How often, and how long, to look whether QEMU has read a SIGBUS handed
 * back to its signalfd */
#define VMCE_PASS_POLL_MS 2
#define VMCE_PASS_POLL_MAX 2500

typedef struct {
  pid_t tid;
  guint polls;
} VmcePassedSignal;

static gboolean
vmce_passed_signal_poll_cb (gpointer user_data)
{
  VmcePassedSignal *p = user_data;
  VmceTracee *t = g_hash_table_lookup (vmce_tracees, GINT_TO_POINTER (p->tid));

  if (t == NULL || t->detaching)
    return G_SOURCE_REMOVE;
  if (vmce_proc_signal_pending (t->watch->pid, p->tid, SIGBUS) && ++p->polls < VMCE_PASS_POLL_MAX)
    return G_SOURCE_CONTINUE;
  if (p->polls >= VMCE_PASS_POLL_MAX)
    g_debug ("thread %d: QEMU did not read its SIGBUS in %u ms; unblocking it anyway", p->tid,
             VMCE_PASS_POLL_MS * VMCE_PASS_POLL_MAX);
  /* read: SIGBUS open again, for the next error to stop */
  vmce_ptrace_watch_call_stopped (t->watch, p->tid, vmce_tracee_recheck_op, NULL, NULL);
  return G_SOURCE_REMOVE;
}

void
vmce_ptrace_watch_resume (VmcePtraceWatch *self, pid_t tid, int signo)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));
  guint64 mask = 0;
  VmcePassedSignal *p;

  if (t == NULL || t->stop_kind == VMCE_STOP_NONE)
    return; /* it died meanwhile */
  /* A SIGBUS passed on to a thread that blocks it (QEMU's main thread,
   * which reads it from a signalfd in its main loop) must not run QEMU's
   * handler where the thread happened to stop: that handler logs, which
   * takes locks the thread may hold (QEMU hung on its monitor lock). With
   * SIGBUS blocked again, the kernel puts the signal back as pending, and
   * QEMU reads it as it would have without vmced; SIGBUS is opened again
   * once it has. */
  if (signo == SIGBUS && t->sigbus_blocked && t->stop_kind == VMCE_STOP_SIGNAL &&
      ptrace (PTRACE_GETSIGMASK, tid, sizeof mask, &mask) == 0) {
    mask |= VMCE_SIGBUS_BIT;
    if (ptrace (PTRACE_SETSIGMASK, tid, sizeof mask, &mask) == 0) {
      p = g_new0 (VmcePassedSignal, 1);
      p->tid = tid;
      g_timeout_add_full (G_PRIORITY_DEFAULT, VMCE_PASS_POLL_MS, vmce_passed_signal_poll_cb, p,
                          g_free);
    }
  }
  vmce_tracee_continue (t, signo);
}

gboolean
vmce_ptrace_watch_blocks_sigbus (VmcePtraceWatch *self, pid_t tid)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  return t != NULL && t->sigbus_blocked;
}

void
vmce_ptrace_watch_resume_unblocked (VmcePtraceWatch *self, pid_t tid, int signo)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  if (t != NULL && t->stop_kind != VMCE_STOP_NONE)
    vmce_tracee_continue (t, signo);
}

void
vmce_ptrace_watch_hold (VmcePtraceWatch *self, pid_t tid)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  if (t != NULL && t->stop_kind != VMCE_STOP_NONE)
    t->held = TRUE;
}

gboolean
vmce_ptrace_watch_is_held (VmcePtraceWatch *self, pid_t tid)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  return t != NULL && t->held;
}

gboolean
vmce_ptrace_watch_set_siginfo (VmcePtraceWatch *self,
                               pid_t tid,
                               const siginfo_t *info,
                               GError **error)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  if (t == NULL || t->stop_kind != VMCE_STOP_SIGNAL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "thread %d is not in a signal-delivery-stop", tid);
    return FALSE;
  }
  if (ptrace (PTRACE_SETSIGINFO, tid, NULL, info) < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot set siginfo of thread %d: %s", tid, g_strerror (errsv));
    return FALSE;
  }
  t->siginfo = *info;
  t->have_siginfo = TRUE;
  return TRUE;
}

void
vmce_ptrace_watch_release (VmcePtraceWatch *self, pid_t tid)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));

  if (t == NULL || t->stop_kind == VMCE_STOP_NONE)
    return;
  /* held by a VmceStoppedFunc at a signal-delivery-stop nobody has looked
   * at yet: the signal is handled as if it had never been held */
  if (t->stop_kind == VMCE_STOP_SIGNAL && !t->signal_dispatched && !t->detaching) {
    t->held = FALSE;
    vmce_tracee_handle_signal_stop (t, t->stop_sig, t->stop_time_us);
    return;
  }
  vmce_tracee_continue (t, 0);
}

void
vmce_ptrace_watch_call_stopped (VmcePtraceWatch *self,
                                pid_t tid,
                                VmceStoppedFunc func,
                                gpointer user_data,
                                GDestroyNotify destroy)
{
  VmceTracee *t = g_hash_table_lookup (self->threads, GINT_TO_POINTER (tid));
  VmceStopOp *op;

  if (t == NULL) {
    if (destroy != NULL)
      destroy (user_data);
    return;
  }
  if (t->held) {
    /* it may make the thread trap (a remote system call) */
    t->ops_ran = TRUE;
    func (self, tid, user_data);
    return;
  }
  op = g_new0 (VmceStopOp, 1);
  op->func = func;
  op->user_data = user_data;
  op->destroy = destroy;
  g_queue_push_tail (&t->ops, op);
  vmce_tracee_interrupt (t);
}

guint
vmce_ptrace_watch_get_n_threads (VmcePtraceWatch *self)
{
  return g_hash_table_size (self->threads);
}

void
vmce_ptrace_watch_foreach_stop (VmcePtraceWatch *self, VmcePtraceStopCountFunc func, gpointer user_data)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, self->stops);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    guint k = GPOINTER_TO_UINT (key);
    func ((pid_t) (k >> 8), k & 0xff, value, user_data);
  }
}

const gchar *
vmce_ptrace_stop_event_name (guint code)
{
  switch (code & ~VMCE_PTRACE_STOP_EVENT) {
  case PTRACE_EVENT_CLONE:
    return "clone";
  case PTRACE_EVENT_STOP & 0x7f:
    /* PTRACE_INTERRUPT (vmced's own work at a stop) or a new thread's first stop */
    return "interrupt";
  default:
    return NULL;
  }
}

VmcePtraceWatch *
vmce_ptrace_watch_new (pid_t pid, const VmcePtraceWatchFuncs *funcs, gpointer user_data)
{
  VmcePtraceWatch *self = g_new0 (VmcePtraceWatch, 1);

  vmce_ptrace_tables_init ();
  self->pid = pid;
  self->funcs = *funcs;
  self->user_data = user_data;
  self->threads = g_hash_table_new (g_direct_hash, g_direct_equal);
  self->stops = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  return self;
}

void
vmce_ptrace_watch_free (VmcePtraceWatch *self)
{
  GHashTableIter iter;
  gpointer value;

  if (self == NULL)
    return;
  /* nobody is left to hear about it */
  memset (&self->funcs, 0, sizeof self->funcs);
  if (self->state != VMCE_WATCH_DONE && self->state != VMCE_WATCH_NEW &&
      g_hash_table_size (self->threads) > 0)
    vmce_ptrace_watch_detach_sync (self);
  g_hash_table_iter_init (&iter, self->threads);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    VmceTracee *t = value;
    g_hash_table_remove (vmce_tracees, GINT_TO_POINTER (t->tid));
    vmce_tracee_free (t);
  }
  if (g_hash_table_lookup (vmce_watches, GINT_TO_POINTER (self->pid)) == self)
    g_hash_table_remove (vmce_watches, GINT_TO_POINTER (self->pid));
  g_hash_table_unref (self->threads);
  g_hash_table_unref (self->stops);
  g_free (self);
}
