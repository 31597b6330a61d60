/*
 * The unit vmced works in: the 4 KiB page, which is what a guest's machine
 * check names (MCi_MISC's address LSB is 12) and what vmced tracks as
 * poisoned, whatever page size backs the guest's RAM on the host.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

#define VMCE_PAGE_SHIFT 12
#define VMCE_PAGE_SIZE  (G_GUINT64_CONSTANT (1) << VMCE_PAGE_SHIFT)
#define VMCE_PAGE_MASK  (~(VMCE_PAGE_SIZE - 1))
