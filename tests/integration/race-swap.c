/* SPDX-License-Identifier: MIT */
/*
 * dioloop-race-swap: what a user who owns a directory does when root
 * creates a file in it (tests/integration/test-adversary-cli.sh).  Fast
 * enough (inotify, no interpreter) to land between a create and the next
 * open by name, a window of about a millisecond.
 *
 *   dioloop-race-swap file DIR NAME MARKER SECONDS READY
 *       Once NAME is created in DIR, swap it with a file of the caller's
 *       own, NAME.aside, kept open read-write and given the size of the
 *       one swapped out once it has one.  After SECONDS, read both:
 *       "leak" when MARKER is in either, else "ok swapped" (or
 *       "ok no-event").
 *   dioloop-race-swap symlink DIR NAME TARGET SECONDS READY
 *       Once NAME is created in DIR, swap it with a symlink to TARGET,
 *       NAME.aside: "swapped" (or "no-event").
 *
 *   dioloop-race-swap dir WATCH DIRPATH TARGET SECONDS READY
 *       Once the directory WATCH (a mount's root) or something in it is
 *       opened, swap the directory DIRPATH with a symlink to
 *       TARGET, DIRPATH.aside: "swapped" (or "no-event").
 *
 * The swap is one rename (RENAME_EXCHANGE): NAME never goes missing, so
 * only a check of which file it leads to tells.  READY is created once
 * the watch is in place.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wait until an event of mask on name in dir (NULL: on anything in it),
 * up to end: true when it came. */
static bool wait_event(const char *dir, uint32_t mask, const char *name,
		       double end, const char *ready)
{
	char buf[sizeof(struct inotify_event) + NAME_MAX + 1]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), rfd;

	if (fd < 0 || inotify_add_watch(fd, dir, mask) < 0) {
		perror("inotify");
		exit(2);
	}
	rfd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (rfd < 0) {
		perror(ready);
		exit(2);
	}
	close(rfd);
	/* Spinning, not sleeping: a wake-up would take longer than the
	 * window. */
	while (now() < end) {
		ssize_t n = read(fd, buf, sizeof(buf));
		char *at;

		for (at = buf; n > 0 && at < buf + n;) {
			const struct inotify_event *ev = (const void *)at;

			if ((ev->mask & mask) &&
			    (!name || (ev->len && !strcmp(ev->name, name)))) {
				close(fd);
				return true;
			}
			at += sizeof(*ev) + ev->len;
		}
	}
	close(fd);
	return false;
}

/* Whether marker is in the first MiB of path's file (or fd >= 0). */
static bool holds(int fd, const char *path, const char *marker)
{
	static char data[1 << 20];
	bool own = fd < 0;
	ssize_t n;

	if (own && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = pread(fd, data, sizeof(data), 0);
	if (own)
		close(fd);
	return n > 0 && memmem(data, (size_t)n, marker, strlen(marker));
}

int main(int argc, char **argv)
{
	char path[PATH_MAX], aside[PATH_MAX + 8];
	double end;
	int mine;

	if (argc != 7 || (strcmp(argv[1], "file") && strcmp(argv[1], "symlink") &&
			  strcmp(argv[1], "dir"))) {
		fprintf(stderr, "usage: %s file|symlink|dir DIR NAME MARKER|TARGET SECONDS READY\n",
			argv[0]);
		return 2;
	}
	end = now() + atof(argv[5]);
	if (!strcmp(argv[1], "dir")) {
		snprintf(aside, sizeof(aside), "%s.aside", argv[3]);
		if (symlink(argv[4], aside) < 0) {
			perror("symlink");
			return 1;
		}
		if (!wait_event(argv[2], IN_OPEN, NULL, end,
				argv[6])) {
			puts("no-event");
			return 0;
		}
		if (renameat2(AT_FDCWD, argv[3], AT_FDCWD, aside,
			      RENAME_EXCHANGE) < 0) {
			perror("renameat2");
			return 1;
		}
		puts("swapped");
		return 0;
	}
	snprintf(path, sizeof(path), "%s/%s", argv[2], argv[3]);
	snprintf(aside, sizeof(aside), "%s.aside", path);
	if (!strcmp(argv[1], "symlink")) {
		mine = -1;
		if (symlink(argv[4], aside) < 0) {
			perror("symlink");
			return 1;
		}
	} else {
		mine = open(aside, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (mine < 0) {
			perror("create");
			return 1;
		}
	}
	if (!wait_event(argv[2], IN_CREATE, argv[3], end, argv[6])) {
		puts(mine < 0 ? "no-event" : "ok no-event");
		return 0;
	}
	if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_EXCHANGE) < 0) {
		perror("renameat2");
		return 1;
	}
	if (mine < 0) {
		puts("swapped");
		return 0;
	}
	/* Give the own file the size root gives its own, as soon as it
	 * has one: a destination of another size would be refused. */
	while (now() < end) {
		struct stat st;

		if (stat(aside, &st) == 0 && st.st_size > 0) {
			if (ftruncate(mine, st.st_size) < 0)
				perror("ftruncate");
			break;
		}
	}
	while (now() < end)
		usleep(10000);
	puts(holds(mine, NULL, argv[4]) || holds(-1, aside, argv[4]) ?
		     "leak" : "ok swapped");
	close(mine);
	return 0;
}
