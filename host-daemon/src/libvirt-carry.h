/*
 * A libvirt domain's poisoned pages in its own metadata, so that they go
 * wherever the domain goes: a migration to another host, whose vmced reads
 * them when the domain arrives.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <libvirt/libvirt.h>

#include "daemon.h"

typedef struct _VmceLibvirtCarry VmceLibvirtCarry;

VmceLibvirtCarry *vmce_libvirt_carry_new (VmceDaemon *daemon);
/* The connection its writes go through; NULL while there is none */
void vmce_libvirt_carry_set_connection (VmceLibvirtCarry *self, virConnectPtr conn);
/* @vm, attached through libvirt: the pages its domain brought are
 * received (a migration's destination) */
void vmce_libvirt_carry_attached (VmceLibvirtCarry *self, VmceVm *vm, virDomainPtr dom);
void vmce_libvirt_carry_free (VmceLibvirtCarry *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceLibvirtCarry, vmce_libvirt_carry_free)
