/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A value written to a kernel control file (tracefs, debugfs), failing
 * as a command fails: trace-mf and inject both switch the kernel's
 * machinery this way.
 */
#ifndef VMCE_AGENT_WRITE_H
#define VMCE_AGENT_WRITE_H

#include "agent-request.h"

int write_string(const char *path, const char *value, struct error *err);

#endif
