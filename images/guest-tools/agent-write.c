// SPDX-License-Identifier: GPL-2.0-or-later
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "agent-write.h"

int write_string(const char *path, const char *value, struct error *err)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s", path,
			    strerror(errno));
	n = write(fd, value, strlen(value));
	int saved = errno;

	close(fd);
	if (n < 0) {
		errno = saved;
		return fail(err, "Failed", "writing %s to %s: %s", value, path, strerror(saved));
	}
	return 0;
}
