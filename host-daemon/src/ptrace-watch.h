/*
 * Watching every thread of a process with ptrace.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <signal.h>
#include <sys/types.h>

typedef struct _VmcePtraceWatch VmcePtraceWatch;

typedef struct {
  /* A thread reached signal-delivery-stop. Return TRUE to take the stop:
   * the thread then stays stopped until vmce_ptrace_watch_resume(); FALSE
   * passes the signal on unchanged. @info may be changed and then written
   * back with vmce_ptrace_watch_set_siginfo() before resuming. */
  gboolean (*signal_stop) (VmcePtraceWatch *watch,
                           pid_t tid,
                           siginfo_t *info,
                           gint64 stop_time_us,
                           gpointer user_data);
  /* Every thread traced and set up */
  void (*attached) (VmcePtraceWatch *watch, gpointer user_data);
  /* The process is gone; @wait_status as from waitpid() of its main thread */
  void (*exited) (VmcePtraceWatch *watch, int wait_status, gpointer user_data);
  /* Every thread has been let go */
  void (*detached) (VmcePtraceWatch *watch, gpointer user_data);
} VmcePtraceWatchFuncs;

/* Called at a ptrace-stop of @tid; the thread continues afterwards unless
 * the function holds it with vmce_ptrace_watch_hold() */
typedef void (*VmceStoppedFunc) (VmcePtraceWatch *watch, pid_t tid, gpointer user_data);

VmcePtraceWatch *vmce_ptrace_watch_new (pid_t pid,
                                        const VmcePtraceWatchFuncs *funcs,
                                        gpointer user_data);
/* Also detaches synchronously if still attached (blocks for a few ms) */
void vmce_ptrace_watch_free (VmcePtraceWatch *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcePtraceWatch, vmce_ptrace_watch_free)

/* Seizes every thread now; the set-up completes from the main loop.
 * On failure, free the watch: that lets go of the threads seized so far. */
gboolean vmce_ptrace_watch_attach (VmcePtraceWatch *self, GError **error);
/* Restores signal masks and lets every thread go; completes from the main
 * loop with detached(). Held threads are let go with their signal. */
void vmce_ptrace_watch_detach (VmcePtraceWatch *self);
/* Detaches without the main loop, for shutdown */
void vmce_ptrace_watch_detach_sync (VmcePtraceWatch *self);

guint vmce_ptrace_watch_get_n_threads (VmcePtraceWatch *self);
/* Stops since attach, by thread and what stopped it: every signal a traced
 * thread takes, every clone it makes and every interrupt vmced sends stops
 * it until vmced lets it go. @code is the signal number, or
 * VMCE_PTRACE_STOP_EVENT | the PTRACE_EVENT_* number (its low 7 bits);
 * @stopped_us is the time the thread waited, summed over the stops that
 * have ended. */
#define VMCE_PTRACE_STOP_EVENT 0x80u
typedef struct {
  guint64 count;
  guint64 stopped_us;
} VmcePtraceStopTally;
typedef void (*VmcePtraceStopCountFunc) (pid_t tid,
                                         guint code,
                                         const VmcePtraceStopTally *tally,
                                         gpointer user_data);
void vmce_ptrace_watch_foreach_stop (VmcePtraceWatch *self, VmcePtraceStopCountFunc func, gpointer user_data);
/* "clone", "interrupt"; NULL for an event vmced does not ask for */
const gchar *vmce_ptrace_stop_event_name (guint code);

/* A held thread (signal_stop returned TRUE, or a VmceStoppedFunc held it) */
gboolean vmce_ptrace_watch_is_held (VmcePtraceWatch *self, pid_t tid);
void vmce_ptrace_watch_hold (VmcePtraceWatch *self, pid_t tid);
/* Whether QEMU had SIGBUS blocked in @tid before vmced opened it */
gboolean vmce_ptrace_watch_blocks_sigbus (VmcePtraceWatch *self, pid_t tid);
/* Resumes @tid with @signo as it stands: SIGBUS not blocked again (what
 * resume() does for a thread that blocks it) */
void vmce_ptrace_watch_resume_unblocked (VmcePtraceWatch *self, pid_t tid, int signo);
gboolean vmce_ptrace_watch_set_siginfo (VmcePtraceWatch *self,
                                        pid_t tid,
                                        const siginfo_t *info,
                                        GError **error);
/* Lets a held thread run on, delivering @signo (0 suppresses the signal) */
void vmce_ptrace_watch_resume (VmcePtraceWatch *self, pid_t tid, int signo);
/* Lets a thread go that a VmceStoppedFunc held: a signal it had stopped
 * for, and that was not yet handed to signal_stop(), is handed over now */
void vmce_ptrace_watch_release (VmcePtraceWatch *self, pid_t tid);

/* Runs @func at the next ptrace-stop of @tid, interrupting it if needed;
 * @destroy frees @user_data if the thread ends before that */
void vmce_ptrace_watch_call_stopped (VmcePtraceWatch *self,
                                     pid_t tid,
                                     VmceStoppedFunc func,
                                     gpointer user_data,
                                     GDestroyNotify destroy);

/* Reaps every pending ptrace event; the daemon calls it on SIGCHLD */
void vmce_ptrace_dispatch (void);
