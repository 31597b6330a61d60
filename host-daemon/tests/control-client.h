/*
 * A client of vmced's control socket for unit tests: the other end of a
 * socketpair, reading what vmced sends as JSON objects.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "control.h"
#include "line-socket.h"

/* Connects to @control; every line vmced sends (the greeting first) is
 * parsed and pushed to @lines, as a JsonNode the test frees. Lines up to
 * @max_line bytes. */
VmceLineSocket *control_client_new (VmceControl *control, GQueue *lines, gsize max_line);
