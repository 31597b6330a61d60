// SPDX-License-Identifier: GPL-2.0-or-later
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"

ssize_t read_file(const char *path, char *out, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (len + 1 < size && (n = read(fd, out + len, size - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;

			close(fd);
			errno = saved;
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	out[len] = '\0';
	return (ssize_t)len;
}

enum read_u64_result read_u64_at(const char *path, uint64_t index, uint64_t *v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	int saved;

	if (fd < 0)
		return RU64_OPEN;
	n = pread(fd, v, sizeof(*v), (off_t)(index * 8));
	saved = errno;
	close(fd);
	errno = saved;
	if (n < 0)
		return RU64_READ;
	return n == sizeof(*v) ? RU64_OK : RU64_PAST_END;
}

long long meminfo_field(const char *text, const char *key)
{
	size_t len = strlen(key);
	long long value = -1;

	for (const char *line = text; *line; line += strcspn(line, "\n"), line += *line == '\n')
		if (!strncmp(line, key, len) && line[len] == ':')
			value = strtoll(line + len + 1, NULL, 10);
	return value;
}

int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end ? -1 : 0;
}
