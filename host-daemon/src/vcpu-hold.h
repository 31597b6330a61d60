/*
 * Every vCPU thread of a VM held at a ptrace-stop for a while: the guest
 * is frozen, while QEMU's other threads run on.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

typedef struct _VmceVcpuHold VmceVcpuHold;

/* Called once every vCPU is held (or gone) */
typedef void (*VmceVcpuHoldReady) (VmceVm *vm, VmceVcpuHold *hold, gpointer user_data);

/* Stops every vCPU of @vm at its next ptrace-stop, then calls @ready. A
 * vCPU another layer holds already counts as held, and stays that layer's
 * when this hold is let go. */
VmceVcpuHold *vmce_vcpu_hold_new (VmceVm *vm, VmceVcpuHoldReady ready, gpointer user_data);
gboolean vmce_vcpu_hold_is_ready (VmceVcpuHold *self);
/* A held vCPU thread, in a ptrace-stop, that can make system calls for
 * QEMU (remote-syscall.h); 0 if the VM has none */
pid_t vmce_vcpu_hold_get_tid (VmceVcpuHold *self);
/* Microseconds since the hold was asked for */
gint64 vmce_vcpu_hold_get_age_us (VmceVcpuHold *self);
/* Lets every vCPU it holds go, or gives up waiting for them; frees @self */
void vmce_vcpu_hold_release (VmceVcpuHold *self);
