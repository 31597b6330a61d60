/*
 * The commands of vmced's control socket.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "control.h"
#include "daemon.h"

void vmce_commands_register (VmceControl *control, VmceDaemon *daemon);
