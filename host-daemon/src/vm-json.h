/*
 * A vm session as JSON: vmcectl vm, vmcectl status and the journal's
 * attach record. Above the session: it reads vm.h's getters only.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "vm.h"

/* @with_layout: and the RAM layout (vmcectl vm) */
JsonNode *vmce_vm_to_json (VmceVm *vm, gboolean with_layout);
