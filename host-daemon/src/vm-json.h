/*
 * A vm session as JSON: vmcectl status (counts), vmcectl vm (the lists
 * too) and the journal's attach record (the short lists). Above the session: it reads
 * vm.h's getters only.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "vm.h"

typedef enum {
  /* the session, its layers' members and "counts": what query-status
   * gives for every VM, whatever it went through */
  VMCE_VM_JSON_SUMMARY = 0,
  /* and the short lists: vCPUs, ptrace stops, what the layout skipped */
  VMCE_VM_JSON_LISTS = 1 << 0,
  /* and the poisoned pages (10^4 after a storm, or from the journal when
   * a restarted vmced attaches): vmcectl vm alone lists them */
  VMCE_VM_JSON_PAGES = 1 << 1,
  /* and the RAM layout */
  VMCE_VM_JSON_LAYOUT = 1 << 2,
} VmceVmJsonFlags;

JsonNode *vmce_vm_to_json (VmceVm *vm, VmceVmJsonFlags flags);
