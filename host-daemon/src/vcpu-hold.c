/*
 * Every vCPU thread of a VM held (see vcpu-hold.h).
 *
 * A vCPU is stopped by interrupting it (PTRACE_INTERRUPT through
 * vmce_ptrace_watch_call_stopped()), so the hold is ready only when each
 * one has reached its stop: a request per vCPU, each counted once, whether
 * it ran or its thread ended first. A request may run after the hold was
 * let go: it then holds nothing.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-vm"

#include "vcpu-hold.h"

struct _VmceVcpuHold {
  gint ref;
  VmceVm *vm;
  VmceVcpuHoldReady ready;
  gpointer user_data;
  guint pending;   /* requests not yet answered */
  GArray *held;    /* tids this hold stopped, of pid_t */
  GArray *stopped; /* and those another layer holds */
  gboolean released;
  gint64 since_us;
};

typedef struct {
  VmceVcpuHold *hold;
  gboolean answered;
} VmceVcpuHoldRequest;

static void
vmce_vcpu_hold_unref (VmceVcpuHold *self)
{
  if (!g_atomic_int_dec_and_test (&self->ref))
    return;
  g_array_unref (self->held);
  g_array_unref (self->stopped);
  vmce_vm_unref (self->vm);
  g_free (self);
}

static void
vmce_vcpu_hold_answered (VmceVcpuHoldRequest *req)
{
  VmceVcpuHold *self = req->hold;

  if (req->answered)
    return;
  req->answered = TRUE;
  if (--self->pending == 0 && !self->released && self->ready != NULL)
    self->ready (self->vm, self, self->user_data);
}

static void
vmce_vcpu_hold_request_free (VmceVcpuHoldRequest *req)
{
  /* the thread ended before it stopped: nothing to wait for */
  vmce_vcpu_hold_answered (req);
  vmce_vcpu_hold_unref (req->hold);
  g_free (req);
}

/* (a request that runs is its own to free: the watch calls the destroy
 * function only for one that never runs) */
static void
vmce_vcpu_hold_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceVcpuHoldRequest *req = user_data;
  VmceVcpuHold *self = req->hold;

  if (!self->released) {
    if (vmce_ptrace_watch_is_held (watch, tid)) {
      g_array_append_val (self->stopped, tid);
    } else {
      vmce_ptrace_watch_hold (watch, tid);
      g_array_append_val (self->held, tid);
    }
  }
  vmce_vcpu_hold_request_free (req);
}

VmceVcpuHold *
vmce_vcpu_hold_new (VmceVm *vm, VmceVcpuHoldReady ready, gpointer user_data)
{
  VmceVcpuHold *self = g_new0 (VmceVcpuHold, 1);
  GArray *vcpus = vmce_vm_get_vcpus (vm);
  VmcePtraceWatch *watch = vmce_vm_get_watch (vm);

  self->ref = 1;
  self->vm = vmce_vm_ref (vm);
  self->ready = ready;
  self->user_data = user_data;
  self->held = g_array_new (FALSE, FALSE, sizeof (pid_t));
  self->stopped = g_array_new (FALSE, FALSE, sizeof (pid_t));
  self->since_us = g_get_monotonic_time ();
  /* one more than the requests, so that a request answered at once (a
   * vCPU already held) does not make the hold ready half-way */
  self->pending = 1;
  for (guint i = 0; watch != NULL && vcpus != NULL && i < vcpus->len; i++) {
    VmceVcpuHoldRequest *req = g_new0 (VmceVcpuHoldRequest, 1);

    req->hold = self;
    g_atomic_int_inc (&self->ref);
    self->pending++;
    vmce_ptrace_watch_call_stopped (watch, g_array_index (vcpus, VmceVcpu, i).tid, vmce_vcpu_hold_cb, req,
                                    (GDestroyNotify) vmce_vcpu_hold_request_free);
  }
  if (--self->pending == 0 && self->ready != NULL)
    self->ready (vm, self, user_data);
  return self;
}

gboolean
vmce_vcpu_hold_is_ready (VmceVcpuHold *self)
{
  return self->pending == 0;
}

pid_t
vmce_vcpu_hold_get_tid (VmceVcpuHold *self)
{
  if (self->held->len > 0)
    return g_array_index (self->held, pid_t, 0);
  if (self->stopped->len > 0)
    return g_array_index (self->stopped, pid_t, 0);
  return 0;
}

gint64
vmce_vcpu_hold_get_age_us (VmceVcpuHold *self)
{
  return g_get_monotonic_time () - self->since_us;
}

void
vmce_vcpu_hold_release (VmceVcpuHold *self)
{
  VmcePtraceWatch *watch;

  if (self == NULL)
    return;
  watch = vmce_vm_get_watch (self->vm);
  self->released = TRUE;
  for (guint i = 0; watch != NULL && i < self->held->len; i++)
    vmce_ptrace_watch_release (watch, g_array_index (self->held, pid_t, i));
  g_array_set_size (self->held, 0);
  vmce_vcpu_hold_unref (self);
}
